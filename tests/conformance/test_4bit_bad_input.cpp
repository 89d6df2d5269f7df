// Bad input on every 4-bit function: the exact status and message, and outputs left untouched
// (every output buffer is filled with a sentinel byte and checked afterwards).
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

const std::string kBlocks = "32, 64, 128, 256, 512, 1024, 2048, 4096";

// Output buffers of one call, sentinel-filled; untouched() checks they still hold the sentinel.
struct Outputs {
    std::vector<DeviceBuffer<uint8_t>*> bufs;
    explicit Outputs(std::initializer_list<DeviceBuffer<uint8_t>*> b) : bufs(b) {
        for (auto* p : bufs) p->fill_bytes(0xA5);
    }
    void check_untouched() const {
        for (auto* p : bufs)
            for (uint8_t byte : p->bytes()) REQUIRE(byte == 0xA5);
    }
};

template <class T>
T* as(DeviceBuffer<uint8_t>& b) {
    return reinterpret_cast<T*>(b.get());
}

void expect(kbit_status s, const std::string& message, const Outputs& outs) {
    check_invalid(s, message);
    outs.check_untouched();
}

}  // namespace

TEMPLATE_TEST_CASE("4bit bad input: blockwise quantize and dequantize", "[4bit][bad_input]" FN_4BIT_QUANTIZE
                   FN_4BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    DeviceBuffer<uint8_t> in(4096 * 8), absmax(4096), packed(4096 * 4), out(4096 * 8);
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        const std::string suffix = std::string(kbit::Elem<T>::name) + "_" + qt_name(q);
        const std::string qf = "cquantize_blockwise_" + suffix, df = "cdequantize_blockwise_" + suffix;
        DYNAMIC_SECTION(qf << " / " << df) {
            auto quant = Fns4<T>::quantize(q);
            auto deq = Fns4<T>::dequantize(q);
            T* x = as<T>(in);
            float* a = as<float>(absmax);
            {
                Outputs o{&absmax, &packed};
                expect(quant(nullptr, nullptr, a, packed.get(), 64, 128), qf + ": A is NULL", o);
                expect(quant(nullptr, x, nullptr, packed.get(), 64, 128), qf + ": absmax is NULL", o);
                expect(quant(nullptr, x, a, nullptr, 64, 128), qf + ": out is NULL", o);
                expect(quant(nullptr, x, a, packed.get(), 64, -1), qf + ": n is -1, must be >= 0", o);
                for (int bs : {48, 16, 8192, 0, -64})
                    expect(quant(nullptr, x, a, packed.get(), bs, 128),
                           qf + ": blocksize " + std::to_string(bs) + " is not one of " + kBlocks, o);
                // n = 0 is a valid empty call even with NULL buffers
                CHECK(quant(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_SUCCESS);
                o.check_untouched();
            }
            {
                Outputs o{&out};
                expect(deq(nullptr, nullptr, a, as<T>(out), 64, 128, nullptr), df + ": A is NULL", o);
                expect(deq(nullptr, packed.get(), nullptr, as<T>(out), 64, 128, nullptr), df + ": absmax is NULL", o);
                expect(deq(nullptr, packed.get(), a, nullptr, 64, 128, nullptr), df + ": out is NULL", o);
                expect(deq(nullptr, packed.get(), a, as<T>(out), 64, -5, nullptr), df + ": n is -5, must be >= 0", o);
                for (int bs : {48, 16, 8192, 0})
                    expect(deq(nullptr, packed.get(), a, as<T>(out), bs, 128, nullptr),
                           df + ": blocksize " + std::to_string(bs) + " is not one of " + kBlocks, o);
            }
            {
                // In place (output over an input) is refused: the kernels would read what they wrote.
                const std::string overlap = " (in-place or overlapping buffers are not supported)";
                Outputs o{&in, &absmax, &packed};
                uint8_t* codes_in_x = reinterpret_cast<uint8_t*>(x);
                expect(deq(nullptr, packed.get(), a, reinterpret_cast<T*>(packed.get()), 64, 128, nullptr),
                       df + ": out overlaps A" + overlap, o);
                expect(deq(nullptr, packed.get(), a, reinterpret_cast<T*>(absmax.get()) + 1, 64, 128, nullptr),
                       df + ": out overlaps absmax" + overlap, o);
                expect(quant(nullptr, x, a, codes_in_x + 100, 64, 128), qf + ": out overlaps A" + overlap, o);
                expect(quant(nullptr, x, reinterpret_cast<float*>(x) + 3, packed.get(), 64, 128),
                       qf + ": absmax overlaps A" + overlap, o);
                expect(quant(nullptr, x, a, reinterpret_cast<uint8_t*>(a) + 4, 64, 128),
                       qf + ": out overlaps absmax" + overlap, o);
                // Adjacent buffers are not overlapping: the 64 codes right after 128 elements.
                CHECK(quant(nullptr, x, a, codes_in_x + 128 * sizeof(T), 64, 128) == KBIT_STATUS_SUCCESS);
            }
        }
    }
}

TEST_CASE("4bit bad input: kbit_quantize_4bit and kbit_dequantize_4bit", "[4bit][bad_input]"
          "[fn:kbit_quantize_4bit][fn:kbit_dequantize_4bit]") {
    DeviceBuffer<uint8_t> in(4096), absmax(256), packed(2048), out(4096);
    const auto& fns_4bit = backend().fns_4bit;
    const std::string qf = "kbit_quantize_4bit", df = "kbit_dequantize_4bit";
    const int64_t too_big = (int64_t{1} << 62) + 1;
    float* a = as<float>(absmax);
    {
        Outputs o{&absmax, &packed};
        expect(fns_4bit.kbit_quantize_4bit(3, KBIT_DTYPE_FP32, in.get(), a, packed.get(), 64, 128, nullptr),
               qf + ": quant_type 3 is not KBIT_QUANT_FP4 (1) or KBIT_QUANT_NF4 (2)", o);
        expect(fns_4bit.kbit_quantize_4bit(0, KBIT_DTYPE_FP32, in.get(), a, packed.get(), 64, 128, nullptr),
               qf + ": quant_type 0 is not KBIT_QUANT_FP4 (1) or KBIT_QUANT_NF4 (2)", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_NF4, 7, in.get(), a, packed.get(), 64, 128, nullptr),
               qf + ": dtype 7 is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_NF4, -1, in.get(), a, packed.get(), 64, 128, nullptr),
               qf + ": dtype -1 is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_BF16, in.get(), a, packed.get(), 64, too_big, nullptr),
               qf + ": n is 4611686018427387905, must be <= 4611686018427387904", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_BF16, in.get(), a, packed.get(), 64, -1, nullptr),
               qf + ": n is -1, must be >= 0", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_FP4, KBIT_DTYPE_FP16, in.get(), a, packed.get(), 8192, 128, nullptr),
               qf + ": blocksize 8192 is not one of " + kBlocks, o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_FP4, KBIT_DTYPE_FP16, in.get(), a, packed.get(), int64_t{1} << 40,
                                     128, nullptr),
               qf + ": blocksize 1099511627776 is not one of " + kBlocks, o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_FP4, KBIT_DTYPE_FP16, nullptr, a, packed.get(), 64, 128, nullptr),
               qf + ": A is NULL", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_FP4, KBIT_DTYPE_FP16, in.get(), nullptr, packed.get(), 64, 128, nullptr),
               qf + ": absmax is NULL", o);
        expect(fns_4bit.kbit_quantize_4bit(KBIT_QUANT_FP4, KBIT_DTYPE_FP16, in.get(), a, nullptr, 64, 128, nullptr),
               qf + ": out is NULL", o);
    }
    {
        Outputs o{&out};
        expect(fns_4bit.kbit_dequantize_4bit(9, KBIT_DTYPE_FP32, packed.get(), a, out.get(), 64, 128, nullptr),
               df + ": quant_type 9 is not KBIT_QUANT_FP4 (1) or KBIT_QUANT_NF4 (2)", o);
        expect(fns_4bit.kbit_dequantize_4bit(KBIT_QUANT_NF4, 3, packed.get(), a, out.get(), 64, 128, nullptr),
               df + ": dtype 3 is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)", o);
        expect(fns_4bit.kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, packed.get(), a, out.get(), 64,
                                       std::numeric_limits<int64_t>::max(), nullptr),
               df + ": n is 9223372036854775807, must be <= 4611686018427387904", o);
        expect(fns_4bit.kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, packed.get(), a, out.get(), 16, 128, nullptr),
               df + ": blocksize 16 is not one of " + kBlocks, o);
        expect(fns_4bit.kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, nullptr, a, out.get(), 64, 128, nullptr),
               df + ": A is NULL", o);
        expect(fns_4bit.kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, packed.get(), nullptr, out.get(), 64, 128,
                                       nullptr),
               df + ": absmax is NULL", o);
        expect(fns_4bit.kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, packed.get(), a, nullptr, 64, 128, nullptr),
               df + ": out is NULL", o);
    }
}

TEMPLATE_TEST_CASE("4bit bad input: GEMV and GEMM", "[4bit][bad_input]" FN_4BIT_GEMV FN_4BIT_GEMM,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    DeviceBuffer<uint8_t> A(4096), B(8192), absmax(1024), lut(64), out(4096), q8(256), code(1024), off(4), bias(512);
    const std::string gv = std::string("cgemm_4bit_inference_naive_") + kbit::Elem<T>::name;
    const std::string gm = std::string("cgemm_4bit_") + kbit::Elem<T>::name;
    auto gemv = Fns4<T>::gemv();
    auto gemm = Fns4<T>::gemm();
    T* a = as<T>(A);
    T* o_ = as<T>(out);
    float* am = as<float>(absmax);
    float* dt = as<float>(lut);
    Outputs o{&out};
    SECTION(gv) {
        expect(gemv(-1, 1, 64, a, B.get(), am, dt, o_, 1, 32, 1, 64, nullptr), gv + ": m is -1, must be >= 0", o);
        expect(gemv(4, 1, -2, a, B.get(), am, dt, o_, 4, 32, 4, 64, nullptr), gv + ": k is -2, must be >= 0", o);
        expect(gemv(4, 1, 63, a, B.get(), am, dt, o_, 4, 32, 4, 64, nullptr), gv + ": k is 63, must be even", o);
        expect(gemv(4, 1, 64, a, B.get(), am, dt, o_, 4, 31, 4, 64, nullptr),
               gv + ": ldb is 31, must be >= k / 2 = 32", o);
        for (int bs : {48, 16, 8192, 0})
            expect(gemv(4, 1, 64, a, B.get(), am, dt, o_, 4, 32, 4, bs, nullptr),
                   gv + ": blocksize " + std::to_string(bs) + " is not one of " + kBlocks, o);
        expect(gemv(4, 1, 64, nullptr, B.get(), am, dt, o_, 4, 32, 4, 64, nullptr), gv + ": A is NULL", o);
        expect(gemv(4, 1, 64, a, nullptr, am, dt, o_, 4, 32, 4, 64, nullptr), gv + ": B is NULL", o);
        expect(gemv(4, 1, 64, a, B.get(), nullptr, dt, o_, 4, 32, 4, 64, nullptr), gv + ": absmax is NULL", o);
        expect(gemv(4, 1, 64, a, B.get(), am, nullptr, o_, 4, 32, 4, 64, nullptr), gv + ": datatype is NULL", o);
        expect(gemv(4, 1, 64, a, B.get(), am, dt, nullptr, 4, 32, 4, 64, nullptr), gv + ": out is NULL", o);
    }
    SECTION(gm) {
        const uint8_t* b = B.get();
        const uint8_t* q = q8.get();
        const float* c = as<float>(code);
        const float* of = as<float>(off);
        const T* bi = as<T>(bias);
        expect(gemm(a, b, am, nullptr, nullptr, nullptr, o_, bi, -1, 8, 64, 64, 2, nullptr),
               gm + ": M is -1, must be >= 0", o);
        expect(gemm(a, b, am, nullptr, nullptr, nullptr, o_, bi, 2, -8, 64, 64, 2, nullptr),
               gm + ": N is -8, must be >= 0", o);
        expect(gemm(a, b, am, nullptr, nullptr, nullptr, o_, bi, 2, 8, -64, 64, 2, nullptr),
               gm + ": K is -64, must be >= 0", o);
        expect(gemm(a, b, am, nullptr, nullptr, nullptr, o_, bi, 2, 8, 65, 64, 2, nullptr),
               gm + ": K is 65, must be even", o);
        for (int bs : {48, 16, 8192, 0})
            expect(gemm(a, b, am, nullptr, nullptr, nullptr, o_, bi, 2, 8, 64, bs, 2, nullptr),
                   gm + ": blocksize " + std::to_string(bs) + " is not one of " + kBlocks, o);
        expect(gemm(nullptr, b, am, nullptr, nullptr, nullptr, o_, bi, 2, 8, 64, 64, 2, nullptr), gm + ": A is NULL", o);
        expect(gemm(a, nullptr, am, nullptr, nullptr, nullptr, o_, bi, 2, 8, 64, 64, 2, nullptr), gm + ": B is NULL", o);
        expect(gemm(a, b, nullptr, nullptr, nullptr, nullptr, o_, bi, 2, 8, 64, 64, 2, nullptr),
               gm + ": absmax is NULL", o);
        expect(gemm(a, b, am, q, nullptr, of, o_, bi, 2, 8, 64, 64, 2, nullptr), gm + ": absmax_code is NULL", o);
        expect(gemm(a, b, am, q, c, nullptr, o_, bi, 2, 8, 64, 64, 2, nullptr), gm + ": absmax_offset is NULL", o);
        expect(gemm(a, b, am, nullptr, nullptr, nullptr, nullptr, bi, 2, 8, 64, 64, 2, nullptr), gm + ": out is NULL",
               o);
    }
}

// k = 0 is documented as allowed with NULL inputs (the table too): every output is the empty sum, 0.
// The SIMD kernels once read the NULL table up front (SIGSEGV).
TEMPLATE_TEST_CASE("4bit bad input: GEMV with k = 0 writes zeros and reads no input", "[4bit][bad_input]" FN_4BIT_GEMV,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    DeviceBuffer<T> out(8);
    out.fill_bytes(0xA5);
    auto gemv = Fns4<T>::gemv();
    REQUIRE(gemv(8, 1, 0, nullptr, nullptr, nullptr, nullptr, out.get(), 0, 0, 0, 64, nullptr) == KBIT_STATUS_SUCCESS);
    for (T v : out.download()) CHECK(kbit::Elem<T>::load(v) == 0.0f);
}

TEST_CASE("4bit bad input: nested absmax", "[4bit][bad_input]"
          "[fn:kbit_nested_absmax_quantize][fn:kbit_nested_absmax_dequantize]") {
    const auto& fns_4bit = backend().fns_4bit;
    DeviceBuffer<uint8_t> absmax(4096), code(1024), q(1024), nested(64), off(4), restored(4096);
    const std::string qf = "kbit_nested_absmax_quantize", df = "kbit_nested_absmax_dequantize";
    const float* a = as<float>(absmax);
    const float* c = as<float>(code);
    float* n = as<float>(nested);
    float* of = as<float>(off);
    {
        Outputs o{&q, &nested, &off};
        expect(fns_4bit.kbit_nested_absmax_quantize(a, c, q.get(), n, of, -3, 256, nullptr), qf + ": blocks is -3, must be >= 0",
               o);
        expect(fns_4bit.kbit_nested_absmax_quantize(a, c, q.get(), n, of, (int64_t{1} << 62) + 1, 256, nullptr),
               qf + ": blocks is 4611686018427387905, must be <= 4611686018427387904", o);
        for (int64_t nbs : {int64_t{48}, int64_t{16}, int64_t{8192}, int64_t{0}})
            expect(fns_4bit.kbit_nested_absmax_quantize(a, c, q.get(), n, of, 1000, nbs, nullptr),
                   qf + ": nested_blocksize " + std::to_string(nbs) + " is not one of " + kBlocks, o);
        expect(fns_4bit.kbit_nested_absmax_quantize(nullptr, c, q.get(), n, of, 1000, 256, nullptr), qf + ": absmax is NULL", o);
        expect(fns_4bit.kbit_nested_absmax_quantize(a, nullptr, q.get(), n, of, 1000, 256, nullptr), qf + ": code is NULL", o);
        expect(fns_4bit.kbit_nested_absmax_quantize(a, c, nullptr, n, of, 1000, 256, nullptr), qf + ": qabsmax is NULL", o);
        expect(fns_4bit.kbit_nested_absmax_quantize(a, c, q.get(), nullptr, of, 1000, 256, nullptr),
               qf + ": nested_absmax is NULL", o);
        expect(fns_4bit.kbit_nested_absmax_quantize(a, c, q.get(), n, nullptr, 1000, 256, nullptr), qf + ": offset is NULL", o);
        CHECK(fns_4bit.kbit_nested_absmax_quantize(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 256, nullptr) ==
              KBIT_STATUS_SUCCESS);
    }
    {
        Outputs o{&restored};
        float* r = as<float>(restored);
        expect(fns_4bit.kbit_nested_absmax_dequantize(q.get(), c, n, 0.5f, r, -1, 256, nullptr),
               df + ": blocks is -1, must be >= 0", o);
        expect(fns_4bit.kbit_nested_absmax_dequantize(q.get(), c, n, 0.5f, r, 1000, 100, nullptr),
               df + ": nested_blocksize 100 is not one of " + kBlocks, o);
        expect(fns_4bit.kbit_nested_absmax_dequantize(nullptr, c, n, 0.5f, r, 1000, 256, nullptr), df + ": qabsmax is NULL", o);
        expect(fns_4bit.kbit_nested_absmax_dequantize(q.get(), nullptr, n, 0.5f, r, 1000, 256, nullptr), df + ": code is NULL",
               o);
        expect(fns_4bit.kbit_nested_absmax_dequantize(q.get(), c, nullptr, 0.5f, r, 1000, 256, nullptr),
               df + ": nested_absmax is NULL", o);
        expect(fns_4bit.kbit_nested_absmax_dequantize(q.get(), c, n, 0.5f, nullptr, 1000, 256, nullptr),
               df + ": absmax is NULL", o);
    }
}

TEMPLATE_TEST_CASE("4bit bad input: torchao NF4", "[4bit][bad_input]" FN_4BIT_TORCHAO, float, kbit_half, kbit_bf16) {
    using T = TestType;
    DeviceBuffer<uint8_t> w(1 << 16), qd(1 << 14), qs(1024), qf(64), mean(8), out(1 << 16);
    const std::string fq = std::string("kbit_quantize_nf4_torchao_") + kbit::Elem<T>::name;
    const std::string fd = std::string("kbit_dequantize_nf4_torchao_") + kbit::Elem<T>::name;
    auto quant = Fns4<T>::torchao_quantize();
    auto deq = Fns4<T>::torchao_dequantize();
    const T* x = as<T>(w);
    int8_t* s = reinterpret_cast<int8_t*>(qs.get());
    T* f = as<T>(qf);
    T* m = as<T>(mean);
    const int64_t n = 64 * 256;
    {
        Outputs o{&qd, &qs, &qf, &mean};
        expect(quant(x, qd.get(), s, f, m, -64, 64, 256, nullptr), fq + ": n is -64, must be >= 0", o);
        expect(quant(x, qd.get(), s, f, m, n, 0, 256, nullptr), fq + ": block_size is 0, must be > 0", o);
        expect(quant(x, qd.get(), s, f, m, n, 63, 256, nullptr), fq + ": block_size is 63, must be even", o);
        expect(quant(x, qd.get(), s, f, m, n, 64, -1, nullptr), fq + ": scaler_block_size is -1, must be > 0", o);
        expect(quant(x, qd.get(), s, f, m, n + 2, 64, 256, nullptr),
               fq + ": n is 16386, must be a multiple of block_size 64", o);
        expect(quant(x, qd.get(), s, f, m, n, 64, 300, nullptr),
               fq + ": n / block_size is 256 scalers, must be a multiple of scaler_block_size 300", o);
        expect(quant(x, qd.get(), s, f, m, (int64_t{1} << 62) + 64, 64, 256, nullptr),
               fq + ": n is 4611686018427387968, must be <= 4611686018427387904", o);
        expect(quant(nullptr, qd.get(), s, f, m, n, 64, 256, nullptr), fq + ": w is NULL", o);
        expect(quant(x, nullptr, s, f, m, n, 64, 256, nullptr), fq + ": quantized_data is NULL", o);
        expect(quant(x, qd.get(), nullptr, f, m, n, 64, 256, nullptr), fq + ": quantized_scalers is NULL", o);
        expect(quant(x, qd.get(), s, nullptr, m, n, 64, 256, nullptr), fq + ": quantization_factor is NULL", o);
        expect(quant(x, qd.get(), s, f, nullptr, n, 64, 256, nullptr), fq + ": scaler_mean is NULL", o);
    }
    {
        Outputs o{&out};
        T* y = as<T>(out);
        expect(deq(qd.get(), s, f, m, y, n, 64, 7, nullptr),
               fd + ": n / block_size is 256 scalers, must be a multiple of scaler_block_size 7", o);
        expect(deq(qd.get(), s, f, m, y, 100, 64, 256, nullptr), fd + ": n is 100, must be a multiple of block_size 64",
               o);
        expect(deq(nullptr, s, f, m, y, n, 64, 256, nullptr), fd + ": quantized_data is NULL", o);
        expect(deq(qd.get(), nullptr, f, m, y, n, 64, 256, nullptr), fd + ": quantized_scalers is NULL", o);
        expect(deq(qd.get(), s, nullptr, m, y, n, 64, 256, nullptr), fd + ": quantization_factor is NULL", o);
        expect(deq(qd.get(), s, f, nullptr, y, n, 64, 256, nullptr), fd + ": scaler_mean is NULL", o);
        expect(deq(qd.get(), s, f, m, nullptr, n, 64, 256, nullptr), fd + ": out is NULL", o);
    }
}
