// kbit_half.h — scalar fp16 / bf16 <-> fp32 conversions (round to nearest even) and the element
// traits every kernel template uses. Compiles as C++17 and as CUDA.
#pragma once

#include <cstdint>
#include <cstring>

#include "kbit/kbit_core.h"
#include "kbit_formats.h"  // KBIT_HD

namespace kbit {

KBIT_HD uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

KBIT_HD float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

KBIT_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays NaN (quietened), infinities and subnormals are exact cases of RN.
KBIT_HD uint16_t float_to_bf16(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
}

KBIT_HD float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t man = h & 0x3FFu;
    if (exp == 0x1Fu) return bits_float(sign | 0x7F800000u | (man << 13));  // Inf / NaN
    if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
    // zero or subnormal: man * 2^-24 is exact in fp32
    const float mag = static_cast<float>(man) * 0x1.0p-24f;
    return bits_float(sign | float_bits(mag));
}

// IEEE round to nearest even, with overflow to infinity and gradual underflow.
KBIT_HD uint16_t float_to_half(float f) {
    const uint32_t u = float_bits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
    if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520
    if (abs >= 0x38800000u) {                                               // normal half range
        const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
    }
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
    // subnormal half: shift the full significand right and round to nearest even
    const uint32_t exp = abs >> 23;
    const uint32_t man = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14 + (112 - exp) + ... ; exp in [102, 112]
    const uint32_t halfway = 1u << (shift - 1);
    const uint32_t rest = man & ((1u << shift) - 1u);
    uint32_t q = man >> shift;
    if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
}

// ------------------------------------------------------------------------------------------------
// Element traits: load to fp32, store from fp32 with one RN rounding.
// ------------------------------------------------------------------------------------------------

template <class T> struct Elem;

template <> struct Elem<float> {
    static constexpr const char* name = "fp32";
    static constexpr int32_t dtype = KBIT_DTYPE_FP32;
    KBIT_HD static float load(float x) { return x; }
    KBIT_HD static float store(float x) { return x; }
};

template <> struct Elem<kbit_half> {
    static constexpr const char* name = "fp16";
    static constexpr int32_t dtype = KBIT_DTYPE_FP16;
    KBIT_HD static float load(kbit_half x) { return half_to_float(x.bits); }
    KBIT_HD static kbit_half store(float x) { return kbit_half{float_to_half(x)}; }
};

template <> struct Elem<kbit_bf16> {
    static constexpr const char* name = "bf16";
    static constexpr int32_t dtype = KBIT_DTYPE_BF16;
    KBIT_HD static float load(kbit_bf16 x) { return bf16_to_float(x.bits); }
    KBIT_HD static kbit_bf16 store(float x) { return kbit_bf16{float_to_bf16(x)}; }
};

static_assert(sizeof(kbit_half) == 2 && sizeof(kbit_bf16) == 2, "16-bit storage types");

// x rounded to the storage type T and back (identity for float): the T-typed result of an fp32
// operation, as torch and bitsandbytes evaluate operations on fp16/bf16 tensors.
template <class T>
KBIT_HD float round_to(float x) {
    return Elem<T>::load(Elem<T>::store(x));
}

}  // namespace kbit
