// kbit_half_array.h — arrays of fp32 or bf16 values rounded to fp16, on the host (the `kbit`
// command's --int8 path: bitsandbytes quantizes the float16 copy of a weight).
//
// Where the CPU has F16C and AVX2, `vcvtps2ph` with round-to-nearest-even rounds 8 values per
// instruction exactly as float_to_half() does: ties to even, overflow to infinity, fp16
// subnormals, and a NaN keeps its sign and top 10 payload bits with the quiet bit set (fp32
// subnormals, below the fp16 range, become zero whatever MXCSR's DAZ says). The element loop was
// 68% of a `kbit quantize --int8` of a bf16 checkpoint (perf). Elsewhere, and for the tail, the
// scalar float_to_half(). tests/conformance/test_formats.cpp compares the two on every bf16 value
// and on fp32 values around every fp16 rounding boundary.
#pragma once

#include <cstdint>

#include "kbit_half.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kbit {

namespace half_array_detail {
#if defined(__x86_64__)
// Elements [0, returned) of src, 8 at a time.
__attribute__((target("avx2,f16c"))) inline int64_t bf16_f16c(const uint16_t* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
        const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));  // bf16 -> fp32, exact
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
__attribute__((target("avx2,f16c"))) inline int64_t fp32_f16c(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
// AVX2 (which includes the OS's support of the 256-bit state) and F16C: CPUID.1:ECX bit 29, read
// with cpuid because clang's __builtin_cpu_supports does not know "f16c".
inline bool f16c() {
    static const bool has = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
    }();
    return has;
}
#endif
}  // namespace half_array_detail

// dst[i] = float_to_half(bf16_to_float(src[i])) for i < n.
inline void bf16_to_half_array(const uint16_t* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
#if defined(__x86_64__)
    if (half_array_detail::f16c()) i = half_array_detail::bf16_f16c(src, dst, n);
#endif
    for (; i < n; ++i) dst[i] = float_to_half(bf16_to_float(src[i]));
}

// dst[i] = float_to_half(src[i]) for i < n.
inline void float_to_half_array(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
#if defined(__x86_64__)
    if (half_array_detail::f16c()) i = half_array_detail::fp32_f16c(src, dst, n);
#endif
    for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace kbit
