// kbit_formats.h — every 4-bit format constant and decision rule, shared by all backends.
// Compiles as C++17 and as CUDA; KBIT_HD marks functions usable on host and device.
// The literals are hex floats of the exact fp32 bits bitsandbytes' kernels use (so that outputs are bit-exact; docs/behaviour.md §1).
#pragma once

#include <math.h>

#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit/kbit_8bit.h"  // KBIT_8BIT_BLOCKSIZE_MAX

#if defined(__CUDACC__)
#  define KBIT_HD __host__ __device__ __forceinline__
#else
#  define KBIT_HD inline
#endif

namespace kbit {

// ------------------------------------------------------------------------------------------------
// Blocksizes
// ------------------------------------------------------------------------------------------------

constexpr int64_t kMinBlocksize = KBIT_BLOCKSIZE_MIN;
constexpr int64_t kMaxBlocksize = KBIT_BLOCKSIZE_MAX;
// Used verbatim in error messages so that every backend words them the same way.
constexpr const char* kBlocksizeList = "32, 64, 128, 256, 512, 1024, 2048, 4096";

// Whether `list` is "MIN, 2*MIN, ..., MAX" (the check that keeps kBlocksizeList true to the header).
constexpr bool lists_powers_of_two(const char* list, int64_t min, int64_t max) {
    for (int64_t b = min; b <= max; b *= 2) {
        int64_t v = 0;
        if (*list < '0' || *list > '9') return false;
        while (*list >= '0' && *list <= '9') v = v * 10 + (*list++ - '0');
        if (v != b) return false;
        if (b < max && (*list++ != ',' || *list++ != ' ')) return false;
    }
    return *list == '\0';
}
static_assert(lists_powers_of_two(kBlocksizeList, kMinBlocksize, kMaxBlocksize),
              "kBlocksizeList lists the powers of two from KBIT_BLOCKSIZE_MIN to KBIT_BLOCKSIZE_MAX");

KBIT_HD bool is_supported_blocksize(int64_t b) {
    return b >= kMinBlocksize && b <= kMaxBlocksize && (b & (b - 1)) == 0;
}

// The 8-bit blockwise functions of a backend at 8bit 1.1 or later take powers of two up to
// KBIT_8BIT_BLOCKSIZE_MAX (1.0: kMaxBlocksize).
constexpr int64_t kMaxBlocksize8bit = KBIT_8BIT_BLOCKSIZE_MAX;
constexpr const char* kBlocksizeList8bit = "32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384";
static_assert(lists_powers_of_two(kBlocksizeList8bit, kMinBlocksize, kMaxBlocksize8bit),
              "kBlocksizeList8bit lists the powers of two from KBIT_BLOCKSIZE_MIN to KBIT_8BIT_BLOCKSIZE_MAX");

// ------------------------------------------------------------------------------------------------
// Block absmax (4-bit and 8-bit quantizers, optimizer states): an fmax-style fold of |x| in which a
// NaN never wins, started where bitsandbytes' kernels start it: -FLT_MAX for a full block, 0 for a
// partial last block (its zero padding takes part in the reduction). So an all-NaN full block gets
// absmax -FLT_MAX and an all-NaN partial last block 0, as in bitsandbytes.
// ------------------------------------------------------------------------------------------------

KBIT_HD float absmax_fold(float acc, float x) {
    const float a = fabsf(x);  // -0.0 gives +0.0
    return a > acc ? a : acc;
}

KBIT_HD float absmax_start(int64_t valid, int64_t blocksize) {
    return valid < blocksize ? 0.0f : -0x1.fffffep+127f;
}

// ------------------------------------------------------------------------------------------------
// NF4: 16 ascending normal-float levels (index = nibble) and the 15 decision thresholds.
// Thresholds are bitsandbytes' decimal literals rounded to fp32; T0, T8, T12 and T14 are 1 ulp away
// from the fp32 midpoint of their neighbours, so they must not be recomputed.
// ------------------------------------------------------------------------------------------------

#define KBIT_NF4_VALUES                                                                          \
    -0x1.0000000p+0f, -0x1.6473620p-1f, -0x1.0cd6600p-1f, -0x1.9465400p-2f, -0x1.23449a0p-2f,    \
    -0x1.7a6a7e0p-3f, -0x1.74f0e20p-4f, 0x0.0p+0f, 0x1.45f5fe0p-4f, 0x1.4995c60p-3f,             \
    0x1.f809ba0p-3f, 0x1.5a06740p-2f, 0x1.c349700p-2f, 0x1.200f560p-1f, 0x1.7227660p-1f,         \
    0x1.0000000p+0f

// bits: bf591cd9 bf1c5270 beeb8480 beadea76 be703cec be0d38bc bd3a7871 3d22faff 3df64863 3e5067e0
//       3e9582d4 3ec753f9 3f006d03 3f248daf 3f5c89d9
#define KBIT_NF4_THRESHOLDS                                                                      \
    -0x1.b239b20p-1f, -0x1.38a4e00p-1f, -0x1.d709000p-2f, -0x1.5bd4ec0p-2f, -0x1.e079d80p-3f,    \
    -0x1.1a71780p-3f, -0x1.74f0e20p-5f, 0x1.45f5fe0p-5f, 0x1.ec90c60p-4f, 0x1.a0cfc00p-3f,       \
    0x1.2b05a80p-2f, 0x1.8ea7f20p-2f, 0x1.00da060p-1f, 0x1.491b5e0p-1f, 0x1.b913b20p-1f

constexpr float kNf4Values[16] = {KBIT_NF4_VALUES};
constexpr float kNf4Thresholds[15] = {KBIT_NF4_THRESHOLDS};

// NF4 index of a normalised value: the number of thresholds it exceeds (strict, so a tie goes to
// the lower index; NaN exceeds none and gives 0). Written as a balanced tree for device code.
KBIT_HD uint8_t nf4_index(float y) {
    if (y > 0x1.45f5fe0p-5f) {             // T7
        if (y > 0x1.2b05a80p-2f) {         // T10
            if (y > 0x1.00da060p-1f) {     // T12
                if (y > 0x1.b913b20p-1f) return 15;
                return y > 0x1.491b5e0p-1f ? 14 : 13;
            }
            return y > 0x1.8ea7f20p-2f ? 12 : 11;
        }
        if (y > 0x1.ec90c60p-4f) return y > 0x1.a0cfc00p-3f ? 10 : 9;
        return 8;
    }
    if (y > -0x1.5bd4ec0p-2f) {            // T3
        if (y > -0x1.1a71780p-3f) return y > -0x1.74f0e20p-5f ? 7 : 6;
        return y > -0x1.e079d80p-3f ? 5 : 4;
    }
    if (y > -0x1.38a4e00p-1f) return y > -0x1.d709000p-2f ? 3 : 2;
    return y > -0x1.b239b20p-1f ? 1 : 0;
}

// ------------------------------------------------------------------------------------------------
// FP4: bit 3 = sign, bits 2..0 = magnitude code. Magnitudes (raw / 12) in code order; the magnitude
// order is 000 < 001 < 110 < 111 < 100 < 101 < 010 < 011.
// ------------------------------------------------------------------------------------------------

#define KBIT_FP4_MAGNITUDES                                                                      \
    0x0.0p+0f, 0x1.5555560p-8f, 0x1.5555560p-1f, 0x1.0000000p+0f, 0x1.5555560p-2f,               \
    0x1.0000000p-1f, 0x1.5555560p-3f, 0x1.0000000p-2f

// Dequantization table indexed by the whole nibble; nibble 1000 is -0.0 as in bitsandbytes' CUDA
// kernels and scalar CPU path (its Python quant_map holds +0.0 there).
#define KBIT_FP4_VALUES                                                                          \
    KBIT_FP4_MAGNITUDES, -0x0.0p+0f, -0x1.5555560p-8f, -0x1.5555560p-1f, -0x1.0000000p+0f,       \
    -0x1.5555560p-2f, -0x1.0000000p-1f, -0x1.5555560p-3f, -0x1.0000000p-2f

constexpr float kFp4Values[16] = {KBIT_FP4_VALUES};

// bitsandbytes' threshold literals as fp32: 0.00260417 (3b2aaab9), 0.0859375, 0.20833333, 0.29166667,
// 0.4166667 (3ed55556), 0.583333 (3f155550), 0.8333333, ascending; between the sorted magnitudes.
#define KBIT_FP4_MAGNITUDE_THRESHOLDS                                                            \
    0x1.5555720p-9f, 0x1.6000000p-4f, 0x1.aaaaaa0p-3f, 0x1.2aaaaa0p-2f, 0x1.aaaaac0p-2f,          \
    0x1.2aaaa00p-1f, 0x1.aaaaaa0p-1f

constexpr float kFp4MagnitudeThresholds[7] = {KBIT_FP4_MAGNITUDE_THRESHOLDS};

// FP4 index of a normalised value: sign 8 for y < 0, magnitude code of the number of magnitude
// thresholds |y| exceeds (strict: ties go to the smaller magnitude). Written out for device code.
KBIT_HD uint8_t fp4_index(float y) {
    const uint8_t sign = y < 0.0f ? 8 : 0;  // -0.0 and NaN get sign 0
    const float a = y < 0.0f ? -y : y;      // NaN stays NaN and falls through to 000
    uint8_t code;
    if (a > 0x1.2aaaaa0p-2f) {
        if (a > 0x1.2aaaa00p-1f) code = a > 0x1.aaaaaa0p-1f ? 3 : 2;
        else code = a > 0x1.aaaaac0p-2f ? 5 : 4;
    } else {
        if (a > 0x1.6000000p-4f) code = a > 0x1.aaaaaa0p-3f ? 7 : 6;
        else code = a > 0x1.5555720p-9f ? 1 : 0;
    }
    return static_cast<uint8_t>(sign | code);
}

// ------------------------------------------------------------------------------------------------
// Packing: element 2j -> high nibble of byte j, element 2j+1 -> low nibble.
// ------------------------------------------------------------------------------------------------

KBIT_HD uint8_t nibble_at(const uint8_t* packed, int64_t i) {
    const uint8_t byte = packed[i >> 1];
    return (i & 1) ? (byte & 0x0F) : (byte >> 4);
}

KBIT_HD uint8_t pack_nibbles(uint8_t even, uint8_t odd) {
    return static_cast<uint8_t>((even << 4) | (odd & 0x0F));
}

enum class QuantType : int32_t { FP4 = 1, NF4 = 2 };

}  // namespace kbit
