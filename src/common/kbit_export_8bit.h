// kbit_export_8bit.h — the front end of the 8-bit interface: one checked wrapper per family of
// abi/kbit_8bit.def, called by the generated exported functions (src/common/generated/kbit_8bit_exports.cpp)
// with the function's name and, for cigemmlt_*, its output stage (IgemmOutput). A wrapper runs the argument
// checks of kbit_validate_8bit.h inside the exception barrier (kbit_export.h) and calls the backend's
// operation (kbit_ops_8bit.h) only for a valid, non-empty call.
#pragma once

#include "kbit_export.h"
#include "kbit_live_set.h"
#include "kbit_ops_8bit.h"
#include "kbit_validate_8bit.h"

// The 8-bit interface minor this backend implements (its version symbol): the header's, unless the backend's
// build defines KBIT_BACKEND_8BIT_MINOR lower (the CUDA backend: 1.0, whose blockwise functions stop at
// blocksize 4096).
#ifndef KBIT_BACKEND_8BIT_MINOR
#define KBIT_BACKEND_8BIT_MINOR KBIT_8BIT_VERSION_MINOR
#endif
static_assert(KBIT_BACKEND_8BIT_MINOR <= KBIT_8BIT_VERSION_MINOR,
              "a backend cannot implement a newer minor than its header");

namespace kbit::exports {

constexpr int64_t kMaxBlocksizeOfBackend = max_blocksize_8bit(KBIT_BACKEND_8BIT_MINOR);

// ---- one wrapper per family of abi/kbit_8bit.def ----------------------------------------------

// Both directions of every blockwise family (and bitsandbytes' CPU names, kbit_export_bnb_cpu.h) run
// this body: quantizing reads T elements from A and writes codes to out, dequantizing the other way
// round, under the same checks. max_blocksize is the backend's (kMaxBlocksizeOfBackend), or
// kAnyBlocksize for bitsandbytes' CPU sizes.
template <Blockwise dir, class Element, class In, class Absmax, class Out>
kbit_status blockwise_8bit(const char* fn, Element element, int64_t max_blocksize, const float* code, In* A,
                           Absmax* absmax, Out* out, int64_t blocksize, int64_t n, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_blockwise_8bit(fn, dir, element.dtype(), code, A, absmax, out, blocksize, n,
                                           element.bytes(), max_blocksize, empty);
        },
        [&] {
            return element.with_type([&](auto tag) {
                using T = typename decltype(tag)::type;
                if constexpr (dir == Blockwise::Quantize)
                    return ops::quantize_8bit<T>(fn, code, static_cast<const T*>(A), absmax, out, blocksize, n, stream);
                else
                    return ops::dequantize_8bit<T>(fn, code, A, absmax, static_cast<T*>(out), blocksize, n, stream);
            });
        });
}

// bitsandbytes' quantizer has no stream: device backends use the legacy default stream (NULL).
template <class T>
kbit_status blockwise_quantize_8bit(const char* fn, float* code, T* A, float* absmax, unsigned char* out,
                                    int blocksize, int n) {
    return blockwise_8bit<Blockwise::Quantize>(fn, ElementOf<T>{}, kMaxBlocksizeOfBackend, code, A, absmax, out,
                                               blocksize, n, nullptr);
}

template <class T>
kbit_status blockwise_dequantize_8bit(const char* fn, float* code, unsigned char* A, float* absmax, T* out,
                                      int blocksize, int n, void* stream) {
    return blockwise_8bit<Blockwise::Dequantize>(fn, ElementOf<T>{}, kMaxBlocksizeOfBackend, code, A, absmax, out,
                                                 blocksize, n, stream);
}

inline kbit_status quantize_8bit_dtype(const char* fn, int32_t dtype, const float* code, const void* A, float* absmax,
                                       uint8_t* out, int64_t blocksize, int64_t n, void* stream) {
    return blockwise_8bit<Blockwise::Quantize>(fn, DtypeElement{dtype}, kMaxBlocksizeOfBackend, code, A, absmax, out,
                                               blocksize, n, stream);
}

inline kbit_status dequantize_8bit_dtype(const char* fn, int32_t dtype, const float* code, const uint8_t* A,
                                         const float* absmax, void* out, int64_t blocksize, int64_t n, void* stream) {
    return blockwise_8bit<Blockwise::Dequantize>(fn, DtypeElement{dtype}, kMaxBlocksizeOfBackend, code, A, absmax,
                                                 out, blocksize, n, stream);
}

inline kbit_status int8_vector_quant(const char* fn, kbit_half* A, int8_t* out, float* rowStats, float threshold,
                                     int rows, int cols, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) { return validate_int8_vector_quant(fn, A, out, rowStats, threshold, rows, cols, empty); },
        [&] { return ops::int8_vector_quant(fn, A, out, rowStats, threshold, rows, cols, stream); });
}

// A call with no element still defines its column flags: all 0.
inline kbit_status int8_vectorwise_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats,
                                         uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols,
                                         void* stream) {
    return guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            validate_int8_vectorwise_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, &empty);
        if (s != KBIT_STATUS_SUCCESS) return s;
        if (empty) return outlier_cols != nullptr && cols > 0 ? ops::clear_bytes(fn, outlier_cols, cols, stream) : s;
        return ops::int8_vectorwise_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, stream);
    });
}

inline kbit_context* context_create(const char* fn) {
    kbit_context* context = nullptr;
    guarded(fn, [&] {
        context = ops::context_create(fn);
        return context != nullptr ? KBIT_STATUS_SUCCESS : KBIT_STATUS_OUT_OF_MEMORY;
    });
    return context;
}

// NULL is a no-op, as free(NULL).
inline kbit_status context_destroy(const char* fn, kbit_context* context) {
    if (context == nullptr) return KBIT_STATUS_SUCCESS;
    return guarded(fn, [&] { return ops::context_destroy(fn, context); });
}

// The context is checked before the empty-input rule: a destroyed context is refused even for an
// empty product.
inline kbit_status igemmlt(const char* fn, IgemmOutput output, kbit_context* context, int m, int n, int k,
                           const int8_t* A, const int8_t* B, void* C, float* row_scale, int lda, int ldb, int ldc,
                           void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            const kbit_status s = validate_igemmlt(fn, context, m, n, k, A, B, C, row_scale,
                                                   output == IgemmOutput::Int8RowScale, lda, ldb, ldc, empty);
            if (s != KBIT_STATUS_SUCCESS) return s;
            if (!ops::context_is_live(context))
                return set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", kNotLiveContext);
            return s;
        },
        [&] { return ops::igemmlt(fn, output, context, m, n, k, A, B, C, row_scale, lda, ldb, ldc, stream); });
}

inline kbit_status dequant_mm_int32(const char* fn, int* A, float* rowStats, float* colStats, kbit_half* out,
                                    kbit_half* bias, int numRows, int numCols, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) { return validate_dequant_mm(fn, A, rowStats, colStats, out, numRows, numCols, empty); },
        [&] { return ops::dequant_mm_int32_fp16(fn, A, rowStats, colStats, out, bias, numRows, numCols, stream); });
}

inline kbit_status int8_outlier_matmul(const char* fn, const kbit_half* A, const int8_t* W, const float* W_stats,
                                       const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                                       int64_t in_features, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_outlier_matmul(fn, A, W, W_stats, outlier_cols, out, rows, out_features, in_features,
                                           empty);
        },
        [&] {
            return ops::int8_outlier_matmul_fp16(fn, A, W, W_stats, outlier_cols, out, rows, out_features,
                                                 in_features, stream);
        });
}

}  // namespace kbit::exports
