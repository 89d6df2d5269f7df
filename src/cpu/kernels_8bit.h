// kernels_8bit.h — the 8-bit kernel tables of the CPU backend (the idiom of every family: cpu_isa.h):
// blockwise dynamic 8-bit (Blockwise8Kernels<T>), LLM.int8's element kernels (Int8Kernels) and the
// exact int8 GEMM (IgemmKernels). Every slot is filled from the scalar reference (ref_8bit.h), then
// the SIMD sources override theirs for the active ISA (Highway AVX2 / AVX3, then the AVX-512 VBMI
// dequantizer; on AArch64 the GEMM's SDOT kernel); the GEMM also has a library slot (oneDNN). Kernels work on a range (of blocks, rows or elements) so that the thread
// drivers in ops_8bit.cpp can split a call across OpenMP threads; arguments are already validated.
#pragma once

#include <cstdint>

#include "cpu_isa.h"
#include "kbit/kbit_core.h"
#include "kbit_code8_lut.h"

namespace kbit::cpu {

template <class T>
struct Blockwise8Kernels {
    // Capability: whether quantize searches through code's bucket table (Code8Lut). The reference
    // searches code itself and ignores lut, so its callers need not build one.
    bool quantize_uses_lut;
    // Blocks [block_begin, block_end) of an n-element input, by lut (code's Code8Lut) or, where lut
    // is nullptr, by the scalar search of code; `stream` (out aligned to 64 bytes) asks for
    // non-temporal stores of the codes.
    void (*quantize)(const float* code, const Code8Lut* lut, const T* A, float* absmax, uint8_t* out,
                     int64_t blocksize, int64_t n, int64_t block_begin, int64_t block_end, bool stream);
    // Elements [begin, end), begin a multiple of blocksize; `stream` asks for non-temporal stores.
    void (*dequantize)(const float* code, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                       int64_t begin, int64_t end, bool stream);
};

struct Int8Kernels {
    // Rows [row_begin, row_end) of cint8_vector_quant.
    void (*vector_quant)(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t cols,
                         int64_t row_begin, int64_t row_end);
    // Rows [row_begin, row_end) of cdequant_mm_int32_fp16.
    void (*dequant_mm)(const int32_t* A, const float* rowStats, const float* colStats, kbit_half* out,
                       const kbit_half* bias, int64_t cols, int64_t row_begin, int64_t row_end);
    // Rows [row_begin, row_end) of |A| >= fp16(threshold) column flags: flags[c] |= 1 (threshold > 0).
    void (*outlier_flags)(const kbit_half* A, uint8_t* flags, float threshold, int64_t cols, int64_t row_begin,
                          int64_t row_end);
    // Token rows [row_begin, row_end) of the fp16 outlier product: out[t][o] = RN(out[t][o] + sum_j
    // A[t][cols[j]] * w[j][o]), the sum over j in order from -0.0, where w is the [count][out_features]
    // fp16-rounded dequantized weight of the outlier columns (as floats, ref::int8_outlier_weights).
    void (*outlier_matmul)(const kbit_half* A, int64_t in_features, const int64_t* cols, int64_t count,
                           const float* w, kbit_half* out, int64_t out_features, int64_t row_begin,
                           int64_t row_end);
};

// Exact int8 x int8 -> int32 GEMM (cigemmlt_*). oneDNN's dnnl_gemm_s8s8s32 (Debian's oneDNN 2.6) is
// exact only with AVX-512 VNNI: elsewhere it computes with vpmaddubsw, whose 16-bit pair sums
// saturate (a 4096-long product of +-127/-128 values came back off by up to 1.6e7 in 96 of 128
// outputs). bitsandbytes' int8 GEMM is exact (cuBLASLt, int32 accumulation), so kbit uses oneDNN on
// VNNI CPUs and its own kernel elsewhere: int8 widened to int16 and multiplied with vpmaddwd (exact:
// a pair sum is at most 2 * 128 * 128), accumulated in int32. On AArch64 CPUs with the dot-product
// extension, SDOT multiplies int8 directly (four products into each int32 lane, no widening).
//
// C[t * ldc + o] = sum_{i < m} W[o * lda + i] * X[t * ldb + i] for t < n, o < k, accumulated in int32
// (wrapping modulo 2^32 like any int32 accumulator). Sizes validated; n, k > 0. May throw
// std::bad_alloc (packing buffers); never throws inside an OpenMP region.
using IgemmFn = void (*)(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                         int32_t* C, int64_t ldc);
struct IgemmKernels {
    // The product by a library, where that library is exact (oneDNN on AVX-512 VNNI CPUs under the
    // AVX-512 kernels: kernels_igemm_onednn.cpp); false when it does not take this call (no such library, a
    // fork() child, an error), and then s32 computes it. The reference's declines every call.
    bool (*s32_library)(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X,
                        int64_t ldb, int32_t* C, int64_t ldc);
    // The product by kbit's own kernel.
    IgemmFn s32;
    // Who computes cigemmlt_* (kbit_backend_info's "int8 GEMM: ..."): "kbit" (the reference or the
    // Highway kernel), "kbit sdot" (kernels_igemm_dotprod.cpp) or "oneDNN s8s8s32 (AVX-512 VNNI)".
    const char* provider;
};

// The tables of the active ISA, assembled once (kernels_8bit.cpp).
template <class T>
const Blockwise8Kernels<T>& blockwise8_kernels();
const Int8Kernels& int8_kernels();
const IgemmKernels& igemm_kernels();

// The overrides of the Highway sources, per target (see cpu_isa.h),
KBIT_HWY_OVERRIDES(
    template <class T> void OverrideBlockwise8(Blockwise8Kernels<T>& table);  // kernels_8bit_simd.cpp
    void OverrideInt8(Int8Kernels& table);                                    // kernels_int8_simd.cpp
    void OverrideIgemm(IgemmKernels& table);                                  // kernels_igemm_simd.cpp
)
// and the hooks of the intrinsics and library sources.
template <class T>
void override_blockwise8_avx512vbmi(Blockwise8Kernels<T>& table);  // kernels_8bit_dequantize_avx512vbmi.cpp
void override_igemm_onednn(IgemmKernels& table);                   // kernels_igemm_onednn.cpp
#if KBIT_CPU_ARM64
// The SDOT kernel from Isa::Neon up, where the CPU has the dot-product extension.
void override_igemm_dotprod(IgemmKernels& table);  // kernels_igemm_dotprod.cpp
#endif

// igemm_kernels().provider: who computes cigemmlt_* in this process.
const char* igemm_provider();

}  // namespace kbit::cpu
