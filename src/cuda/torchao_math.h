// torchao_math.h — the per-element and per-block steps of torchao's NF4Tensor that the CUDA kernels
// run, as host/device functions written to evaluate exactly what the scalar reference
// (src/ref/ref_4bit.cpp, torchao_*) evaluates: every tensor operation in fp32 rounded to the
// weight dtype T, NaN results with x86 bits (nan_x86.h). tests/cuda/host_logic.cpp compares each
// function with kbit::ref on the host. The scaler stage (torch's cascade mean, the factor, the int8
// codes) is not here: the CUDA backend runs kbit::ref::torchao_scalers itself on the host.
#pragma once

#include <math.h>

#include <cstdint>

#include "kbit_formats.h"
#include "kbit_half.h"
#include "nan_x86.h"

namespace kbit {

// torchao's NF4 literals (nf4_tensor.py), as the reference converts them: double -> fp32 -> T.
#define KBIT_TORCHAO_NF4_VALUES                                                                         \
    -1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0, 0.0796, 0.1609, 0.2461, 0.3379, \
        0.4407, 0.5626, 0.7230, 1.0

// x rounded to T and back (identity for float): torch's T-typed result of an fp32 operation.
template <class T>
KBIT_HD float round_to(float x) {
    return Elem<T>::load(Elem<T>::store(x));
}

// Block scaler: max |w| over the block; any NaN makes it the canonical quiet NaN (torch.max).
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

// Nearest entry of the 16-entry table to v by |RN_T(v - table[j])|: the first minimum wins, and the
// first NaN difference wins outright (torch's argmin).
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

// The NF4 index of element w in a block with scaler s (both as stored in T, loaded to fp32).
template <class T>
KBIT_HD uint8_t torchao_element_index(float w, float s, const float* table) {
    return torchao_nearest<T>(round_to<T>(div_rn(w, s)), table);
}

// Restored block scaler of the dequantizer: RN_T(RN_T(q / factor) + mean).
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
