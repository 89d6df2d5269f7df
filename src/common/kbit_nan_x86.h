// kbit_nan_x86.h — NaN results with x86 (SSE/AVX) bits, for host and device code.
// GPUs return one canonical NaN (0x7FFFFFFF) from any arithmetic on NaN; x86 returns the first NaN
// operand made quiet, or the "real indefinite" 0xFFC00000 for an invalid operation (inf * 0, inf -
// inf, 0 / 0). The CPU backend runs on x86, so the CUDA kernels pass the results that reach an output
// through these helpers and produce the same bytes even for NaN inputs; shared rules that both the
// reference and the kernels call (kbit_torchao_math.h) use them too, and on an x86 host they are the
// plain operations. Compiles as C++ and CUDA.
#pragma once

#include <cstdint>

#include "kbit_half.h"

namespace kbit {

KBIT_HD bool is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// `r` = the IEEE result of a binary operation on a and b: unchanged unless it is a NaN.
KBIT_HD float x86_nan2(float r, float a, float b) {
    if (!is_nan_bits(float_bits(r))) return r;
    const uint32_t ua = float_bits(a), ub = float_bits(b);
    if (is_nan_bits(ua)) return bits_float(ua | 0x00400000u);
    if (is_nan_bits(ub)) return bits_float(ub | 0x00400000u);
    return bits_float(0xFFC00000u);
}

// As x86_nan2 for a fused multiply-add fma(a, b, c): the first NaN operand in argument order.
KBIT_HD float x86_nan3(float r, float a, float b, float c) {
    if (!is_nan_bits(float_bits(r))) return r;
    const uint32_t uc = float_bits(c);
    if (!is_nan_bits(float_bits(a)) && !is_nan_bits(float_bits(b)) && is_nan_bits(uc))
        return bits_float(uc | 0x00400000u);
    return x86_nan2(r, a, b);
}

// IEEE single operations, rounded to nearest, never contracted, with x86 NaN results.
#if defined(__CUDA_ARCH__)
KBIT_HD float mul_rn(float a, float b) { return x86_nan2(__fmul_rn(a, b), a, b); }
KBIT_HD float add_rn(float a, float b) { return x86_nan2(__fadd_rn(a, b), a, b); }
KBIT_HD float sub_rn(float a, float b) { return x86_nan2(__fsub_rn(a, b), a, b); }
KBIT_HD float div_rn(float a, float b) { return x86_nan2(__fdiv_rn(a, b), a, b); }
KBIT_HD float fma_rn(float a, float b, float c) { return x86_nan3(__fmaf_rn(a, b, c), a, b, c); }
#else
KBIT_HD float mul_rn(float a, float b) { return x86_nan2(a * b, a, b); }
KBIT_HD float add_rn(float a, float b) { return x86_nan2(a + b, a, b); }
KBIT_HD float sub_rn(float a, float b) { return x86_nan2(a - b, a, b); }
KBIT_HD float div_rn(float a, float b) { return x86_nan2(a / b, a, b); }
KBIT_HD float fma_rn(float a, float b, float c) { return x86_nan3(__builtin_fmaf(a, b, c), a, b, c); }
#endif

}  // namespace kbit
