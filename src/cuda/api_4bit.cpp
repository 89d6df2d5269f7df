// The 4-bit interface of libkbit_cuda.so: argument validation (kbit_validate_4bit.h, shared with
// every backend, so messages are identical), then the internal operations of cuda_ops.h. The
// bitsandbytes-named quantizers have no stream parameter and run on the legacy default stream, as
// bitsandbytes does.
#include "cuda_ops.h"
#include "kbit/kbit_4bit.h"
#include "kbit_error.h"
#include "kbit_half.h"
#include "kbit_validate_4bit.h"

namespace {

using kbit::QuantType;

kbit_status quantize(const char* fn, QuantType type, int32_t dtype, const void* A, float* absmax, uint8_t* out,
                     int64_t blocksize, int64_t n, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_blockwise_4bit(fn, kbit::Blockwise::Quantize, A, absmax, out, blocksize,
                                                            n, kbit::dtype_bytes(dtype), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::quantize_4bit(fn, type, dtype, A, absmax, out, blocksize, n, stream);
    });
}

kbit_status dequantize(const char* fn, QuantType type, int32_t dtype, const uint8_t* A, const float* absmax,
                       void* out, int64_t blocksize, int64_t n, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_blockwise_4bit(fn, kbit::Blockwise::Dequantize, A, absmax, out,
                                                            blocksize, n, kbit::dtype_bytes(dtype), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::dequantize_4bit(fn, type, dtype, A, absmax, out, blocksize, n, stream);
    });
}

kbit_status gemv(const char* fn, int32_t dtype, int m, int k, const void* A, const uint8_t* B, const float* absmax,
                 const float* datatype, void* out, int ldb, int blocksize, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_gemv_4bit(fn, m, k, A, B, absmax, datatype, out, ldb, blocksize, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        kbit::cuda::Gemm4bitArgs g{};
        g.dtype = dtype;
        g.A = A;
        g.W = B;
        g.row_elems = 2 * int64_t{ldb};
        g.absmax = absmax;
        g.lut = datatype;
        g.type = QuantType::NF4;
        g.out = out;
        g.M = 1;
        g.N = m;
        g.K = k;
        g.blocksize = blocksize;
        return kbit::cuda::gemm_4bit(fn, g, stream);
    });
}

kbit_status gemm(const char* fn, int32_t dtype, const void* A, const uint8_t* B, const float* absmax,
                 const uint8_t* absmax_8bit, const float* absmax_code, const float* absmax_offset, void* out,
                 const void* bias, int M, int N, int K, int blocksize, int quant_type, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_gemm_4bit(fn, A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out,
                                                       M, N, K, blocksize, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        kbit::cuda::Gemm4bitArgs g{};
        g.dtype = dtype;
        g.A = A;
        g.W = B;
        g.row_elems = K;
        g.absmax = absmax;
        g.qabsmax = absmax_8bit;
        g.code = absmax_code;
        g.offset = absmax_offset;
        g.type = quant_type == KBIT_QUANT_FP4 ? QuantType::FP4 : QuantType::NF4;
        g.bias = bias;
        g.out = out;
        g.M = M;
        g.N = N;
        g.K = K;
        g.blocksize = blocksize;
        return kbit::cuda::gemm_4bit(fn, g, stream);
    });
}

template <class T>
kbit_status torchao_quantize(const char* fn, const T* w, uint8_t* qdata, int8_t* qscalers, T* factor, T* mean,
                             int64_t n, int64_t block_size, int64_t scaler_block_size, void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        static const char* const names[5] = {"w", "quantized_data", "quantized_scalers", "quantization_factor",
                                             "scaler_mean"};
        const void* const ptrs[5] = {w, qdata, qscalers, factor, mean};
        const kbit_status s = kbit::validate_torchao_nf4(fn, names, ptrs, n, block_size, scaler_block_size, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::torchao_quantize(fn, kbit::Elem<T>::dtype, w, qdata, qscalers, factor, mean, n, block_size,
                                            scaler_block_size, stream);
    });
}

template <class T>
kbit_status torchao_dequantize(const char* fn, const uint8_t* qdata, const int8_t* qscalers, const T* factor,
                               const T* mean, T* out, int64_t n, int64_t block_size, int64_t scaler_block_size,
                               void* stream) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        static const char* const names[5] = {"quantized_data", "quantized_scalers", "quantization_factor",
                                             "scaler_mean", "out"};
        const void* const ptrs[5] = {qdata, qscalers, factor, mean, out};
        const kbit_status s = kbit::validate_torchao_nf4(fn, names, ptrs, n, block_size, scaler_block_size, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::torchao_dequantize(fn, kbit::Elem<T>::dtype, qdata, qscalers, factor, mean, out, n,
                                              block_size, scaler_block_size, stream);
    });
}

}  // namespace

extern "C" {

KBIT_API uint32_t kbit_4bit_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_4BIT_VERSION_MAJOR, KBIT_4BIT_VERSION_MINOR);
}

// One definition per dtype x format; the bodies are the templates above.
#define KBIT_CUDA_4BIT_CODEC(dt, T, DTYPE, fmt, FMT)                                                              \
    KBIT_API kbit_status cquantize_blockwise_##dt##_##fmt(float*, T* A, float* absmax, unsigned char* out,         \
                                                          int blocksize, const int n) {                          \
        return quantize("cquantize_blockwise_" #dt "_" #fmt, QuantType::FMT, DTYPE, A, absmax, out, blocksize, n, \
                        nullptr);                                                                                 \
    }                                                                                                             \
    KBIT_API kbit_status cdequantize_blockwise_##dt##_##fmt(float*, unsigned char* A, float* absmax, T* out,       \
                                                            int blocksize, const int n, void* stream) {          \
        return dequantize("cdequantize_blockwise_" #dt "_" #fmt, QuantType::FMT, DTYPE, A, absmax, out, blocksize, \
                          n, stream);                                                                             \
    }
KBIT_CUDA_4BIT_CODEC(fp32, float, KBIT_DTYPE_FP32, fp4, FP4)
KBIT_CUDA_4BIT_CODEC(fp16, kbit_half, KBIT_DTYPE_FP16, fp4, FP4)
KBIT_CUDA_4BIT_CODEC(bf16, kbit_bf16, KBIT_DTYPE_BF16, fp4, FP4)
KBIT_CUDA_4BIT_CODEC(fp32, float, KBIT_DTYPE_FP32, nf4, NF4)
KBIT_CUDA_4BIT_CODEC(fp16, kbit_half, KBIT_DTYPE_FP16, nf4, NF4)
KBIT_CUDA_4BIT_CODEC(bf16, kbit_bf16, KBIT_DTYPE_BF16, nf4, NF4)
#undef KBIT_CUDA_4BIT_CODEC

#define KBIT_CUDA_4BIT_MATMUL(dt, T, DTYPE)                                                                        \
    KBIT_API kbit_status cgemm_4bit_inference_naive_##dt(int m, int, int k, T* A, unsigned char* B, float* absmax, \
                                                         float* datatype, T* out, int, int ldb, int, int blocksize, \
                                                         void* stream) {                                           \
        return gemv("cgemm_4bit_inference_naive_" #dt, DTYPE, m, k, A, B, absmax, datatype, out, ldb, blocksize,   \
                    stream);                                                                                       \
    }                                                                                                              \
    KBIT_API kbit_status cgemm_4bit_##dt(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit, \
                                         const float* absmax_code, const float* absmax_offset, T* out, const T* bias, \
                                         int M, int N, int K, int blocksize, int quant_type, void* stream) {       \
        return gemm("cgemm_4bit_" #dt, DTYPE, A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, bias, M, N, \
                    K, blocksize, quant_type, stream);                                                             \
    }
KBIT_CUDA_4BIT_MATMUL(fp32, float, KBIT_DTYPE_FP32)
KBIT_CUDA_4BIT_MATMUL(fp16, kbit_half, KBIT_DTYPE_FP16)
KBIT_CUDA_4BIT_MATMUL(bf16, kbit_bf16, KBIT_DTYPE_BF16)
#undef KBIT_CUDA_4BIT_MATMUL

KBIT_API kbit_status kbit_quantize_4bit(int32_t quant_type, int32_t dtype, const void* A, float* absmax, uint8_t* out,
                                        int64_t blocksize, int64_t n, void* stream) {
    static const char* fn = "kbit_quantize_4bit";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_blockwise_4bit_64(fn, kbit::Blockwise::Quantize, quant_type, dtype, A, absmax, out,
                                             blocksize, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::quantize_4bit(fn, static_cast<QuantType>(quant_type), dtype, A, absmax, out, blocksize, n,
                                         stream);
    });
}

KBIT_API kbit_status kbit_dequantize_4bit(int32_t quant_type, int32_t dtype, const uint8_t* A, const float* absmax,
                                          void* out, int64_t blocksize, int64_t n, void* stream) {
    static const char* fn = "kbit_dequantize_4bit";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_blockwise_4bit_64(fn, kbit::Blockwise::Dequantize, quant_type, dtype, A, absmax, out,
                                             blocksize, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::dequantize_4bit(fn, static_cast<QuantType>(quant_type), dtype, A, absmax, out, blocksize,
                                           n, stream);
    });
}

KBIT_API kbit_status kbit_nested_absmax_quantize(const float* absmax, const float* code, uint8_t* qabsmax,
                                                 float* nested_absmax, float* offset, int64_t blocks,
                                                 int64_t nested_blocksize, void* stream) {
    static const char* fn = "kbit_nested_absmax_quantize";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_nested_absmax(fn, "absmax", absmax, code, "nested_absmax", nested_absmax, "qabsmax", qabsmax,
                                         "offset", offset, blocks, nested_blocksize, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::nested_absmax_quantize(fn, absmax, code, qabsmax, nested_absmax, offset, blocks,
                                                  nested_blocksize, stream);
    });
}

KBIT_API kbit_status kbit_nested_absmax_dequantize(const uint8_t* qabsmax, const float* code,
                                                   const float* nested_absmax, float offset, float* absmax,
                                                   int64_t blocks, int64_t nested_blocksize, void* stream) {
    static const char* fn = "kbit_nested_absmax_dequantize";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_nested_absmax(fn, "qabsmax", qabsmax, code, "nested_absmax", nested_absmax, "absmax", absmax,
                                         nullptr, nullptr, blocks, nested_blocksize, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::nested_absmax_dequantize(fn, qabsmax, code, nested_absmax, offset, absmax, blocks,
                                                    nested_blocksize, stream);
    });
}

#define KBIT_CUDA_TORCHAO(dt, T)                                                                                   \
    KBIT_API kbit_status kbit_quantize_nf4_torchao_##dt(const T* w, uint8_t* quantized_data,                      \
                                                        int8_t* quantized_scalers, T* quantization_factor,         \
                                                        T* scaler_mean, int64_t n, int64_t block_size,             \
                                                        int64_t scaler_block_size, void* stream) {                 \
        return torchao_quantize("kbit_quantize_nf4_torchao_" #dt, w, quantized_data, quantized_scalers,            \
                                quantization_factor, scaler_mean, n, block_size, scaler_block_size, stream);       \
    }                                                                                                              \
    KBIT_API kbit_status kbit_dequantize_nf4_torchao_##dt(const uint8_t* quantized_data,                          \
                                                          const int8_t* quantized_scalers,                         \
                                                          const T* quantization_factor, const T* scaler_mean,      \
                                                          T* out, int64_t n, int64_t block_size,                   \
                                                          int64_t scaler_block_size, void* stream) {               \
        return torchao_dequantize("kbit_dequantize_nf4_torchao_" #dt, quantized_data, quantized_scalers,           \
                                  quantization_factor, scaler_mean, out, n, block_size, scaler_block_size, stream); \
    }
KBIT_CUDA_TORCHAO(fp32, float)
KBIT_CUDA_TORCHAO(fp16, kbit_half)
KBIT_CUDA_TORCHAO(bf16, kbit_bf16)
#undef KBIT_CUDA_TORCHAO

}  // extern "C"
