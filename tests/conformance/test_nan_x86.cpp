// NaN bit patterns of dequantized outputs are x86's on every backend and host (behaviour §1.1): an
// invalid product (0 * Inf) gives 0xFFC00000, a NaN operand comes back made quiet with its sign and
// payload. AArch64's default NaN is 0x7FC00000, so this holds there only because the reference and
// the SIMD kernels rebuild such lanes (kbit_nan_x86.h, hwy_elem-inl.h). The values are written out
// here, not computed on the host.
#include <type_traits>

#include <catch2/catch.hpp>

#include "test_4bit_util.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

// The fp32 NaN `bits` stored as T by the rules of behaviour §1.1.
template <class T>
uint32_t nan_as(uint32_t bits) {
    if (sizeof(T) == 4) return bits;
    if (std::is_same_v<T, kbit_bf16>) return (bits >> 16) | 0x40u;
    return ((bits >> 16) & 0x8000u) | 0x7E00u | ((bits & 0x7FFFFFFFu) >> 13 & 0x3FFu);
}

constexpr uint32_t kIndefinite = 0xFFC00000u;          // x86's result of an invalid operation
constexpr uint32_t kNegativeSignalling = 0xFFA00001u;  // a signalling NaN with sign and payload
constexpr uint32_t kNegativeQuieted = 0xFFE00001u;     // the same made quiet

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

}  // namespace

TEMPLATE_TEST_CASE("nan x86: 4-bit dequantize of 0 * Inf and of a NaN scale", "[4bit][dequantize][nan]"
                   FN_4BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    // NF4 nibble 7 is +0.0, FP4 nibbles 0 and 8 are +0.0 and -0.0: every element a signed zero. Blocks
    // of 64 with scales +Inf, -Inf, a signalling NaN and 1.0, 8 blocks (a SIMD body, a tail).
    const int64_t bs = 64, n = 8 * bs + 5;
    const std::vector<float> scale_cycle = {INFINITY, -INFINITY, from_bits(kNegativeSignalling), 1.0f};
    std::vector<float> absmax;
    for (int64_t b = 0; b * bs < n; ++b) absmax.push_back(scale_cycle[b % 4]);
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        const uint8_t zeros = q == QuantType::NF4 ? 0x77 : 0x08;  // NF4: 0.0 0.0; FP4: +0.0 -0.0
        const std::vector<uint8_t> packed(static_cast<size_t>((n + 1) / 2), zeros);
        const auto got = backend_dequantize<T>(q, packed, absmax, bs, n);
        for (int64_t i = 0; i < n; ++i) {
            const int64_t b = i / bs;
            INFO(qt_name(q) << " " << kbit::Elem<T>::name << " element " << i << " scale " << absmax[b]);
            if (b % 4 == 3) {
                CHECK((bits_of(got[i]) & (sizeof(T) == 4 ? 0x7FFFFFFFu : 0x7FFFu)) == 0u);  // 0 * 1: a zero
            } else {
                CHECK(bits_of(got[i]) == nan_as<T>(b % 4 == 2 ? kNegativeQuieted : kIndefinite));
            }
        }
    }
}

TEMPLATE_TEST_CASE("nan x86: 8-bit dequantize of 0 * Inf and of NaN codes", "[8bit][dequantize][nan]"
                   FN_8BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    // A table with 0.0 at index 0, a signalling NaN at 1 and 1.0 at 2; blocks of 64 with the scales
    // +Inf, 2.0, +Inf and +Inf (the last block of 7: a vector tail or scalar elements on any width);
    // the codes cycle 0, 1, 2 over 3 * 64 + 7 elements.
    std::vector<float> code(256, 0.5f);
    code[0] = 0.0f;
    code[1] = from_bits(kNegativeSignalling);
    code[2] = 1.0f;
    const int B = 64, n = 3 * B + 7;
    std::vector<uint8_t> codes(n);
    for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(i % 3);
    std::vector<float> absmax = {INFINITY, 2.0f, INFINITY, INFINITY};
    DeviceBuffer<float> dcode(code), dabsmax(absmax);
    DeviceBuffer<uint8_t> dcodes(codes);
    DeviceBuffer<T> dout(static_cast<size_t>(n));
    require_ok(Blockwise8<T>::dequantize(dcode.get(), dcodes.get(), dabsmax.get(), dout.get(), B, n), "dequantize");
    const auto got = dout.download();
    for (int i = 0; i < n; ++i) {
        INFO(kbit::Elem<T>::name << " element " << i << " code " << i % 3 << " scale " << absmax[i / B]);
        const bool inf_scale = absmax[i / B] == INFINITY;
        if (i % 3 == 1) CHECK(bits_of(got[i]) == nan_as<T>(kNegativeQuieted));
        else if (i % 3 == 0 && inf_scale) CHECK(bits_of(got[i]) == nan_as<T>(kIndefinite));
        else if (i % 3 == 0) CHECK(bits_of(got[i]) == 0u);
        else CHECK(bits_of(got[i]) == bits_of(kbit::Elem<T>::store(inf_scale ? INFINITY : 2.0f)));
    }
}

TEST_CASE("nan x86: LLM.int8 outlier matmul of Inf * 0", "[8bit][int8][nan]" "[fn:kbit_int8_outlier_matmul_fp16]") {
    // One activation row [+Inf, 1.0] whose column 0 is an outlier column; every weight 0, so each
    // output adds Inf * 0 (invalid: 0xFFC00000, as fp16 0xFE00) to its old value 1.0. Nine outputs:
    // vectors and a tail on every width.
    const int64_t rows = 1, outs = 9, ins = 2;
    const std::vector<kbit_half> A = {kbit_half{0x7C00}, kbit_half{0x3C00}};
    const std::vector<int8_t> W(static_cast<size_t>(outs * ins), 0);
    const std::vector<float> stats(static_cast<size_t>(outs), 1.0f);
    const std::vector<uint8_t> flags = {1, 0};
    const std::vector<kbit_half> out0(static_cast<size_t>(outs), kbit_half{0x3C00});
    for (const kbit_half& y : backend_outlier_matmul(A, W, stats, flags, out0, rows, outs, ins)) CHECK(y.bits == 0xFE00u);
}
