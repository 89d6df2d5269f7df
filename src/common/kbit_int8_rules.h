// kbit_int8_rules.h — the element rules of LLM.int8 (docs/behaviour.md §7): bitsandbytes' constants,
// the outlier threshold, the row statistic, the float -> int8 conversions. Written once for every
// backend: the reference (src/ref/ref_8bit.cpp), the CPU backend's scalar paths and the CUDA
// kernels (src/cuda/int8_llm.cu, igemm_kernels.cu) call these, so they agree by construction.
// Compiles as C++17 and as CUDA (KBIT_HD); host code is built with -ffp-contract=off and CUDA code
// with --fmad=false --prec-div=true, so '*' and '/' below are single IEEE operations.
#pragma once

#include <math.h>

#include <cstdint>

#include "kbit_formats.h"  // KBIT_HD
#include "kbit_half.h"

namespace kbit {

// fp32(1 / 127) (hex 3c010204): bitsandbytes' int8 dequantization factor.
constexpr float kInv127 = 0x1.020408p-7f;
// fp32(1 / (127 * 127)) = 6.200012e-05f (hex 38820610): cdequant_mm_int32_fp16's constant.
constexpr float kMmDequantScale = 0x1.040c20p-14f;

// ------------------------------------------------------------------------------------------------
// Row-wise quantization (cint8_vector_quant) and outlier columns (kbit_int8_vectorwise_quant).
// The threshold is validated >= 0 and not NaN; 0 means no outliers.
// ------------------------------------------------------------------------------------------------

KBIT_HD bool int8_has_outliers(float threshold) { return threshold > 0.0f; }

// bitsandbytes compares the fp16 magnitudes with the threshold as an fp16 value in the row statistic
// and the outlier columns, but with the fp32 threshold when it zeroes an element.
KBIT_HD float int8_threshold_fp16(float threshold) { return half_to_float(float_to_half(threshold)); }

// One step of the row statistic, started at +0.0: the max of |a| over the elements below the fp16
// threshold (all of them without outliers). NaN never wins.
KBIT_HD float int8_row_stat_fold(float amax, float abs_a, float threshold, float threshold_fp16) {
    return ((!int8_has_outliers(threshold) || abs_a < threshold_fp16) && abs_a > amax) ? abs_a : amax;
}

// The row's scale 127 / amax (IEEE division; +inf for an all-zero row, whose elements then give 0).
KBIT_HD float int8_row_scale(float amax) { return 127.0f / amax; }

// CUDA's __float2int_rn stored into int8: NaN -> 0, saturate to int32, round half to even, keep the
// low 8 bits (values beyond 127 wrap; they occur when the threshold is not an fp16 value).
KBIT_HD int8_t int8_low_byte_rn(float v) {
    int32_t q;
    if (v != v) q = 0;
    else if (v >= 2147483648.0f) q = INT32_MAX;
    else if (v <= -2147483648.0f) q = INT32_MIN;
    else q = static_cast<int32_t>(rintf(v));  // exact: |rintf(v)| < 2^31 here; default mode: ties to even
    return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(q) & 0xFFu));
}

// One quantized element: 0 for an outlier (|a| >= threshold, compared in fp32), else the low byte of
// rn(a * scale).
KBIT_HD int8_t int8_quantize_element(float a, float scale, float threshold) {
    return (int8_has_outliers(threshold) && !(fabsf(a) < threshold)) ? int8_t{0} : int8_low_byte_rn(a * scale);
}

// Whether an element makes its column an outlier column (only asked when int8_has_outliers).
KBIT_HD bool int8_is_outlier(float abs_a, float threshold_fp16) { return abs_a >= threshold_fp16; }

// ------------------------------------------------------------------------------------------------
// int8 outputs of the int8 GEMM (cigemmlt_8, cigemmlt_8_rowscale).
// ------------------------------------------------------------------------------------------------

// float -> int8: round half to even, saturate to [-128, 127], NaN -> 0.
KBIT_HD int8_t int8_saturate_rn(float v) {
    if (v != v) return 0;
    const float r = rintf(v);
    return static_cast<int8_t>(r >= 127.0f ? 127.0f : (r <= -128.0f ? -128.0f : r));
}

// cigemmlt_8's store: the int32 sum saturated to int8.
KBIT_HD int8_t int8_saturate(int32_t v) { return static_cast<int8_t>(v > 127 ? 127 : (v < -128 ? -128 : v)); }

// cigemmlt_8_rowscale's store: the int32 sum times the output row's scale, then int8_saturate_rn.
KBIT_HD int8_t int8_scale_saturate_rn(int32_t acc, float row_scale) {
    return int8_saturate_rn(static_cast<float>(acc) * row_scale);
}

}  // namespace kbit
