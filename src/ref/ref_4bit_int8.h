// ref_4bit_int8.h — scalar reference of the int8 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.6): activations cut to int8 per 32-element chunk, weights as int8 levels, exact
// integer dot products per chunk, the chunks' fp32 terms added in chunk order. It is the definition the
// CPU kernels reproduce byte for byte and the oracle of the conformance suite.
#pragma once

#include <cstdint>

#include "kbit_formats.h"
#include "kbit_half.h"
#include "kbit_precision_int8.h"

namespace kbit::ref {

// Quantizes M activation rows of K elements (K % 32 == 0, row-major): q[m*K + k] in natural order and
// chunks[m*(K/32) + c] (quantize_int8_chunk of kbit_precision_int8.h on the fp32 values of the row).
template <class T>
void quantize_int8_rows(const T* A, int64_t M, int64_t K, int8_t* q, Int8Chunk* chunks);

// Exact integer dot product of chunk c of quantized row q (natural order) with chunk c of the weight
// row whose element 0 is nibble `base` of B.
int32_t int8_chunk_dot(const int8_t* q, const uint8_t* B, int64_t base, int64_t c, const int8_t* levels);

// sums[m*ldo + r] for weight rows r in [r0, r1) (row r starts at nibble r*K) and activation rows m < M:
// total = +0.0f, then for c = 0 .. K/32 - 1: total = total + int8_chunk_term(scales[beta], e_c, isum_c),
// beta = (r*K + 32c) / blocksize.
void int8_dot_4bit_rows(const int8_t* q, const Int8Chunk* chunks, int64_t M, int64_t K, const uint8_t* B,
                        const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                        int64_t ldo);

// kbit_gemm_4bit_precision(KBIT_PRECISION_INT8, ...): out[i][j] = RN_T(total(i, j) + float(bias[j])),
// the scale of block beta as cgemm_4bit's (gemm_block_scale), quant_type 1 = FP4, else NF4.
template <class T>
void gemm_4bit_int8(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                    const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M, int64_t N,
                    int64_t K, int64_t blocksize, int quant_type);

}  // namespace kbit::ref
