// kbit_ops_4bit.h — the operations every backend defines for the 4-bit interface: typed functions of
// namespace kbit::ops, called only by the checked wrappers of kbit_export_4bit.h, with arguments that passed
// kbit_validate_4bit.h and a non-empty problem. Each returns KBIT_STATUS_SUCCESS or an error it has recorded
// with set_error. A backend defines the templates in its own files and instantiates them there for the
// element types of the interface (`template decltype(op<T>) op<T>;`), since the exported functions that call
// them are compiled separately (src/common/generated/kbit_4bit_exports.cpp).
#pragma once

#include "kbit/kbit_4bit.h"
#include "kbit_error.h"
#include "kbit_formats.h"

namespace kbit::ops {

template <class T>
kbit_status quantize_4bit(const char* fn, QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void* stream);
template <class T>
kbit_status dequantize_4bit(const char* fn, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream);
// One activation row times m packed weight rows of ldb bytes: bitsandbytes' inference GEMV.
template <class T>
kbit_status gemv_4bit(const char* fn, int m, int k, const T* A, const uint8_t* B, const float* absmax,
                      const float* datatype, T* out, int ldb, int blocksize, void* stream);
template <class T>
kbit_status gemm_4bit(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                      const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
                      int blocksize, QuantType qt, void* stream);
// The grouped (mixture-of-experts) GEMM: ids are not yet checked (the operation checks them first).
template <class T>
kbit_status gemm_4bit_grouped(const char* fn, const T* A, int64_t a_rows_per_token, const uint8_t* B,
                              const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                              const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize,
                              QuantType qt, const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine,
                              T* out, void* stream);
// kbit_gemm_4bit_precision's int8 class (K % 32 == 0); its exact class is gemm_4bit itself.
template <class T>
kbit_status gemm_4bit_int8(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                           const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M,
                           int64_t N, int64_t K, int64_t blocksize, QuantType qt, void* stream);
// kbit_gemm_4bit_precision's bf16 class (4bit 1.3, behaviour.md §3.7).
template <class T>
kbit_status gemm_4bit_bf16(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                           const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M,
                           int64_t N, int64_t K, int64_t blocksize, QuantType qt, void* stream);
kbit_status nested_absmax_quantize(const char* fn, const float* absmax, const float* code, uint8_t* qabsmax,
                                   float* nested_absmax, float* offset, int64_t blocks, int64_t nested_blocksize,
                                   void* stream);
kbit_status nested_absmax_dequantize(const char* fn, const uint8_t* qabsmax, const float* code,
                                     const float* nested_absmax, float offset, float* absmax, int64_t blocks,
                                     int64_t nested_blocksize, void* stream);
template <class T>
kbit_status torchao_quantize(const char* fn, const T* w, uint8_t* quantized_data, int8_t* quantized_scalers,
                             T* quantization_factor, T* scaler_mean, int64_t n, int64_t block_size,
                             int64_t scaler_block_size, void* stream);
template <class T>
kbit_status torchao_dequantize(const char* fn, const uint8_t* quantized_data, const int8_t* quantized_scalers,
                               const T* quantization_factor, const T* scaler_mean, T* out, int64_t n,
                               int64_t block_size, int64_t scaler_block_size, void* stream);

}  // namespace kbit::ops
