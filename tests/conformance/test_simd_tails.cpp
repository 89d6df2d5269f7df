// SIMD tails: every element count from 1 to past three 64-element groups, so that each family meets
// every remainder modulo the vector widths of every ISA (8 and 16 fp32 lanes, 32 and 64 bytes, the
// four-vector code assembly of 64 codes) and partial last blocks of each length. Exact against the
// scalar reference (kbit::ref), byte for byte: the class of bug a wider ISA brings (a masked tail, a
// partial block, a lane count assumed) fails here whatever ISA the suite runs on.
#include <catch2/catch.hpp>

#include "ref_8bit.h"
#include "test_4bit_util.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

constexpr int64_t kMaxTail = 3 * 64 + 17;

template <class T>
std::vector<T> elements(int64_t n, uint32_t seed) {
    const auto f = normal_floats(static_cast<size_t>(n), seed, 1.0f);
    std::vector<T> x(f.size());
    for (size_t i = 0; i < f.size(); ++i) x[i] = kbit::Elem<T>::store(f[i]);
    return x;
}

}  // namespace

TEMPLATE_TEST_CASE("simd tails: 4-bit quantize and dequantize equal the reference for n = 1 .. 209", "[4bit][tails]"
                   FN_4BIT_QUANTIZE_NF4 FN_4BIT_DEQUANTIZE_NF4, float, kbit_half, kbit_bf16) {
    if (!backend().has_4bit()) return;
    using T = TestType;
    for (int64_t bs : {int64_t{32}, int64_t{64}}) {
        for (int64_t n = 1; n <= kMaxTail; ++n) {
            INFO(kbit::Elem<T>::name << " blocksize " << bs << " n " << n);
            const auto x = elements<T>(n, static_cast<uint32_t>(n));
            std::vector<uint8_t> packed;
            std::vector<float> absmax;
            backend_quantize<T>(QuantType::NF4, x, bs, &packed, &absmax);
            std::vector<uint8_t> ref_packed(static_cast<size_t>((n + 1) / 2));
            std::vector<float> ref_absmax(static_cast<size_t>((n + bs - 1) / bs));
            kbit::ref::quantize_4bit(QuantType::NF4, x.data(), ref_absmax.data(), ref_packed.data(), bs, n);
            REQUIRE(packed == ref_packed);
            REQUIRE(first_bit_difference(absmax, ref_absmax) == -1);
            const auto out = backend_dequantize<T>(QuantType::NF4, packed, absmax, bs, n);
            std::vector<T> ref_out(static_cast<size_t>(n));
            kbit::ref::dequantize_4bit(QuantType::NF4, packed.data(), absmax.data(), ref_out.data(), bs, n);
            REQUIRE(first_bit_difference(out, ref_out) == -1);
        }
    }
}

TEMPLATE_TEST_CASE("simd tails: 8-bit blockwise quantize and dequantize equal the reference for n = 1 .. 209",
                   "[8bit][tails]" FN_8BIT_QUANTIZE FN_8BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    if (!backend().has_8bit()) return;
    using T = TestType;
    const auto code = dynamic_map(true);
    DeviceBuffer<float> dcode(code);
    for (int64_t bs : {int64_t{32}, int64_t{64}}) {
        for (int64_t n = 1; n <= kMaxTail; ++n) {
            INFO(kbit::Elem<T>::name << " blocksize " << bs << " n " << n);
            const auto x = elements<T>(n, static_cast<uint32_t>(1000 + n));
            const size_t blocks = static_cast<size_t>((n + bs - 1) / bs);
            DeviceBuffer<T> dx(x);
            DeviceBuffer<float> dabs(blocks);
            DeviceBuffer<uint8_t> dq(static_cast<size_t>(n));
            DeviceBuffer<T> dout(static_cast<size_t>(n));
            require_ok(Blockwise8<T>::quantize(dcode.get(), dx.get(), dabs.get(), dq.get(), static_cast<int>(bs),
                                               static_cast<int>(n)),
                       "quantize");
            require_ok(Blockwise8<T>::dequantize(dcode.get(), dq.get(), dabs.get(), dout.get(), static_cast<int>(bs),
                                                 static_cast<int>(n)),
                       "dequantize");
            std::vector<uint8_t> ref_q(static_cast<size_t>(n));
            std::vector<float> ref_abs(blocks);
            std::vector<T> ref_out(static_cast<size_t>(n));
            kbit::ref::quantize_blockwise_8bit(code.data(), x.data(), ref_abs.data(), ref_q.data(), bs, n);
            const auto q = dq.download();
            kbit::ref::dequantize_blockwise_8bit(code.data(), q.data(), dabs.download().data(), ref_out.data(), bs, n);
            REQUIRE(q == ref_q);
            REQUIRE(first_bit_difference(dabs.download(), ref_abs) == -1);
            REQUIRE(first_bit_difference(dout.download(), ref_out) == -1);
        }
    }
}

TEST_CASE("simd tails: LLM.int8 row quantization equals the reference for cols = 1 .. 209", "[8bit][tails]"
          "[fn:cint8_vector_quant]") {
    if (!backend().has_8bit()) return;
    constexpr int64_t rows = 3;
    for (int64_t cols = 1; cols <= kMaxTail; ++cols) {
        INFO("cols " << cols);
        const auto a = elements<kbit_half>(rows * cols, static_cast<uint32_t>(2000 + cols));
        DeviceBuffer<kbit_half> da(a);
        DeviceBuffer<int8_t> dq(static_cast<size_t>(rows * cols));
        DeviceBuffer<float> ds(static_cast<size_t>(rows));
        require_ok(backend().fns_8bit.cint8_vector_quant(da.get(), dq.get(), ds.get(), 0.0f, static_cast<int>(rows),
                                                   static_cast<int>(cols), nullptr),
                   "cint8_vector_quant");
        std::vector<int8_t> ref_q(static_cast<size_t>(rows * cols));
        std::vector<float> ref_s(static_cast<size_t>(rows));
        kbit::ref::int8_vector_quant(a.data(), ref_q.data(), ref_s.data(), 0.0f, rows, cols);
        REQUIRE(dq.download() == ref_q);
        REQUIRE(first_bit_difference(ds.download(), ref_s) == -1);
    }
}
