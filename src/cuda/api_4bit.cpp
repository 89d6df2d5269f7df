// The 4-bit interface of libkbit_cuda.so: the operations behind the exported functions of
// kbit_export_4bit.h (which checks every argument first), as launches of the kernels of cuda_ops.h
// on the caller's stream. The bitsandbytes-named quantizers have no stream parameter and run on the
// legacy default stream, as bitsandbytes does.
#include "cuda_ops.h"
#include "kbit_ops_4bit.h"

namespace kbit::ops {

template <class T>
kbit_status quantize_4bit(const char* fn, QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void* stream) {
    return cuda::quantize_4bit(fn, qt, Elem<T>::dtype, A, absmax, out, blocksize, n, stream);
}

template <class T>
kbit_status dequantize_4bit(const char* fn, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return cuda::dequantize_4bit(fn, qt, Elem<T>::dtype, A, absmax, out, blocksize, n, stream);
}

// bitsandbytes' GEMV is the M = 1 GEMM over rows of ldb bytes with the caller's code table.
template <class T>
kbit_status gemv_4bit(const char* fn, int m, int k, const T* A, const uint8_t* B, const float* absmax,
                      const float* datatype, T* out, int ldb, int blocksize, void* stream) {
    cuda::Gemm4bitArgs g{};
    g.dtype = Elem<T>::dtype;
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
    return cuda::gemm_4bit(fn, g, stream);
}

template <class T>
kbit_status gemm_4bit(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                      const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
                      int blocksize, QuantType qt, void* stream) {
    cuda::Gemm4bitArgs g{};
    g.dtype = Elem<T>::dtype;
    g.A = A;
    g.W = B;
    g.row_elems = K;
    g.absmax = absmax;
    g.qabsmax = absmax_8bit;
    g.code = absmax_code;
    g.offset = absmax_offset;
    g.type = qt;
    g.bias = bias;
    g.out = out;
    g.M = M;
    g.N = N;
    g.K = K;
    g.blocksize = blocksize;
    return cuda::gemm_4bit(fn, g, stream);
}

kbit_status nested_absmax_quantize(const char* fn, const float* absmax, const float* code, uint8_t* qabsmax,
                                   float* nested_absmax, float* offset, int64_t blocks, int64_t nested_blocksize,
                                   void* stream) {
    return cuda::nested_absmax_quantize(fn, absmax, code, qabsmax, nested_absmax, offset, blocks, nested_blocksize,
                                        stream);
}

kbit_status nested_absmax_dequantize(const char* fn, const uint8_t* qabsmax, const float* code,
                                     const float* nested_absmax, float offset, float* absmax, int64_t blocks,
                                     int64_t nested_blocksize, void* stream) {
    return cuda::nested_absmax_dequantize(fn, qabsmax, code, nested_absmax, offset, absmax, blocks, nested_blocksize,
                                          stream);
}

template <class T>
kbit_status torchao_quantize(const char* fn, const T* w, uint8_t* quantized_data, int8_t* quantized_scalers,
                             T* quantization_factor, T* scaler_mean, int64_t n, int64_t block_size,
                             int64_t scaler_block_size, void* stream) {
    return cuda::torchao_quantize(fn, Elem<T>::dtype, w, quantized_data, quantized_scalers, quantization_factor,
                                  scaler_mean, n, block_size, scaler_block_size, stream);
}

template <class T>
kbit_status torchao_dequantize(const char* fn, const uint8_t* quantized_data, const int8_t* quantized_scalers,
                               const T* quantization_factor, const T* scaler_mean, T* out, int64_t n,
                               int64_t block_size, int64_t scaler_block_size, void* stream) {
    return cuda::torchao_dequantize(fn, Elem<T>::dtype, quantized_data, quantized_scalers, quantization_factor,
                                    scaler_mean, out, n, block_size, scaler_block_size, stream);
}

// For every element type: the exported functions that call these are compiled in another file
// (src/common/generated/kbit_4bit_exports.cpp).
template decltype(quantize_4bit<float>) quantize_4bit<float>;
template decltype(quantize_4bit<kbit_half>) quantize_4bit<kbit_half>;
template decltype(quantize_4bit<kbit_bf16>) quantize_4bit<kbit_bf16>;
template decltype(dequantize_4bit<float>) dequantize_4bit<float>;
template decltype(dequantize_4bit<kbit_half>) dequantize_4bit<kbit_half>;
template decltype(dequantize_4bit<kbit_bf16>) dequantize_4bit<kbit_bf16>;
template decltype(gemv_4bit<float>) gemv_4bit<float>;
template decltype(gemv_4bit<kbit_half>) gemv_4bit<kbit_half>;
template decltype(gemv_4bit<kbit_bf16>) gemv_4bit<kbit_bf16>;
template decltype(gemm_4bit<float>) gemm_4bit<float>;
template decltype(gemm_4bit<kbit_half>) gemm_4bit<kbit_half>;
template decltype(gemm_4bit<kbit_bf16>) gemm_4bit<kbit_bf16>;
template decltype(torchao_quantize<float>) torchao_quantize<float>;
template decltype(torchao_quantize<kbit_half>) torchao_quantize<kbit_half>;
template decltype(torchao_quantize<kbit_bf16>) torchao_quantize<kbit_bf16>;
template decltype(torchao_dequantize<float>) torchao_dequantize<float>;
template decltype(torchao_dequantize<kbit_half>) torchao_dequantize<kbit_half>;
template decltype(torchao_dequantize<kbit_bf16>) torchao_dequantize<kbit_bf16>;

}  // namespace kbit::ops
