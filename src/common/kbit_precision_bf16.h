// kbit_precision_bf16.h — the rules of the bf16 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.7), shared by the reference and every kernel so that all of them give the same
// bytes. The class is what vdpbf16ps computes: bf16 weights and activations, subnormal bf16 inputs read
// as zero (DAZ), each pair of products added to an fp32 lane by two fused multiply-adds (the odd element
// first) whose subnormal results are flushed to zero (FTZ); 16 lanes take 32 consecutive elements of K,
// lane j elements 2j and 2j + 1, and the lanes are summed at the end in a fixed tree.
#pragma once

#include <cmath>
#include <cstdint>

#include "kbit_half.h"
#include "kbit_nan_x86.h"

namespace kbit {

// Elements of K per step of the 16 fp32 lanes (one 512-bit vector of bf16).
constexpr int64_t kBf16Group = 32;
constexpr int kBf16Lanes = 16;

// A subnormal bf16 (exponent field 0) as the zero of its sign: vdpbf16ps's DAZ.
inline uint16_t bf16_daz(uint16_t h) { return (h & 0x7F80u) == 0 ? static_cast<uint16_t>(h & 0x8000u) : h; }

// The class's weight: level * s rounded to fp32 and then to bf16 (kbit_dequantize_4bit's bf16 element), DAZ.
inline uint16_t bf16_class_weight(float level, float s) { return bf16_daz(float_to_bf16(mul_rn(level, s))); }

// The class's activation: x rounded to bf16 (the identity for a bf16 input), DAZ.
inline uint16_t bf16_class_activation(float x) { return bf16_daz(float_to_bf16(x)); }

// One step of a lane: acc + a * w with one rounding (the product of two bf16 is exact in fp32 unless it
// underflows), a subnormal result flushed to the zero of its sign.
inline float bf16_lane_step(float acc, uint16_t a, uint16_t w) {
    const float r = std::fma(bf16_to_float(a), bf16_to_float(w), acc);
    return (r != 0.0f && std::fabs(r) < 0x1.0p-126f) ? std::copysign(0.0f, r) : r;
}

// The sum of the 16 lanes: halves added lane by lane (8 + 8, 4 + 4, 2 + 2, 1 + 1), plain fp32 adds.
inline float bf16_lane_tree(const float* lanes) {
    float t[8];
    for (int i = 0; i < 8; ++i) t[i] = lanes[i] + lanes[i + 8];
    for (int i = 0; i < 4; ++i) t[i] = t[i] + t[i + 4];
    for (int i = 0; i < 2; ++i) t[i] = t[i] + t[i + 2];
    return t[0] + t[1];
}

}  // namespace kbit
