// ref_4bit_bf16.h — scalar reference of the bf16 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.7): weights and activations rounded to bf16, exact products, 16 fp32 lanes over
// groups of 32 elements of K in vdpbf16ps's order, a fixed tree at the end. It is the definition the CPU
// kernels reproduce byte for byte and the oracle of the conformance suite.
#pragma once

#include <cstdint>

#include "kbit_formats.h"
#include "kbit_half.h"
#include "kbit_precision_bf16.h"

namespace kbit::ref {

// Activation rows as the class reads them: row m of K elements (row-major A) to bf16_class_activation,
// followed by zeros up to the padded length kp = 32 * ceil(K / 32) (a[m*kp + k]).
template <class T>
void bf16_activation_rows(const T* A, int64_t M, int64_t K, uint16_t* a);

// The lane sum (before bias) of one output: prepared activation row a (padded, as above) with weight row
// whose element 0 is nibble `base` of B; element k's weight is bf16_class_weight(lut[nibble], scales[(base
// + k) / blocksize]); elements past K count as +0 * +0.
float bf16_dot_4bit(const uint16_t* a, int64_t K, const uint8_t* B, int64_t base, const float* scales,
                    int64_t blocksize, const float* lut);

// sums[m*ldo + r] = bf16_dot_4bit for weight rows r in [r0, r1) (row r starts at nibble r*K) and prepared
// activation rows m < M (stride kp).
void bf16_dot_4bit_rows(const uint16_t* a, int64_t M, int64_t K, const uint8_t* B, const float* scales,
                        int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo);

// kbit_gemm_4bit_precision(KBIT_PRECISION_BF16, ...): out[i][j] = RN_T(sum(i, j) + float(bias[j])), the
// scale of block beta as cgemm_4bit's (gemm_block_scale), quant_type 1 = FP4, else NF4.
template <class T>
void gemm_4bit_bf16(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                    const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M, int64_t N,
                    int64_t K, int64_t blocksize, int quant_type);

}  // namespace kbit::ref
