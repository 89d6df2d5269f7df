// igemm_8bit.h — exact int8 x int8 -> int32 GEMM of the CPU backend (cigemmlt_*).
//
// oneDNN's dnnl_gemm_s8s8s32 (Debian's oneDNN 2.6) is exact only with AVX-512 VNNI: elsewhere it
// computes with vpmaddubsw, whose 16-bit pair sums saturate (a 4096-long product of +-127/-128 values
// came back off by up to 1.6e7 in 96 of 128 outputs). bitsandbytes' int8 GEMM is exact (cuBLASLt,
// int32 accumulation), so kbit uses oneDNN on VNNI CPUs (igemm_onednn) and its own kernel elsewhere:
// int8 widened to int16 and multiplied with vpmaddwd (exact: a pair sum is at most 2 * 128 * 128),
// accumulated in int32.
#pragma once

#include <cstdint>

namespace kbit::cpu {

// C[t * ldc + o] = sum_{i < m} W[o * lda + i] * X[t * ldb + i] for t < n, o < k, accumulated in int32
// (wrapping modulo 2^32 like any int32 accumulator). Sizes validated; n, k > 0. May throw
// std::bad_alloc (packing buffers); never throws inside an OpenMP region.
using IgemmFn = void (*)(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                         int32_t* C, int64_t ldc);

// The SIMD kernel of the active ISA, or nullptr when KBIT_CPU_ISA=ref.
IgemmFn igemm_s32_kernel();

// The same product through oneDNN where that is exact (AVX-512 VNNI, igemm_onednn.cpp); false when
// it is not available or failed, and the caller computes it itself.
bool igemm_onednn(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                  int32_t* C, int64_t ldc);

// "oneDNN s8s8s32 (AVX-512 VNNI)" or "kbit": who computes cigemmlt_* in this process.
const char* igemm_provider();

}  // namespace kbit::cpu
