// igemm_kernels.h — the CUDA kernels around cuBLASLt's int8 GEMM (igemm_kernels.cu), called by
// igemmlt.cpp. Plain C++; `stream` is a cudaStream_t. Each returns a kbit_status (failures recorded).
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"

namespace kbit::cuda {

// C[t*ldc + o] = sum_{i < m} A[o*lda + i] * B[t*ldb + i] modulo 2^32, for t < n, o < k: the exact
// product for the shapes cuBLASLt's int8 kernels do not take (any sizes, leading dimensions and
// alignment). Simple shared-memory tiles; this is the fallback, not the fast path.
kbit_status igemm_s32_exact(const char* fn, int m, int n, int k, const int8_t* A, int lda, const int8_t* B, int ldb,
                            int32_t* C, int ldc, void* stream);

// C[t*ldc + o] = int8 of acc[t*ld + o]: saturated (row_scale NULL), or rint(float(acc) * row_scale[o])
// saturated with NaN -> 0 (int8_saturate, int8_scale_saturate_rn of kbit_int8_rules.h, the rules the
// reference calls).
kbit_status igemm_int8_epilogue(const char* fn, const int32_t* acc, int ld, int n, int k, const float* row_scale,
                                int8_t* C, int ldc, void* stream);

}  // namespace kbit::cuda
