// kernels_4bit.h — the 4-bit kernel tables of the CPU backend (the idiom of every family: cpu_isa.h).
// Every slot is filled from the scalar reference (ref_4bit.h), then the SIMD sources override it for
// the active ISA: kernels_4bit_simd.cpp (Highway AVX2 and AVX3: quantize, dequantize; AVX2 dot),
// kernels_4bit_dot_avx512.cpp (the AVX-512 dot kernels), kernels_4bit_prefill_avx2.cpp (cgemm_4bit
// at prefill sizes, AVX2) and kernels_4bit_prefill_avx512.cpp (the same on AVX-512). Kernels work on
// a range; the thread drivers in ops_4bit.cpp split the work and call them. Every quantize/dequantize
// kernel is bit-exact with kbit::ref; the SIMD dot kernels accumulate in fp32 in their own order
// (class F), the reference dot kernel in the reference order.
#pragma once

#include <cstdint>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_half.h"

namespace kbit::cpu {

template <class T>
struct Quant4bitKernels {
    // Blocks [b0, b1) of an n-element tensor: absmax[b] and the packed bytes of those blocks.
    void (*quantize_blocks)(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                            int64_t b0, int64_t b1);
    // Elements [i0, i1): out[i] = RN_T(LUT[nibble(i)] * absmax[i / blocksize]) for any blocksize >= 1
    // (the 4-bit interface's powers of two, any for bitsandbytes' CPU names). `stream` asks for
    // non-temporal stores (output far larger than the cache).
    void (*dequantize_range)(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                             int64_t i0, int64_t i1, bool stream);
};

// 4-bit dot products of fp32 activation rows with rows of a packed weight (GEMV and GEMM).
struct Dot4bitKernels {
    // Elements per SIMD group; prepared activations are permuted within each group of the first
    // k - k % group elements (the rest stay in order). The reference: 1 (no permutation).
    int64_t group;
    // Capability: whether dot_rows takes rows of row_elems nibbles with this blocksize and k > 0
    // activations. The SIMD kernels need rows that start a block, and read the table up front (with
    // k == 0 it may be NULL); the reference takes every shape.
    bool (*supports)(int64_t k, int64_t row_elems, int64_t blocksize);
    // Lays out one row of k fp32 activations the way dot_rows reads them.
    void (*prepare)(const float* a, int64_t k, float* prepared);
    // For weight rows r in [r0, r1) and activation rows m < M (prepared, stride k):
    // sums[m * ldo + r] = sum_k a_m[k] * lut[W(r, k)] * scales[(r * row_elems + k) / blocksize], where
    // W(r, k) is nibble r * row_elems + k of B.
    void (*dot_rows)(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems,
                     const float* scales, int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums,
                     int64_t ldo);
};

// cgemm_4bit with many activation rows (prefill): weight panels dequantized to fp32 and multiplied
// by a register-blocked kernel (kernels_4bit_prefill_avx2.cpp, kernels_4bit_prefill_avx512.cpp). The
// reference table has no such kernel: its supports() is false and gemm_4bit keeps to dot_rows.
struct Prefill4bitKernels {
    // Capability: whether rows() takes M fp32 activation rows of k columns with this blocksize.
    bool (*supports)(int M, int64_t k, int64_t blocksize);
    // Scratch floats each concurrent rows() call with M activation rows needs (its `panel`).
    int64_t (*panel_floats)(int M);
    // For weight rows r in [r0, r1) of a packed weight of k columns per row and activation rows m < M
    // (fp32, row-major, stride k): sums[m * ldo + r] = sum_k a_m[k] * fp32(lut[W(r, k)] * scales[(r * k
    // + k') / blocksize]), lut the table of qt.
    void (*rows)(const float* a, int M, int64_t k, const uint8_t* B, const float* scales, int64_t blocksize,
                 QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo, float* panel);
};

// The SIMD dot kernels' precondition (both sets): rows that start a block, and k > 0.
inline bool dot_4bit_simd_supports(int64_t k, int64_t row_elems, int64_t blocksize) {
    return k > 0 && row_elems % blocksize == 0;
}

// The tables of the active ISA, assembled once (kernels_4bit.cpp).
template <class T>
const Quant4bitKernels<T>& quant_4bit_kernels();
// The dot kernels for this shape: the active ISA's where it supports() the shape, else the
// reference's (the capability check lives here, not in the callers).
const Dot4bitKernels& dot_4bit_kernels(int64_t k, int64_t row_elems, int64_t blocksize);
const Prefill4bitKernels& prefill_4bit_kernels();

// The overrides of the Highway sources, per target (see cpu_isa.h).
KBIT_HWY_OVERRIDES(template <class T> void OverrideQuant(Quant4bitKernels<T>& table);)  // kernels_4bit_simd.cpp
namespace N_AVX2 {
void OverrideDot(Dot4bitKernels& table);          // kernels_4bit_simd.cpp
void OverridePrefill(Prefill4bitKernels& table);  // kernels_4bit_prefill_avx2.cpp
}  // namespace N_AVX2
namespace N_AVX3 {
void OverrideDot512(Dot4bitKernels& table);          // kernels_4bit_dot_avx512.cpp
void OverridePrefill512(Prefill4bitKernels& table);  // kernels_4bit_prefill_avx512.cpp
}  // namespace N_AVX3

}  // namespace kbit::cpu
