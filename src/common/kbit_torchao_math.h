// kbit_torchao_math.h — the per-block and per-element steps of torchao's NF4Tensor (to_nf4 and
// get_original_weight; docs/behaviour.md §5), written once for every backend: the reference
// (src/ref/ref_4bit.cpp) and the CUDA kernels (src/cuda/torchao_nf4.cu) both call these, so they
// agree by construction. Each tensor operation is one fp32 operation rounded to the weight dtype T
// (torch's CPU evaluation), its NaN results with x86 bits (kbit_nan_x86.h) so that a GPU produces
// the CPU's bytes. The scaler stage (torch's cascade mean, the factors, the int8 codes) is not here:
// only the reference has it, and the CUDA backend runs that on the host.
// Compiles as C++17 and as CUDA (KBIT_HD); host code is built with -ffp-contract=off and CUDA code
// with --fmad=false, so every operation below is rounded on its own.
#pragma once

#include <math.h>

#include <cstdint>

#include "kbit_formats.h"  // KBIT_HD
#include "kbit_half.h"
#include "kbit_nan_x86.h"

namespace kbit {

// Entry j of torchao's NF4 table (the 4-decimal literals of nf4_tensor.py, not kNf4Values) as
// torchao builds it: double -> fp32 -> T, returned as fp32.
template <class T>
KBIT_HD float torchao_nf4_value(int j) {
    constexpr double kValues[16] = {-1.0,   -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0,
                                    0.0796, 0.1609,  0.2461,  0.3379,  0.4407,  0.5626,  0.7230,  1.0};
    return round_to<T>(static_cast<float>(kValues[j]));
}

// Block scaler: max |w| over the block in T, starting at 0; any NaN makes it the quiet NaN
// 0x7FC00000 (torch.max propagates NaN).
template <class T>
KBIT_HD T torchao_block_scaler(const T* w, int64_t block_size) {
    float amax = 0.0f;
    bool nan = false;
    for (int64_t i = 0; i < block_size; ++i) {
        const float a = fabsf(Elem<T>::load(w[i]));
        nan |= a != a;
        amax = amax < a ? a : amax;
    }
    return Elem<T>::store(nan ? bits_float(0x7FC00000u) : amax);
}

// Index of the table entry nearest to v by |RN_T(v - table[j])|: the first minimum wins (strict <),
// and the first NaN difference wins outright (torch's argmin).
template <class T>
KBIT_HD uint8_t torchao_nearest(float v, const float* table) {
    int best = 0;
    float best_diff = fabsf(round_to<T>(sub_rn(v, table[0])));
    if (best_diff != best_diff) return 0;
    for (int j = 1; j < 16; ++j) {
        const float d = fabsf(round_to<T>(sub_rn(v, table[j])));
        if (d != d) return static_cast<uint8_t>(j);
        if (d < best_diff) {
            best_diff = d;
            best = j;
        }
    }
    return static_cast<uint8_t>(best);
}

// The NF4 index of element w of a block with scaler s (both as stored in T, loaded to fp32).
template <class T>
KBIT_HD uint8_t torchao_element_index(float w, float s, const float* table) {
    return torchao_nearest<T>(round_to<T>(div_rn(w, s)), table);
}

// The dequantizer's block scaler restored from its int8 code: RN_T(RN_T(q / factor) + mean).
template <class T>
KBIT_HD float torchao_restored_scaler(int8_t q, float factor, float mean) {
    return round_to<T>(add_rn(round_to<T>(div_rn(static_cast<float>(q), factor)), mean));
}

// One dequantized element: RN_T(table[nibble] * scaler).
template <class T>
KBIT_HD T torchao_dequantize_element(float table_value, float scaler) {
    return Elem<T>::store(mul_rn(table_value, scaler));
}

}  // namespace kbit
