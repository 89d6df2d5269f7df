// The 8-bit interface of libkbit_cuda.so: argument validation (kbit_validate_8bit.h, shared with
// every backend, so messages are identical), then the internal operations of cuda_ops.h. The
// bitsandbytes-named quantizers have no stream parameter and run on the legacy default stream, as
// bitsandbytes does.
#include <cstdint>

#include "cuda_ops.h"
#include "kbit/kbit_8bit.h"
#include "kbit_error.h"
#include "kbit_live_set.h"
#include "kbit_validate_8bit.h"

namespace {

// `dtype_arg` is the caller's dtype for the kbit_ forms (checked), NULL for the bitsandbytes names.
kbit_status quantize(const char* fn, const int32_t* dtype_arg, int32_t dtype, const float* code, const void* A,
                     float* absmax, uint8_t* out, int64_t blocksize, int64_t n, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_blockwise_8bit(fn, kbit::Blockwise::Quantize, dtype_arg, code, A, absmax, out, blocksize, n,
                                          kbit::dtype_bytes(dtype), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::quantize_blockwise_8bit(fn, dtype, code, A, absmax, out, blocksize, n, stream);
    });
}

kbit_status dequantize(const char* fn, const int32_t* dtype_arg, int32_t dtype, const float* code, const uint8_t* A,
                       const float* absmax, void* out, int64_t blocksize, int64_t n, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_blockwise_8bit(fn, kbit::Blockwise::Dequantize, dtype_arg, code, A, absmax, out, blocksize,
                                          n, kbit::dtype_bytes(dtype), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::dequantize_blockwise_8bit(fn, dtype, code, A, absmax, out, blocksize, n, stream);
    });
}

kbit_status igemmlt(const char* fn, kbit::cuda::IgemmltOutput output, kbit_context* context, int m, int n, int k,
                    const int8_t* A, const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc,
                    void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const bool want_scale = output == kbit::cuda::IgemmltOutput::Int8RowScale;
        const kbit_status s =
            kbit::validate_igemmlt(fn, context, m, n, k, A, B, C, row_scale, want_scale, lda, ldb, ldc, &empty);
        if (s != KBIT_STATUS_SUCCESS) return s;
        if (!kbit::cuda::is_context(context)) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", kbit::kNotLiveContext);
        if (empty) return s;
        return kbit::cuda::igemmlt(fn, context, output, m, n, k, A, B, C, row_scale, lda, ldb, ldc, stream);
    });
}

}  // namespace

extern "C" {

KBIT_API uint32_t kbit_8bit_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_8BIT_VERSION_MAJOR, KBIT_8BIT_VERSION_MINOR);
}

#define KBIT_CUDA_8BIT_CODEC(dt, T, DTYPE)                                                                         \
    KBIT_API kbit_status cquantize_blockwise_##dt(float* code, T* A, float* absmax, unsigned char* out,            \
                                                  int blocksize, const int n) {                                   \
        return quantize("cquantize_blockwise_" #dt, nullptr, DTYPE, code, A, absmax, out, blocksize, n, nullptr);           \
    }                                                                                                              \
    KBIT_API kbit_status cdequantize_blockwise_##dt(float* code, unsigned char* A, float* absmax, T* out,          \
                                                    int blocksize, const int n, void* stream) {                   \
        return dequantize("cdequantize_blockwise_" #dt, nullptr, DTYPE, code, A, absmax, out, blocksize, n, stream);        \
    }
KBIT_CUDA_8BIT_CODEC(fp32, float, KBIT_DTYPE_FP32)
KBIT_CUDA_8BIT_CODEC(fp16, kbit_half, KBIT_DTYPE_FP16)
KBIT_CUDA_8BIT_CODEC(bf16, kbit_bf16, KBIT_DTYPE_BF16)
#undef KBIT_CUDA_8BIT_CODEC

KBIT_API kbit_status kbit_quantize_blockwise_8bit(int32_t dtype, const float* code, const void* A, float* absmax,
                                                  uint8_t* out, int64_t blocksize, int64_t n, void* stream) {
    return quantize("kbit_quantize_blockwise_8bit", &dtype, dtype, code, A, absmax, out, blocksize, n,
                    stream);
}

KBIT_API kbit_status kbit_dequantize_blockwise_8bit(int32_t dtype, const float* code, const uint8_t* A,
                                                    const float* absmax, void* out, int64_t blocksize, int64_t n,
                                                    void* stream) {
    return dequantize("kbit_dequantize_blockwise_8bit", &dtype, dtype, code, A, absmax, out, blocksize, n,
                      stream);
}

KBIT_API kbit_status cint8_vector_quant(kbit_half* A, int8_t* out, float* rowStats, float threshold, int rows,
                                        int cols, void* stream) {
    static const char* fn = "cint8_vector_quant";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_int8_vector_quant(fn, A, out, rowStats, threshold, rows, cols, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::int8_vector_quant(fn, A, out, rowStats, nullptr, threshold, rows, cols, stream);
    });
}

KBIT_API kbit_status kbit_int8_vectorwise_quant(const kbit_half* A, int8_t* out, float* rowStats,
                                                uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols,
                                                void* stream) {
    static const char* fn = "kbit_int8_vectorwise_quant";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_int8_vectorwise_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, &empty);
        if (s != KBIT_STATUS_SUCCESS) return s;
        if (empty) {  // no element, but the column flags are still defined (all 0)
            if (outlier_cols == nullptr || cols == 0) return s;
            return kbit::cuda::fill_uint8(fn, outlier_cols, 0, cols, stream);
        }
        return kbit::cuda::int8_vector_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, stream);
    });
}

KBIT_API kbit_context* get_context(void) {
    static const char* fn = "get_context";
    kbit_context* context = nullptr;
    kbit::guarded(fn, [&] {
        context = kbit::cuda::create_context(fn);
        return context != nullptr ? KBIT_STATUS_SUCCESS : KBIT_STATUS_DEVICE_ERROR;
    });
    return context;
}

KBIT_API kbit_status kbit_context_destroy(kbit_context* context) {
    static const char* fn = "kbit_context_destroy";
    return kbit::guarded(fn, [&] {
        if (context == nullptr) return KBIT_STATUS_SUCCESS;
        return kbit::cuda::destroy_context(fn, context);  // rejects a context that is not live
    });
}

#define KBIT_CUDA_IGEMMLT(name, OUTPUT)                                                                            \
    KBIT_API kbit_status name(kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B, void* C, \
                              float* row_scale, int lda, int ldb, int ldc, void* stream) {                         \
        return igemmlt(#name, kbit::cuda::IgemmltOutput::OUTPUT, context, m, n, k, A, B, C, row_scale, lda, ldb,   \
                       ldc, stream);                                                                               \
    }
KBIT_CUDA_IGEMMLT(cigemmlt_32, Int32)
KBIT_CUDA_IGEMMLT(cigemmlt_8, Int8)
KBIT_CUDA_IGEMMLT(cigemmlt_8_rowscale, Int8RowScale)
#undef KBIT_CUDA_IGEMMLT

KBIT_API kbit_status cdequant_mm_int32_fp16(int* A, float* rowStats, float* colStats, kbit_half* out, kbit_half* bias,
                                            int numRows, int numCols, void* stream) {
    static const char* fn = "cdequant_mm_int32_fp16";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_dequant_mm(fn, A, rowStats, colStats, out, numRows, numCols, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::dequant_mm_int32_fp16(fn, A, rowStats, colStats, out, bias, numRows, numCols, stream);
    });
}

KBIT_API kbit_status kbit_int8_outlier_matmul_fp16(const kbit_half* A, const int8_t* W, const float* W_stats,
                                                   const uint8_t* outlier_cols, kbit_half* out, int64_t rows,
                                                   int64_t out_features, int64_t in_features, void* stream) {
    static const char* fn = "kbit_int8_outlier_matmul_fp16";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_outlier_matmul(fn, A, W, W_stats, outlier_cols, out, rows, out_features,
                                                            in_features, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::int8_outlier_matmul_fp16(fn, A, W, W_stats, outlier_cols, out, rows, out_features,
                                                    in_features, stream);
    });
}

}  // extern "C"
