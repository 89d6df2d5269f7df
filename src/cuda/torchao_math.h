// torchao_math.h — the arithmetic of torchao's NF4Tensor (to_nf4 / get_original_weight) as scalar
// host/device functions, so that every kbit backend can evaluate it the same way.
//
// torchao computes in the weight's dtype T: each tensor operation is evaluated in fp32 and rounded
// to T (round to nearest even), which is what torch does for fp16/bf16 on CPU and GPU. Reductions:
// max propagates NaN (torch.max); the scaler mean is defined here as the double-precision sequential
// sum of the block scales, divided by their count in double and rounded to fp32, then to T (torch's
// own mean is order-dependent; this is kbit's fixed choice). NaN results carry x86 bits (nan_x86.h).
//
// NOTE for the CPU backend: the CUDA backend uses exactly these functions; a CPU implementation that
// includes this header (or evaluates the same expressions in the same order) produces identical bytes.
#pragma once

#include <cmath>
#include <cstdint>

#include "kbit_half.h"
#include "nan_x86.h"

namespace kbit {

// torchao's 16-entry NF4 table as written in its source (decimal literals). Rounding these to fp16
// or bf16 directly or through fp32 gives the same values.
#define KBIT_TORCHAO_NF4_VALUES                                                                  \
    -1.0f, -0.6962f, -0.5251f, -0.3949f, -0.2844f, -0.1848f, -0.0911f, 0.0f, 0.0796f, 0.1609f,   \
    0.2461f, 0.3379f, 0.4407f, 0.5626f, 0.7230f, 1.0f

// Rounds an fp32 value to T and back (identity for float).
template <class T> KBIT_HD float round_to(float x) { return Elem<T>::load(Elem<T>::store(x)); }

template <class T> KBIT_HD float t_mul(float a, float b) { return round_to<T>(mul_rn(a, b)); }
template <class T> KBIT_HD float t_div(float a, float b) { return round_to<T>(div_rn(a, b)); }
template <class T> KBIT_HD float t_add(float a, float b) { return round_to<T>(add_rn(a, b)); }
template <class T> KBIT_HD float t_sub(float a, float b) { return round_to<T>(sub_rn(a, b)); }

// torch.max over |x| with NaN propagation: the first NaN (in reduction order) wins.
KBIT_HD float torch_absmax_step(float acc, float x) {
    const float a = fabsf(x);
    if (acc != acc) return acc;
    if (a != a) return a;
    return a > acc ? a : acc;
}

// Scaler mean from the sequential double sum of the block scales.
template <class T> KBIT_HD float torchao_mean(double sum, int64_t count) {
    return round_to<T>(static_cast<float>(sum / static_cast<double>(count)));
}

// Quantization factor of one scaler block: 256 / (2 * max |d|), in T.
template <class T> KBIT_HD float torchao_factor(float scaler_absmax) {
    return t_div<T>(256.0f, t_mul<T>(2.0f, scaler_absmax));
}

// int8 code of a centred scaler d: clamp(round_half_even(d * factor), -128, 127); NaN gives 0.
template <class T> KBIT_HD int8_t torchao_scaler_code(float d, float factor) {
    const float v = t_mul<T>(d, factor);
    if (v != v) return 0;
    const float r = rintf(v);  // ties to even (default rounding mode)
    return static_cast<int8_t>(r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r));
}

// Restored block scale: (q / factor) + mean, each rounded to T.
template <class T> KBIT_HD float torchao_scaler(int8_t q, float factor, float mean) {
    return t_add<T>(t_div<T>(static_cast<float>(q), factor), mean);
}

// NF4 index of w in a block with scale s: argmin_j |RN_T(w / s) - nf4_T[j]| computed in T, the first
// minimum winning; a NaN difference counts as the minimum (torch.min), so NaN input gives 0.
template <class T> KBIT_HD uint8_t torchao_nf4_index(float w, float s, const float* nf4_t) {
    const float y = t_div<T>(w, s);
    int best = 0;
    float best_d = fabsf(t_sub<T>(y, nf4_t[0]));
    if (best_d != best_d) return 0;
    for (int j = 1; j < 16; ++j) {
        const float d = fabsf(t_sub<T>(y, nf4_t[j]));
        if (d != d) return static_cast<uint8_t>(j);
        if (d < best_d) {
            best = j;
            best_d = d;
        }
    }
    return static_cast<uint8_t>(best);
}

}  // namespace kbit
