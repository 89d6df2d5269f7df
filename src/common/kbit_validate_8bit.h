// kbit_validate_8bit.h — argument rules of the 8-bit interface, shared by every backend so that the
// same bad input gets the same status and message everywhere. Each returns KBIT_STATUS_SUCCESS or the
// failure (already recorded); `*empty` says the call has nothing to do (and may not touch pointers).
// Only scalars and pointers are checked: nothing here reads device memory.
#pragma once

#include <cstdint>

#include "kbit_args.h"

namespace kbit {

constexpr int64_t kInt32Max = 2147483647;

// a * b for non-negative operands, saturated at INT64_MAX.
inline int64_t checked_product(int64_t a, int64_t b) {
    if (a <= 0 || b <= 0) return 0;
    return a > INT64_MAX / b ? INT64_MAX : a * b;
}

// "<what> is <a * b>, must be <= max", or, when a * b does not fit in int64, with both factors.
inline Args& product_at_most(Args& args, const char* what, int64_t a, int64_t b, int64_t max) {
    if (!args.ok() || a < 0 || b < 0) return args;
    if (a > 0 && b > 0 && a > INT64_MAX / b)  // b == 0: the product is 0 (no division by zero)
        return args.require(false, "%s is %lld x %lld, must be <= %lld", what, static_cast<long long>(a),
                            static_cast<long long>(b), static_cast<long long>(max));
    return args.at_most(what, a * b, max);
}

// The largest 8-bit blockwise blocksize of a backend whose 8-bit interface has minor `minor`: 8bit 1.1
// added 8192 and 16384; a 1.0 backend keeps rejecting them.
constexpr int64_t max_blocksize_8bit(int minor) { return minor >= 1 ? kMaxBlocksize8bit : kMaxBlocksize; }

// max_blocksize for bitsandbytes' CPU names (cquantize_blockwise_cpu_*): any blocksize >= 1.
constexpr int64_t kAnyBlocksize = 0;

// cquantize_blockwise_* / cdequantize_blockwise_* (8-bit), kbit_(de)quantize_blockwise_8bit and the
// bitsandbytes CPU names. `dtype` is NULL for the bitsandbytes names (their symbol fixes it);
// `elem_bytes` is the element size the call's dtype means (checked first when `dtype` is given);
// `max_blocksize` the backend's (max_blocksize_8bit), or kAnyBlocksize.
inline kbit_status validate_blockwise_8bit(const char* fn, Blockwise dir, const int32_t* dtype, const float* code,
                                           const void* in, const float* absmax, const void* out,
                                           int64_t blocksize, int64_t n, int64_t elem_bytes, int64_t max_blocksize,
                                           bool* empty) {
    Args a(fn);
    if (dtype != nullptr) a.dtype(*dtype);
    if (max_blocksize == kAnyBlocksize)
        a.positive("blocksize", blocksize);
    else
        a.blocksize_8bit(blocksize, max_blocksize);
    return blockwise_rules(a, dir, 8, code, in, absmax, out, blocksize, n, elem_bytes, empty);
}

// The LLM.int8 outlier threshold: >= 0 (0 = no outliers), never NaN; +inf is allowed.
inline Args& check_threshold(Args& a, float threshold) {
    return a.require(threshold >= 0.0f, "threshold is %g, must be >= 0", static_cast<double>(threshold));
}

// cint8_vector_quant (int sizes, product bounded like bitsandbytes' int indexing).
inline kbit_status validate_int8_vector_quant(const char* fn, const void* A, const void* out,
                                              const float* rowStats, float threshold, int rows, int cols,
                                              bool* empty) {
    Args a(fn);
    a.nonneg("rows", rows).nonneg("cols", cols);
    product_at_most(a, "rows * cols", rows, cols, kInt32Max);
    check_threshold(a, threshold);
    *empty = a.ok() && checked_product(rows, cols) == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", A).not_null("out", out).not_null("rowStats", rowStats);
    return a.status();
}

// kbit_int8_vectorwise_quant. `*empty` means no element of A exists; outlier_cols (cols bytes) is
// still written when cols > 0 and it is given.
inline kbit_status validate_int8_vectorwise_quant(const char* fn, const void* A, const void* out,
                                                  const float* rowStats, const uint8_t* outlier_cols,
                                                  float threshold, int64_t rows, int64_t cols, bool* empty) {
    Args a(fn);
    a.nonneg("rows", rows).nonneg("cols", cols);
    product_at_most(a, "rows * cols", rows, cols, kMaxElements);
    check_threshold(a, threshold);
    *empty = a.ok() && checked_product(rows, cols) == 0;
    if (!a.ok()) return a.status();
    if (threshold > 0.0f && cols > 0) a.not_null("outlier_cols", outlier_cols);
    if (!*empty) a.not_null("A", A).not_null("out", out).not_null("rowStats", rowStats);
    return a.status();
}

// cigemmlt_32 / cigemmlt_8 / cigemmlt_8_rowscale (bitsandbytes' m = K, n = rows of B and C,
// k = rows of A = columns of C).
inline kbit_status validate_igemmlt(const char* fn, const void* context, int m, int n, int k, const void* A,
                                    const void* B, const void* C, const float* row_scale, bool needs_row_scale,
                                    int lda, int ldb, int ldc, bool* empty) {
    Args a(fn);
    a.not_null("context", context);
    a.nonneg("m", m).nonneg("n", n).nonneg("k", k);
    a.require(lda >= m, "lda is %d, must be >= m = %d", lda, m);
    a.require(ldb >= m, "ldb is %d, must be >= m = %d", ldb, m);
    a.require(ldc >= k, "ldc is %d, must be >= k = %d", ldc, k);
    *empty = a.ok() && (n == 0 || k == 0);
    if (!a.ok() || *empty) return a.status();
    if (m > 0) a.not_null("A", A).not_null("B", B);
    a.not_null("C", C);
    if (needs_row_scale) a.not_null("row_scale", row_scale);
    return a.status();
}

// cdequant_mm_int32_fp16 (bias is optional).
inline kbit_status validate_dequant_mm(const char* fn, const int* A, const float* rowStats,
                                       const float* colStats, const void* out, int numRows, int numCols,
                                       bool* empty) {
    Args a(fn);
    a.nonneg("numRows", numRows).nonneg("numCols", numCols);
    product_at_most(a, "numRows * numCols", numRows, numCols, kInt32Max);
    *empty = a.ok() && checked_product(numRows, numCols) == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", A).not_null("rowStats", rowStats).not_null("colStats", colStats).not_null("out", out);
    return a.status();
}

// kbit_int8_outlier_matmul_fp16.
inline kbit_status validate_outlier_matmul(const char* fn, const void* A, const int8_t* W, const float* W_stats,
                                           const uint8_t* outlier_cols, const void* out, int64_t rows,
                                           int64_t out_features, int64_t in_features, bool* empty) {
    Args a(fn);
    a.nonneg("rows", rows).nonneg("out_features", out_features).nonneg("in_features", in_features);
    product_at_most(a, "rows * in_features", rows, in_features, kMaxElements);
    product_at_most(a, "out_features * in_features", out_features, in_features, kMaxElements);
    product_at_most(a, "rows * out_features", rows, out_features, kMaxElements);
    *empty = a.ok() && (rows == 0 || out_features == 0 || in_features == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", A).not_null("W", W).not_null("W_stats", W_stats).not_null("outlier_cols", outlier_cols);
    a.not_null("out", out);
    return a.status();
}

}  // namespace kbit
