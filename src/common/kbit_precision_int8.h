// kbit_precision_int8.h — the rules of the int8 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.6), shared by the reference and every kernel so that all of them quantize the
// activations alike and only the integer dot products differ in how they are computed:
//   - the 4-bit levels as int8 (L = round(127 * level), a fixed table per format);
//   - one 32-element chunk of an activation row cut to int8 with its fp32 scale;
//   - the fp32 term a chunk's exact integer dot product contributes to an output.
#pragma once

#include <cstdint>
#include <cstring>

#include "kbit_formats.h"

namespace kbit {

// Elements per activation chunk; K must be a multiple of it.
constexpr int64_t kInt8Chunk = 32;

// round(127 * level) of the NF4 and FP4 tables, by nibble (FP4's -0.0 is 0; 63.5 rounds to 64). The
// largest |L/127 - level| is 0.0036711 (NF4 nibble 5) and 1/254 (FP4 nibbles 5 and 13).
constexpr int8_t kNf4Int8Levels[16] = {-127, -88, -67, -50, -36, -23, -12, 0, 10, 20, 31, 43, 56, 71, 92, 127};
constexpr int8_t kFp4Int8Levels[16] = {0, 1, 85, 127, 42, 64, 21, 32, 0, -1, -85, -127, -42, -64, -21, -32};

inline const int8_t* int8_levels(QuantType qt) { return qt == QuantType::FP4 ? kFp4Int8Levels : kNf4Int8Levels; }

// One quantized chunk: q[i] in [-127, 127], e = d / 127 with d = amax / 127 (the factor the chunk's
// integer sums are scaled by, together with the weight block's absmax), qsum = sum of q (for kernels
// that offset the weights to unsigned bytes).
struct Int8Chunk {
    float e;
    int32_t qsum;
};

// Quantizes x[0..32) to q (behaviour.md §3.6): amax = max |x| (as the largest magnitude bit pattern, so
// that a NaN or an infinity is seen); a non-finite amax makes e NaN and q zero; otherwise
// p = x * (127 / amax) (two fp32 roundings), a NaN p (0 * inf when 127 / amax overflows, or amax == 0)
// counts as 0, p is clamped to [-127, 127] and rounded to nearest, ties to even.
inline Int8Chunk quantize_int8_chunk(const float* x, int8_t* q) {
    uint32_t amax_bits = 0;
    for (int64_t i = 0; i < kInt8Chunk; ++i) {
        uint32_t u;
        std::memcpy(&u, &x[i], 4);
        u &= 0x7FFFFFFFu;
        if (u > amax_bits) amax_bits = u;
    }
    float amax;
    std::memcpy(&amax, &amax_bits, 4);
    Int8Chunk c{0.0f, 0};
    if (amax_bits >= 0x7F800000u) {  // Inf or NaN somewhere in the chunk
        const uint32_t nan_bits = 0x7FC00000u;
        std::memcpy(&c.e, &nan_bits, 4);
        std::memset(q, 0, kInt8Chunk);
        return c;
    }
    const float inv = 127.0f / amax;
    for (int64_t i = 0; i < kInt8Chunk; ++i) {
        float p = x[i] * inv;
        if (p != p) p = 0.0f;
        p = p < -127.0f ? -127.0f : (p > 127.0f ? 127.0f : p);
        // Adding and removing 1.5 * 2^23 rounds |p| <= 127 to an integer, ties to even, exactly.
        const float r = (p + 12582912.0f) - 12582912.0f;
        q[i] = static_cast<int8_t>(r);
        c.qsum += q[i];
    }
    const float d = amax / 127.0f;
    c.e = d / 127.0f;
    return c;
}

// The fp32 term of one chunk of one output: (s * e) * float(isum), each product rounded to fp32 (no
// fused multiply-add); s is the weight block's absmax, isum the exact integer sum of q * L over the chunk
// (|isum| <= 32 * 127 * 127 < 2^24, so float(isum) is exact).
inline float int8_chunk_term(float s, float e, int32_t isum) {
    const float se = s * e;
    return se * static_cast<float>(isum);
}

}  // namespace kbit
