// The 8-bit interface of libkbit_cuda.so: the operations behind the exported functions of
// kbit_export_8bit.h (which checks every argument first), as launches of the kernels of cuda_ops.h
// on the caller's stream. The bitsandbytes-named quantizer has no stream parameter and runs on the
// legacy default stream, as bitsandbytes does.
#include "cuda_ops.h"
#include "kbit_ops_8bit.h"

namespace kbit::ops {

template <class T>
kbit_status quantize_8bit(const char* fn, const float* code, const T* A, float* absmax, uint8_t* out,
                          int64_t blocksize, int64_t n, void* stream) {
    return cuda::quantize_blockwise_8bit(fn, Elem<T>::dtype, code, A, absmax, out, blocksize, n, stream);
}

template <class T>
kbit_status dequantize_8bit(const char* fn, const float* code, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return cuda::dequantize_blockwise_8bit(fn, Elem<T>::dtype, code, A, absmax, out, blocksize, n, stream);
}

kbit_status int8_vector_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats, float threshold,
                              int64_t rows, int64_t cols, void* stream) {
    return cuda::int8_vector_quant(fn, A, out, rowStats, nullptr, threshold, rows, cols, stream);
}

kbit_status int8_vectorwise_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats,
                                  uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void* stream) {
    return cuda::int8_vector_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, stream);
}

kbit_status clear_bytes(const char* fn, uint8_t* p, int64_t n, void* stream) {
    return cuda::fill_uint8(fn, p, 0, n, stream);
}

kbit_context* context_create(const char* fn) { return cuda::create_context(fn); }
kbit_status context_destroy(const char* fn, kbit_context* context) { return cuda::destroy_context(fn, context); }
bool context_is_live(const kbit_context* context) { return cuda::is_context(context); }

kbit_status igemmlt(const char* fn, IgemmOutput output, kbit_context* context, int m, int n, int k, const int8_t* A,
                    const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc, void* stream) {
    const cuda::IgemmltOutput stage = output == IgemmOutput::Int32  ? cuda::IgemmltOutput::Int32
                                      : output == IgemmOutput::Int8 ? cuda::IgemmltOutput::Int8
                                                                    : cuda::IgemmltOutput::Int8RowScale;
    return cuda::igemmlt(fn, context, stage, m, n, k, A, B, C, row_scale, lda, ldb, ldc, stream);
}

kbit_status dequant_mm_int32_fp16(const char* fn, const int32_t* A, const float* rowStats, const float* colStats,
                                  kbit_half* out, const kbit_half* bias, int numRows, int numCols, void* stream) {
    return cuda::dequant_mm_int32_fp16(fn, A, rowStats, colStats, out, bias, numRows, numCols, stream);
}

kbit_status int8_outlier_matmul_fp16(const char* fn, const kbit_half* A, const int8_t* W, const float* W_stats,
                                     const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                                     int64_t in_features, void* stream) {
    return cuda::int8_outlier_matmul_fp16(fn, A, W, W_stats, outlier_cols, out, rows, out_features, in_features,
                                          stream);
}

// For every element type: the exported functions that call these are compiled in another file
// (src/common/generated/kbit_8bit_exports.cpp).
template decltype(quantize_8bit<float>) quantize_8bit<float>;
template decltype(quantize_8bit<kbit_half>) quantize_8bit<kbit_half>;
template decltype(quantize_8bit<kbit_bf16>) quantize_8bit<kbit_bf16>;
template decltype(dequantize_8bit<float>) dequantize_8bit<float>;
template decltype(dequantize_8bit<kbit_half>) dequantize_8bit<kbit_half>;
template decltype(dequantize_8bit<kbit_bf16>) dequantize_8bit<kbit_bf16>;

}  // namespace kbit::ops
