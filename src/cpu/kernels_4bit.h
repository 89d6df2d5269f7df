// kernels_4bit.h — the 4-bit kernels of one instruction set, as tables chosen once per process from
// kbit::cpu::active_isa() (ref, AVX2 or AVX-512 via Highway). Kernels work on a range; the thread
// drivers in api_4bit.cpp split the work and call them. Every quantize/dequantize kernel is bit-exact
// with kbit::ref; the dot kernels accumulate in fp32 in their own order (class F).
#pragma once

#include <cstdint>

#include "kbit_formats.h"
#include "kbit_half.h"

namespace kbit::cpu {

template <class T>
struct Quant4bitKernels {
    // Blocks [b0, b1) of an n-element tensor: absmax[b] and the packed bytes of those blocks.
    void (*quantize_blocks)(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                            int64_t b0, int64_t b1);
    // Elements [i0, i1): out[i] = RN_T(LUT[nibble(i)] * absmax[i / blocksize]). `stream` asks for
    // non-temporal stores (output far larger than the cache).
    void (*dequantize_range)(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                             int64_t i0, int64_t i1, bool stream);
};

// 4-bit dot products of fp32 activation rows with rows of a packed weight (GEMV and GEMM).
struct Dot4bitKernels {
    // Elements per SIMD group; prepared activations are permuted within each group of the first
    // k - k % group elements (the rest stay in order). 0 means there is no SIMD path.
    int64_t group;
    // Lays out one row of k fp32 activations the way dot_rows reads them.
    void (*prepare)(const float* a, int64_t k, float* prepared);
    // For weight rows r in [r0, r1) and activation rows m < M (prepared, stride k):
    // sums[m * ldo + r] = sum_k a_m[k] * lut[W(r, k)] * scales[(r * row_elems + k) / blocksize], where
    // W(r, k) is nibble r * row_elems + k of B. Needs row_elems % blocksize == 0 (rows start on a block).
    void (*dot_rows)(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems,
                     const float* scales, int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums,
                     int64_t ldo);
};

template <class T>
const Quant4bitKernels<T>& quant_4bit_kernels();

// The SIMD dot kernels of the active ISA; group == 0 when the active ISA is ref.
const Dot4bitKernels& dot_4bit_kernels();

// The SIMD tables of the active ISA (Highway targets AVX2 and AVX3, kernels_4bit_simd.cpp); nullptr
// under ref.
template <class T>
const Quant4bitKernels<T>* simd_quant_4bit_kernels();
const Dot4bitKernels* simd_dot_4bit_kernels();
// The AVX-512 dot kernels (kernels_4bit_dot512.cpp: vpermps over the 16-entry table).
const Dot4bitKernels* dot512_4bit_kernels();

}  // namespace kbit::cpu
