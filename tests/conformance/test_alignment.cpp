// Alignment: the ABI requires no alignment beyond the element type's own (abi/ABI.md, "Memory"), so
// every function must give the same bytes for buffers at any such address: byte buffers (codes,
// packed nibbles, int8) at odd addresses, 16-bit elements at addresses that are only even, floats at
// multiples of 4 that no vector width divides. Each call here runs twice, on vector-aligned buffers
// and on shifted ones, and the outputs must be equal byte for byte. Under UBSan (scripts/sanitize)
// a kernel that loads a wider type through a misaligned pointer is also reported.
#include <catch2/catch.hpp>

#include "optim8_cases.h"
#include "test_4bit_util.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

// Device bytes of which `size` are used, starting `shift` bytes past a 64-byte-aligned allocation.
class Shifted {
public:
    Shifted(size_t size, size_t shift) : size_(size), shift_(shift), buf_(size + shift + 64) {}
    template <class T>
    T* as() const {
        return reinterpret_cast<T*>(buf_.get() + shift_);
    }
    void upload(const void* host) { device_copy(buf_.get() + shift_, host, size_, KBIT_MEMCPY_HOST_TO_DEVICE); }
    std::vector<uint8_t> download() const {
        std::vector<uint8_t> host(size_);
        device_copy(host.data(), buf_.get() + shift_, size_, KBIT_MEMCPY_DEVICE_TO_HOST);
        return host;
    }

private:
    size_t size_, shift_;
    DeviceBuffer<uint8_t> buf_;
};

// Shifts that keep the element type's alignment but no larger one: 0 (aligned) and a misaligned one.
template <class T>
size_t misaligned_shift() {
    return sizeof(T) == 1 ? 1 : sizeof(T) == 2 ? 2 : 4;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

template <class T>
std::vector<uint8_t> element_bytes(size_t n, uint32_t seed) {
    return to_dtype(normal_floats(n, seed, 1.0f), kbit::Elem<T>::dtype);
}

// Runs `outputs(shift)` on vector-aligned buffers (shift 0) and on shifted ones (shift 1); it returns
// the bytes of every output buffer, which must be the same both times.
template <class Outputs>
void check_same_bytes_shifted(Outputs outputs) {
    std::vector<std::vector<uint8_t>> aligned;
    for (size_t shift : {size_t{0}, size_t{1}}) {
        INFO("shift " << shift);
        const std::vector<std::vector<uint8_t>> got = outputs(shift);
        if (shift == 0) aligned = got;
        for (size_t i = 0; shift != 0 && i < got.size(); ++i) {
            INFO("output " << i);
            CHECK(got[i] == aligned[i]);
        }
    }
}

}  // namespace

TEMPLATE_TEST_CASE("alignment: 4-bit quantize, dequantize and GEMV give the same bytes at any element-aligned address",
                   "[4bit][alignment]" FN_4BIT_QUANTIZE_NF4 FN_4BIT_DEQUANTIZE_NF4 FN_4BIT_GEMV,
                   float, kbit_half, kbit_bf16) {
    if (!backend().has_4bit()) return;
    using T = TestType;
    constexpr int bs = 64, rows = 13, cols = 5 * bs, n = rows * cols;  // whole blocks per row: the SIMD GEMV
    const auto x = element_bytes<T>(n, 11);
    const size_t packed = n / 2, scales = (n + bs - 1) / bs * 4;
    check_same_bytes_shifted([&](size_t shift) {
        const size_t se = shift ? misaligned_shift<T>() : 0, sf = shift ? 4 : 0, sb = shift;
        Shifted dx(n * sizeof(T), se), dabs(scales, sf), dq(packed, sb), dout(n * sizeof(T), se);
        dx.upload(x.data());
        require_ok(Fns4<T>::quantize(QuantType::NF4)(nullptr, dx.as<T>(), dabs.as<float>(), dq.as<uint8_t>(), bs, n),
                   "quantize");
        require_ok(Fns4<T>::dequantize(QuantType::NF4)(nullptr, dq.as<uint8_t>(), dabs.as<float>(), dout.as<T>(), bs,
                                                       n, nullptr),
                   "dequantize");
        // GEMV over the same packed weights as a [rows, cols] matrix.
        Shifted da(cols * sizeof(T), se), dlut(16 * 4, sf), dy(rows * sizeof(T), se);
        da.upload(x.data());
        const auto table = bytes_of(std::vector<float>(kbit::kNf4Values, kbit::kNf4Values + 16));
        dlut.upload(table.data());
        require_ok(Fns4<T>::gemv()(rows, 1, cols, da.as<T>(), dq.as<uint8_t>(), dabs.as<float>(), dlut.as<float>(),
                                   dy.as<T>(), cols, cols / 2, rows, bs, nullptr),
                   "gemv");
        return std::vector<std::vector<uint8_t>>{dq.download(), dabs.download(), dout.download(), dy.download()};
    });
}

TEMPLATE_TEST_CASE("alignment: the grouped 4-bit GEMM gives the same bytes at any element-aligned address",
                   "[4bit][alignment][grouped][fn:kbit_gemm_4bit_grouped]", float, kbit_half, kbit_bf16) {
    if (!backend().has_4bit()) return;
    using T = TestType;
    constexpr int64_t E = 3, N = 24, K = 192, bs = 64, tokens = 5, top_k = 2, n = E * N * K;
    const auto a = element_bytes<T>(static_cast<size_t>(tokens * K), 21);
    const auto w = random_bytes(static_cast<size_t>(n / 2), 22);
    std::vector<float> scales(static_cast<size_t>(n / bs));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.01f + 0.001f * static_cast<float>(i % 37);
    const std::vector<int32_t> ids = {0, 1, 2, 0, 1, 1, 0, 2, 2, 1};
    const std::vector<float> comb = {0.5f, -1.25f, 0.75f, 0.125f, 2.0f, -0.5f, 1.0f, 0.25f, -0.75f, 1.5f};
    for (bool with_combine : {false, true}) {
        DYNAMIC_SECTION((with_combine ? "combine" : "rows")) {
            check_same_bytes_shifted([&](size_t shift) {
                const size_t se = shift ? misaligned_shift<T>() : 0, sf = shift ? 4 : 0, sb = shift;
                const int64_t out_elems = with_combine ? tokens * N : tokens * top_k * N;
                Shifted dA(a.size(), se), dB(w.size(), sb), dabs(scales.size() * 4, sf), dids(ids.size() * 4, sf),
                    dcomb(comb.size() * 4, sf), dout(static_cast<size_t>(out_elems) * sizeof(T), se);
                dA.upload(a.data());
                dB.upload(w.data());
                dabs.upload(scales.data());
                dids.upload(ids.data());
                dcomb.upload(comb.data());
                require_ok(backend().fns_4bit.kbit_gemm_4bit_grouped(
                               kbit::Elem<T>::dtype, dA.as<T>(), 1, dB.as<uint8_t>(), dabs.as<float>(), nullptr,
                               nullptr, nullptr, E, N, K, bs, KBIT_QUANT_NF4, dids.as<int32_t>(), tokens, top_k,
                               with_combine ? dcomb.as<float>() : nullptr, dout.as<T>(), nullptr),
                           "kbit_gemm_4bit_grouped");
                return std::vector<std::vector<uint8_t>>{dout.download()};
            });
        }
    }
}

TEMPLATE_TEST_CASE("alignment: 8-bit blockwise quantize and dequantize give the same bytes at any element-aligned address",
                   "[8bit][alignment]" FN_8BIT_QUANTIZE FN_8BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    if (!backend().has_8bit()) return;
    using T = TestType;
    constexpr int n = 3 * 256 + 77, bs = 256;
    const auto x = element_bytes<T>(n, 12);
    const auto code = bytes_of(dynamic_map(true));
    const size_t scales = (n + bs - 1) / bs * 4;
    check_same_bytes_shifted([&](size_t shift) {
        const size_t se = shift ? misaligned_shift<T>() : 0, sf = shift ? 4 : 0;
        Shifted dcode(1024, sf), dx(n * sizeof(T), se), dabs(scales, sf), dc(n, shift), dout(n * sizeof(T), se);
        dcode.upload(code.data());
        dx.upload(x.data());
        require_ok(Blockwise8<T>::quantize(dcode.as<float>(), dx.as<T>(), dabs.as<float>(), dc.as<uint8_t>(), bs, n),
                   "quantize");
        require_ok(Blockwise8<T>::dequantize(dcode.as<float>(), dc.as<uint8_t>(), dabs.as<float>(), dout.as<T>(), bs, n),
                   "dequantize");
        return std::vector<std::vector<uint8_t>>{dc.download(), dabs.download(), dout.download()};
    });
}

TEST_CASE("alignment: LLM.int8 quantization and the int8 GEMM give the same bytes at odd addresses", "[8bit][alignment]"
          "[fn:cint8_vector_quant][fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32]") {
    if (!backend().has_8bit()) return;
    const auto& b = backend().fns_8bit;
    constexpr int rows = 5, cols = 67, outs = 7;  // odd sizes: no row starts on a vector boundary
    const auto a = element_bytes<kbit_half>(rows * cols, 13);
    kbit_context* ctx = b.get_context();
    REQUIRE(ctx != nullptr);
    check_same_bytes_shifted([&](size_t shift) {
        Shifted da(rows * cols * 2, shift ? 2 : 0), dq(rows * cols, shift), ds(rows * 4, shift ? 4 : 0);
        Shifted dw(outs * cols, shift), dc(rows * outs * 4, shift ? 4 : 0);
        da.upload(a.data());
        require_ok(b.cint8_vector_quant(da.as<kbit_half>(), dq.as<int8_t>(), ds.as<float>(), 0.0f, rows, cols, nullptr),
                   "cint8_vector_quant");
        std::vector<uint8_t> w(outs * cols);
        for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 37 + 11);
        dw.upload(w.data());
        require_ok(b.cigemmlt_32(ctx, cols, rows, outs, dw.as<int8_t>(), dq.as<int8_t>(), dc.as<int32_t>(), nullptr, cols,
                                 cols, outs, nullptr),
                   "cigemmlt_32");
        return std::vector<std::vector<uint8_t>>{dq.download(), ds.download(), dc.download()};
    });
    CHECK(b.kbit_context_destroy(ctx) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("alignment: 8-bit optimizers give the same bytes at any element-aligned address", "[optim8][alignment]"
          "[fn:cadam_8bit_blockwise_grad_fp32][fn:cadam_8bit_blockwise_grad_fp16][fn:cadam_8bit_blockwise_grad_bf16]"
          "[fn:cmomentum_8bit_blockwise_grad_fp32][fn:cmomentum_8bit_blockwise_grad_fp16]"
          "[fn:cmomentum_8bit_blockwise_grad_bf16]") {
    if (!backend().has_optim8()) return;
    constexpr int n = 2 * 256 + 45;
    const auto q1 = bytes_of(dynamic_map(true)), q2 = bytes_of(dynamic_map(false));
    for (const auto& f : optim8_functions()) {
        if (f.kind != Kind::Adam && f.kind != Kind::Momentum) continue;
        const bool two = kbit::optim::two_state(f.kind);
        const size_t es = dtype_size(f.dtype);
        const auto p = to_dtype(normal_floats(n, 21, 0.1f), f.dtype);
        const auto g = to_dtype(normal_floats(n, 22, 0.01f), f.dtype);
        Hyper h = default_hyper(f.kind, 3, 0.01f);
        INFO(f.name);
        check_same_bytes_shifted([&](size_t shift) {
            const size_t se = shift ? (es == 2 ? 2 : 4) : 0, sf = shift ? 4 : 0;
            const size_t blocks = (n + 255) / 256;
            Shifted dp(n * es, se), dg(n * es, se), ds1(n, shift), ds2(n, shift), dq1(1024, sf), dq2(1024, sf);
            Shifted da1(blocks * 4, sf), da2(blocks * 4, sf);
            const std::vector<uint8_t> zeros(n, 0), zero_scales(blocks * 4, 0);
            dp.upload(p.data()), dg.upload(g.data()), dq1.upload(q1.data()), dq2.upload(q2.data());
            ds1.upload(zeros.data()), ds2.upload(zeros.data()), da1.upload(zero_scales.data()), da2.upload(zero_scales.data());
            require_ok(f.call(dp.as<void>(), dg.as<void>(), ds1.as<uint8_t>(), two ? ds2.as<uint8_t>() : nullptr,
                              dq1.as<float>(), two ? dq2.as<float>() : nullptr, da1.as<float>(),
                              two ? da2.as<float>() : nullptr, h, n),
                       f.name.c_str());
            return std::vector<std::vector<uint8_t>>{dp.download(), ds1.download(), ds2.download(), da1.download(),
                                                     da2.download()};
        });
    }
}
