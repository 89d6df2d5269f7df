// ref_8bit.h — scalar reference of the 8-bit interface (blockwise dynamic 8-bit and LLM.int8): the
// CPU backend's KBIT_CPU_ISA=ref kernels and the conformance suite's oracle. Written for clarity, one
// element at a time, in the evaluation order the header documents. Arguments are assumed valid.
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit_int8_rules.h"  // the element rules and constants of LLM.int8, shared with the CUDA kernels

namespace kbit::ref {

// Blockwise dynamic 8-bit, T = float, kbit_half or kbit_bf16.
template <class T>
void quantize_blockwise_8bit(const float* code, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                             int64_t n);
template <class T>
void dequantize_blockwise_8bit(const float* code, const uint8_t* A, const float* absmax, T* out,
                               int64_t blocksize, int64_t n);
// The same on a part, for the CPU backend's kernel tables: blocks [b0, b1) of an n-element input;
// elements [i0, i1).
template <class T>
void quantize_blockwise_8bit_blocks(const float* code, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                                    int64_t n, int64_t b0, int64_t b1);
template <class T>
void dequantize_blockwise_8bit_range(const float* code, const uint8_t* A, const float* absmax, T* out,
                                     int64_t blocksize, int64_t i0, int64_t i1);

// cint8_vector_quant on rows x cols fp16.
void int8_vector_quant(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t rows,
                       int64_t cols);

// The outlier-column part of kbit_int8_vectorwise_quant: outlier_cols[c] = some |A[r][c]| >=
// fp16(threshold) (none when threshold == 0); when rows > 1, those columns of `out` become 0.
void int8_outlier_columns(const kbit_half* A, int8_t* out, uint8_t* outlier_cols, float threshold,
                          int64_t rows, int64_t cols);

// Rows [r0, r1) of the outlier test: flags[c] = 1 where some |A[r][c]| >= fp16(threshold) (flags
// already set stay set). Only meaningful when int8_has_outliers(threshold).
void int8_outlier_flags(const kbit_half* A, uint8_t* flags, float threshold, int64_t cols, int64_t r0, int64_t r1);

// cigemmlt_* in bitsandbytes' convention: acc[t][o] = sum_{i < m} A[o*lda + i] * B[t*ldb + i] in
// int32 (wrapping modulo 2^32, as an int32 accumulator does), t < n, o < k.
void igemm_s32(int64_t m, int64_t n, int64_t k, const int8_t* A, const int8_t* B, int32_t* C, int64_t lda,
               int64_t ldb, int64_t ldc);
// int8 output: int8_saturate(acc) or, with row_scale, int8_scale_saturate_rn(acc, row_scale[o]).
void igemm_s8(int64_t m, int64_t n, int64_t k, const int8_t* A, const int8_t* B, int8_t* C, const float* row_scale,
              int64_t lda, int64_t ldb, int64_t ldc);

// cdequant_mm_int32_fp16; bias may be NULL.
void dequant_mm_int32_fp16(const int32_t* A, const float* rowStats, const float* colStats, kbit_half* out,
                           const kbit_half* bias, int64_t rows, int64_t cols);

// kbit_int8_outlier_matmul_fp16: out[t][o] = RN(out[t][o] + sum), the sum in fp32 over increasing
// outlier columns c, starting from -0.0 (the additive identity, so no outliers leave out unchanged).
void int8_outlier_matmul_fp16(const kbit_half* A, const int8_t* W, const float* W_stats,
                              const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                              int64_t in_features);
// Its two stages, for the CPU backend's drivers: the outlier columns' weights w[j][o] (count x
// out_features) = fp16(float(W[o][cols[j]]) * W_stats[o] * kInv127) as floats; then token rows
// [r0, r1): out[t][o] = RN(out[t][o] + sum_j A[t][cols[j]] * w[j][o]), the sum from -0.0 in order of j.
void int8_outlier_weights(const int8_t* W, const float* W_stats, const int64_t* cols, int64_t count,
                          int64_t out_features, int64_t in_features, float* w);
void int8_outlier_matmul_rows(const kbit_half* A, int64_t in_features, const int64_t* cols, int64_t count,
                              const float* w, kbit_half* out, int64_t out_features, int64_t r0, int64_t r1);

}  // namespace kbit::ref
