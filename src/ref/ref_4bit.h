// ref_4bit.h — scalar reference of every 4-bit kernel (docs/behaviour.md §1-§5). It is the
// CPU backend's `ref` ISA path and the oracle of the conformance suite, so it favours plain loops
// over speed. Element types: float, kbit_half, kbit_bf16 (explicitly instantiated in ref_4bit.cpp).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kbit_formats.h"
#include "kbit_half.h"
#include "kbit_torchao_scalers.h"

namespace kbit::ref {

// ------------------------------------------------------------------------------------------------
// Shared scalar rules (also used by the SIMD kernels for heads and tails)
// ------------------------------------------------------------------------------------------------

// The dequantization table of a format (FP4 nibble 1000 = -0.0).
inline const float* lut_4bit(QuantType qt) { return qt == QuantType::FP4 ? kFp4Values : kNf4Values; }

inline uint8_t index_4bit(QuantType qt, float y) { return qt == QuantType::FP4 ? fp4_index(y) : nf4_index(y); }

// ------------------------------------------------------------------------------------------------
// Blockwise 4-bit (bitsandbytes cquantize_blockwise_* / cdequantize_blockwise_*)
// ------------------------------------------------------------------------------------------------

// Quantizes blocks [b0, b1) of an n-element tensor (absmax[b] and the bytes of those blocks).
template <class T>
void quantize_4bit_blocks(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                          int64_t b0, int64_t b1);

template <class T>
void quantize_4bit(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n);

// out[i] = RN_T(LUT[nibble(i)] * absmax[i / blocksize]) for i in [i0, i1).
template <class T>
void dequantize_4bit_range(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                           int64_t i0, int64_t i1);

template <class T>
void dequantize_4bit(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize, int64_t n);

// ------------------------------------------------------------------------------------------------
// 4-bit GEMV / GEMM. Reference order: per row, each run of consecutive k that share a block is
// summed in fp32 (products A*lut rounded to fp32, added left to right), then scaled once by the
// block's absmax and added to the row total; the result is rounded once to T (after adding bias).
// ------------------------------------------------------------------------------------------------

// cgemm_4bit_inference_naive_*: rows [r0, r1) of out (weight element (r, k) = nibble 2*ldb*r + k).
template <class T>
void gemv_4bit_rows(int k, const T* A, const uint8_t* B, const float* absmax, const float* datatype, T* out,
                    int ldb, int blocksize, int r0, int r1);

template <class T>
void gemv_4bit(int m, int k, const T* A, const uint8_t* B, const float* absmax, const float* datatype, T* out,
               int ldb, int blocksize);

// The reference sums in the CPU backend's dot-kernel form (kernels_4bit.h), for fp32 activation rows
// a (M rows, stride k) and rows of any length and alignment: sums[m * ldo + r] = the sum of row r
// (nibbles r * row_elems + kk of B) with row m, block beta scaled by scales[beta], for r in [r0, r1).
// The same fp32 operations in the same order as gemv_4bit_rows and gemm_4bit (before bias and rounding).
void dot_4bit_rows(const float* a, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                   int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo);

// Scale of block `beta` of cgemm_4bit: absmax[beta], or with nested absmax (absmax_8bit != NULL)
// absmax_code[absmax_8bit[beta]] * absmax[beta >> 8] + *absmax_offset, a product and a separate add
// (two fp32 roundings, like bitsandbytes' restore; its CUDA kernel may fuse them into one FMA).
inline float gemm_block_scale(int64_t beta, const float* absmax, const uint8_t* absmax_8bit,
                              const float* absmax_code, const float* absmax_offset) {
    if (absmax_8bit == nullptr) return absmax[beta];
    const float scaled = absmax_code[absmax_8bit[beta]] * absmax[beta >> 8];
    return scaled + *absmax_offset;
}

// cgemm_4bit_*: out [M, N] = A [M, K] * W [N, K]^T (+ bias), quant_type 1 = FP4, else NF4.
template <class T>
void gemm_4bit(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
               const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
               int blocksize, int quant_type);

// kbit_gemm_4bit_grouped, the rows of one expert of the flat-quantized [experts, N, K] weight, whose element
// (0, 0) is nibble `first` of B (e*N*K for expert e, or less when B and the scales are a window of the
// tensor starting at a block, nested: at a group of 256 blocks): for M activation rows x_i (stride K),
// y[i*N + n] = RN_T(x_i . W_e[n]) for n in [n0, n1), with the block of each element counted from B's start;
// the sums are gemm_4bit's (bit for bit its output on the expert's slice where that exists).
template <class T>
void gemm_4bit_expert_rows(const T* x, int64_t M, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                           const float* absmax_code, const float* absmax_offset, int64_t first, int64_t N, int64_t K,
                           int64_t blocksize, int quant_type, T* y, int64_t n0, int64_t n1);

// One step of the combine of kbit_gemm_4bit_grouped: s + w * y, the product and the sum each rounded to fp32.
inline float grouped_combine_step(float s, float w, float y) {
    const float product = w * y;
    return s + product;
}

// kbit_gemm_4bit_grouped with valid ids (every id in [0, experts)), pair by pair in (t, j) order.
template <class T>
void gemm_4bit_grouped(const T* A, int64_t a_rows_per_token, const uint8_t* B, const float* absmax,
                       const uint8_t* absmax_8bit, const float* absmax_code, const float* absmax_offset,
                       int64_t experts, int64_t N, int64_t K, int64_t blocksize, int quant_type, const int32_t* ids,
                       int64_t tokens, int64_t top_k, const float* combine, T* out);

// ------------------------------------------------------------------------------------------------
// bitsandbytes double quantization of the block scales (§2.5)
// ------------------------------------------------------------------------------------------------

// offset = fp32(sum in double / blocks); per nested block of `nested_blocksize` scales: nested_absmax
// = max |absmax[b] - offset| (folded like absmax_fold), codes = code8_index(code, (absmax[b] - offset)
// * (1.0f / nested_absmax)).
void nested_absmax_quantize(const float* absmax, const float* code, uint8_t* qabsmax, float* nested_absmax,
                            float* offset, int64_t blocks, int64_t nested_blocksize);

// The mean the quantizer subtracts: the double-precision sum of the scales, divided in double,
// rounded once to fp32.
float nested_absmax_offset(const float* absmax, int64_t blocks);

// absmax[b] = code[qabsmax[b]] * nested_absmax[b / nested_blocksize], then + offset (two roundings).
void nested_absmax_dequantize(const uint8_t* qabsmax, const float* code, const float* nested_absmax, float offset,
                              float* absmax, int64_t blocks, int64_t nested_blocksize);

// ------------------------------------------------------------------------------------------------
// torchao NF4Tensor (§6): every step in T arithmetic the way torch evaluates it on the CPU (each
// binary op computed in fp32 and rounded to T). The per-block and per-element steps are the shared
// functions of kbit_torchao_math.h (which the CUDA kernels call too); the scaler stage is only here.
// ------------------------------------------------------------------------------------------------

// torchao's 16-entry NF4 table (4-decimal literals) as T: double -> fp32 -> T, as c10 converts.
template <class T>
const T* torchao_nf4_table();

// The three steps of torchao_quantize, so that a driver can split the first and last across
// threads: block absmax of blocks [b0, b1); the mean and the int8 second level (serial: torch's sum
// order); the packed nearest-entry indices of blocks [b0, b1).
template <class T>
void torchao_block_absmax(const T* w, T* scalers, int64_t b0, int64_t b1, int64_t block_size);
// (the scaler stage: kbit::torchao_scalers of kbit_torchao_scalers.h, shared with every backend)
using kbit::torchao_mean;
using kbit::torchao_scalers;
template <class T>
void torchao_quantize_elements(const T* w, const T* scalers, uint8_t* quantized_data, int64_t b0, int64_t b1,
                               int64_t block_size);

template <class T>
void torchao_quantize(const T* w, uint8_t* quantized_data, int8_t* quantized_scalers, T* quantization_factor,
                      T* scaler_mean, int64_t n, int64_t block_size, int64_t scaler_block_size);

template <class T>
void torchao_dequantize(const uint8_t* quantized_data, const int8_t* quantized_scalers,
                        const T* quantization_factor, const T* scaler_mean, T* out, int64_t n, int64_t block_size,
                        int64_t scaler_block_size);

}  // namespace kbit::ref
