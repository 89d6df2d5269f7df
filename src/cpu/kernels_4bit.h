// kernels_4bit.h — the 4-bit kernel tables of the CPU backend (the idiom of every family: cpu_isa.h).
// Every slot is filled from the scalar reference (ref_4bit.h), then the SIMD sources override it for
// the active ISA: kernels_4bit_simd.cpp (quantize and dequantize, Highway AVX2 and AVX3 from one
// 256-bit source), kernels_4bit_quantize_avx512.cpp (the 512-bit quantizer), kernels_4bit_dot_avx2.cpp
// and kernels_4bit_dot_avx512.cpp (the dot kernels of GEMV and GEMM), kernels_4bit_prefill_avx2.cpp and
// kernels_4bit_prefill_avx512.cpp (cgemm_4bit at prefill sizes); on AArch64 kernels_4bit_neon.cpp
// (quantize, dequantize and the dot kernels, Highway's NEON target, run by the SVE levels too). Kernels work on a range; the thread
// drivers in ops_4bit.cpp split the work and call them. Every quantize/dequantize kernel is bit-exact
// with kbit::ref; the SIMD dot kernels accumulate in fp32 in their own order (class F), the reference
// dot kernel in the reference order.
#pragma once

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

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

// How far ahead of each block the SIMD quantizers prefetch its input. The hardware prefetchers alone
// kept a cold 4096x4096 NF4 quantize at 7.0 ms for bf16 inputs (31% of its limit, one Sapphire Rapids
// core); with it 4.6-5.0 ms (1, 2, 4 and 8 KB ahead measured alike). Prefetches never fault.
constexpr int64_t kQuantizePrefetchBytes = 2048;

// Prefetches the input of `count` blocks from block b, kQuantizePrefetchBytes ahead (the quantizers
// of kernels_4bit_simd.cpp and kernels_4bit_quantize_avx512.cpp).
template <class T>
inline void prefetch_quantize_4bit_input(const T* A, int64_t blocksize, int64_t b, int64_t count) {
    const char* x = reinterpret_cast<const char*>(A + b * blocksize);
    for (int64_t off = 0; off < count * blocksize * static_cast<int64_t>(sizeof(T)); off += 64)
        hwy::Prefetch(x + kQuantizePrefetchBytes + off);
}

// The SIMD dot kernels' precondition (both sets): rows that start a block, and k > 0.
inline bool dot_4bit_simd_supports(int64_t k, int64_t row_elems, int64_t blocksize) {
    return k > 0 && row_elems % blocksize == 0;
}

// The end of one SIMD dot row: adds to `sum` elements [kk, k) past the last whole group of the weight
// row whose first nibble is row_base, in order, one partial sum per block run, scaled once per run.
inline float dot_4bit_tail(float sum, const float* a, int64_t kk, int64_t k, const uint8_t* B, int64_t row_base,
                           const float* scales, int64_t blocksize, const float* lut) {
    while (kk < k) {
        const int64_t b = (row_base + kk) / blocksize;
        const int64_t run_end = std::min(k, (b + 1) * blocksize - row_base);
        float partial = 0.0f;
        for (; kk < run_end; ++kk) partial += a[kk] * lut[nibble_at(B, row_base + kk)];
        sum += partial * scales[b];
    }
    return sum;
}

// Splits M activation rows into tiles of 4, then 2, then 1 and calls tile(std::integral_constant<int,
// MT>, t) for the tile of MT rows starting at row t (each dot source's register tiles).
template <class Tile>
inline void for_token_tiles(int M, Tile&& tile) {
    int t = 0;
    for (; t + 4 <= M; t += 4) tile(std::integral_constant<int, 4>{}, t);
    for (; t + 2 <= M; t += 2) tile(std::integral_constant<int, 2>{}, t);
    for (; t < M; ++t) tile(std::integral_constant<int, 1>{}, t);
}

// The tables of the active ISA, assembled once (kernels_4bit.cpp).
template <class T>
const Quant4bitKernels<T>& quant_4bit_kernels();
// The dot kernels for this shape: the active ISA's where it supports() the shape, else the
// reference's (the capability check lives here, not in the callers).
const Dot4bitKernels& dot_4bit_kernels(int64_t k, int64_t row_elems, int64_t blocksize);
const Prefill4bitKernels& prefill_4bit_kernels();

// The overrides of the Highway sources, per target (see cpu_isa.h): kernels_4bit_simd.cpp for both
// (x86-64) or kernels_4bit_neon.cpp for N_NEON (AArch64: OverrideQuant and OverrideDot),
KBIT_HWY_OVERRIDES(template <class T> void OverrideQuant(Quant4bitKernels<T>& table);)
// and the sources of one target each, kernels_4bit_<part>_avx2.cpp and kernels_4bit_<part>_avx512.cpp.
KBIT_HWY_OVERRIDES(void OverrideDot(Dot4bitKernels& table); void OverridePrefill(Prefill4bitKernels& table);)
namespace N_AVX3 {
template <class T>
void OverrideBucketQuantizer(Quant4bitKernels<T>& table);  // kernels_4bit_quantize_avx512.cpp
}  // namespace N_AVX3

}  // namespace kbit::cpu
