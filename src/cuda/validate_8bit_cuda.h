// validate_8bit_cuda.h — argument rules of the 8-bit interface, written from include/kbit/kbit_8bit.h
// for the CUDA backend. PROVISIONAL: the lead replaces this file with the shared
// src/common/kbit_validate_8bit.h (same role as kbit_validate_4bit.h) when the branches merge.
// Each returns KBIT_STATUS_SUCCESS or the recorded failure; `*empty` says there is nothing to do.
#pragma once

#include <cstdint>

#include "kbit_args.h"

namespace kbit {

// cquantize_blockwise_* / cdequantize_blockwise_* (8-bit) and kbit_(de)quantize_blockwise_8bit.
inline kbit_status validate_blockwise_8bit(const char* fn, const float* code, const void* in, const float* absmax,
                                           const void* out, int64_t blocksize, int64_t n, bool* empty) {
    Args a(fn);
    a.blocksize(blocksize).nonneg("n", n).at_most("n", n, kMaxElements);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("code", code).not_null("A", in).not_null("absmax", absmax).not_null("out", out);
    return a.status();
}

// cint8_vector_quant (int32 sizes, rows * cols <= INT32_MAX) and kbit_int8_vectorwise_quant
// (outlier_cols required when threshold > 0).
inline kbit_status validate_int8_vector_quant(const char* fn, const void* A, const void* out, const float* rowStats,
                                              const uint8_t* outlier_cols, bool want_outliers, float threshold,
                                              int64_t rows, int64_t cols, int64_t max_elements, bool* empty) {
    Args a(fn);
    a.nonneg("rows", rows).nonneg("cols", cols);
    a.require(threshold >= 0.0f, "threshold is %g, must be >= 0", static_cast<double>(threshold));
    a.require(rows == 0 || cols <= max_elements / rows, "rows * cols = %lld * %lld exceeds %lld",
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(max_elements));
    *empty = a.ok() && (rows == 0 || cols == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", A).not_null("out", out).not_null("rowStats", rowStats);
    if (want_outliers && threshold > 0.0f) a.not_null("outlier_cols", outlier_cols);
    return a.status();
}

// cigemmlt_32 / cigemmlt_8 / cigemmlt_8_rowscale.
inline kbit_status validate_igemmlt(const char* fn, const void* context, int m, int n, int k, const void* A,
                                    const void* B, const void* C, const float* row_scale, bool want_row_scale, int lda,
                                    int ldb, int ldc, bool* empty) {
    Args a(fn);
    a.not_null("context", context).nonneg("m", m).nonneg("n", n).nonneg("k", k);
    a.require(lda >= m, "lda is %d, must be >= m = %d", lda, m);
    a.require(ldb >= m, "ldb is %d, must be >= m = %d", ldb, m);
    a.require(ldc >= k, "ldc is %d, must be >= k = %d", ldc, k);
    *empty = a.ok() && (n == 0 || k == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("C", C);
    if (m > 0) a.not_null("A", A).not_null("B", B);
    if (want_row_scale) a.not_null("row_scale", row_scale);
    return a.status();
}

// cdequant_mm_int32_fp16.
inline kbit_status validate_dequant_mm(const char* fn, const void* A, const float* rowStats, const float* colStats,
                                       const void* out, int rows, int cols, bool* empty) {
    Args a(fn);
    a.nonneg("numRows", rows).nonneg("numCols", cols);
    a.require(rows == 0 || cols <= INT32_MAX / rows, "numRows * numCols = %d * %d exceeds INT32_MAX", rows, cols);
    *empty = a.ok() && (rows == 0 || cols == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", A).not_null("rowStats", rowStats).not_null("colStats", colStats).not_null("out", out);
    return a.status();
}

// kbit_int8_outlier_matmul_fp16.
inline kbit_status validate_outlier_matmul(const char* fn, const void* A, const void* W, const float* W_stats,
                                           const uint8_t* outlier_cols, const void* out, int64_t rows,
                                           int64_t out_features, int64_t in_features, bool* empty) {
    Args a(fn);
    a.nonneg("rows", rows).nonneg("out_features", out_features).nonneg("in_features", in_features);
    a.require(in_features == 0 || rows <= kMaxElements / in_features, "rows * in_features exceeds 2^62");
    a.require(in_features == 0 || out_features <= kMaxElements / in_features, "out_features * in_features exceeds 2^62");
    a.require(out_features == 0 || rows <= kMaxElements / out_features, "rows * out_features exceeds 2^62");
    a.require(in_features < INT32_MAX, "in_features is %lld, must be < 2^31 - 1", static_cast<long long>(in_features));
    *empty = a.ok() && (rows == 0 || out_features == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (in_features > 0) a.not_null("A", A).not_null("W", W).not_null("W_stats", W_stats).not_null("outlier_cols", outlier_cols);
    return a.status();
}

}  // namespace kbit
