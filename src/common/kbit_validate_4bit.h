// kbit_validate_4bit.h — argument rules of the 4-bit interface, shared by every backend so that the
// same bad input gets the same status and message everywhere. Each returns KBIT_STATUS_SUCCESS or the
// failure (already recorded); `*empty` says the call has nothing to do.
#pragma once

#include "kbit_args.h"

namespace kbit {

// cquantize_blockwise_* / cdequantize_blockwise_* (4-bit) and kbit_(de)quantize_4bit.
inline kbit_status validate_blockwise_4bit(const char* fn, const void* in, const float* absmax,
                                           const void* out, int64_t blocksize, int64_t n,
                                           bool* empty) {
    Args a(fn);
    a.blocksize(blocksize).nonneg("n", n).at_most("n", n, kMaxElements);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", in).not_null("absmax", absmax).not_null("out", out);
    return a.status();
}

// cgemm_4bit_inference_naive_*.
inline kbit_status validate_gemv_4bit(const char* fn, int m, int k, const void* A, const void* B,
                                      const float* absmax, const float* datatype, const void* out,
                                      int ldb, int blocksize, bool* empty) {
    Args a(fn);
    a.nonneg("m", m).nonneg("k", k).blocksize(blocksize);
    a.require(k % 2 == 0, "k is %d, must be even", k);
    a.require(static_cast<int64_t>(ldb) * 2 >= k, "ldb is %d, must be >= k / 2 = %d", ldb, k / 2);
    *empty = a.ok() && (m == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (k > 0) a.not_null("A", A).not_null("B", B).not_null("absmax", absmax).not_null("datatype", datatype);
    return a.status();
}

// cgemm_4bit_*.
inline kbit_status validate_gemm_4bit(const char* fn, const void* A, const void* B, const float* absmax,
                                      const uint8_t* absmax_8bit, const float* absmax_code,
                                      const float* absmax_offset, const void* out, int M, int N, int K,
                                      int blocksize, bool* empty) {
    Args a(fn);
    a.nonneg("M", M).nonneg("N", N).nonneg("K", K).blocksize(blocksize);
    a.require(K % 2 == 0, "K is %d, must be even", K);
    *empty = a.ok() && (M == 0 || N == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (K > 0) {
        a.not_null("A", A).not_null("B", B).not_null("absmax", absmax);
        if (absmax_8bit != nullptr) a.not_null("absmax_code", absmax_code).not_null("absmax_offset", absmax_offset);
    }
    return a.status();
}

}  // namespace kbit
