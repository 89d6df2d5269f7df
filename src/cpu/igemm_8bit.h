// igemm_8bit.h — exact int8 x int8 -> int32 GEMM of the CPU backend (cigemmlt_*).
//
// Why not oneDNN: dnnl_gemm_s8s8s32 (Debian's oneDNN 2.6) computes with vpmaddubsw on CPUs without
// VNNI (this project's AVX2 machines included), whose 16-bit pair sums saturate: a 4096-long product
// of +-127/-128 values came back off by up to 1.6e7 in 96 of 128 outputs. bitsandbytes' int8 GEMM is
// exact (cuBLASLt, int32 accumulation), so kbit uses its own kernel: int8 widened to int16 and
// multiplied with vpmaddwd (exact: a pair sum is at most 2 * 128 * 128), accumulated in int32.
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

}  // namespace kbit::cpu
