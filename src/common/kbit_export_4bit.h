// kbit_export_4bit.h — the front end of the 4-bit interface: one checked wrapper per family of
// abi/kbit_4bit.def, called by the generated exported functions (src/common/generated/kbit_4bit_exports.cpp)
// with the function's name and, for the bitsandbytes-named families, its format (QuantType). A wrapper runs
// the argument checks of kbit_validate_4bit.h inside the exception barrier (kbit_export.h) and calls the
// backend's operation (kbit_ops_4bit.h) only for a valid, non-empty call.
#pragma once

#include "kbit_export.h"
#include "kbit_ops_4bit.h"
#include "kbit_validate_4bit.h"

// The 4-bit interface minor this backend implements (its version symbol): the header's, unless the backend's
// build defines KBIT_BACKEND_4BIT_MINOR lower.
#ifndef KBIT_BACKEND_4BIT_MINOR
#define KBIT_BACKEND_4BIT_MINOR KBIT_4BIT_VERSION_MINOR
#endif
static_assert(KBIT_BACKEND_4BIT_MINOR <= KBIT_4BIT_VERSION_MINOR,
              "a backend cannot implement a newer minor than its header");

namespace kbit::exports {

// ---- one wrapper per family of abi/kbit_4bit.def ----------------------------------------------

// Both directions of every blockwise family run this body: quantizing reads T elements from A and
// writes packed codes to out, dequantizing the other way round, under the same checks.
template <Blockwise dir, class Element, class In, class Absmax, class Out>
kbit_status blockwise_4bit(const char* fn, int32_t quant_type, Element element, In* A, Absmax* absmax, Out* out,
                           int64_t blocksize, int64_t n, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_blockwise_4bit(fn, dir, quant_type, element.dtype(), A, absmax, out, blocksize, n,
                                           element.bytes(), empty);
        },
        [&] {
            const auto qt = static_cast<QuantType>(quant_type);
            return element.with_type([&](auto tag) {
                using T = typename decltype(tag)::type;
                if constexpr (dir == Blockwise::Quantize)
                    return ops::quantize_4bit<T>(fn, qt, static_cast<const T*>(A), absmax, out, blocksize, n, stream);
                else
                    return ops::dequantize_4bit<T>(fn, qt, A, absmax, static_cast<T*>(out), blocksize, n, stream);
            });
        });
}

// bitsandbytes' quantizers have no stream: device backends use the legacy default stream (NULL).
template <class T>
kbit_status blockwise_quantize_4bit(const char* fn, QuantType qt, float* /*code*/, T* A, float* absmax,
                                    unsigned char* out, int blocksize, int n) {
    return blockwise_4bit<Blockwise::Quantize>(fn, static_cast<int32_t>(qt), ElementOf<T>{}, A, absmax, out,
                                               blocksize, n, nullptr);
}

template <class T>
kbit_status blockwise_dequantize_4bit(const char* fn, QuantType qt, float* /*code*/, unsigned char* A, float* absmax,
                                      T* out, int blocksize, int n, void* stream) {
    return blockwise_4bit<Blockwise::Dequantize>(fn, static_cast<int32_t>(qt), ElementOf<T>{}, A, absmax, out,
                                                 blocksize, n, stream);
}

// n, lda and ldc are bitsandbytes' and unused: the output has m elements, A has k.
template <class T>
kbit_status gemv_4bit(const char* fn, int m, int /*n*/, int k, T* A, unsigned char* B, float* absmax, float* datatype,
                      T* out, int /*lda*/, int ldb, int /*ldc*/, int blocksize, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) { return validate_gemv_4bit(fn, m, k, A, B, absmax, datatype, out, ldb, blocksize, empty); },
        [&] { return ops::gemv_4bit<T>(fn, m, k, A, B, absmax, datatype, out, ldb, blocksize, stream); });
}

template <class T>
kbit_status gemm_4bit(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                      const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
                      int blocksize, int quant_type, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_gemm_4bit(fn, A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, M, N, K,
                                      blocksize, empty);
        },
        [&] {
            const QuantType qt = quant_type == KBIT_QUANT_FP4 ? QuantType::FP4 : QuantType::NF4;
            return ops::gemm_4bit<T>(fn, A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, bias, M, N, K,
                                     blocksize, qt, stream);
        });
}

inline kbit_status gemm_4bit_grouped(const char* fn, int32_t dtype, const void* A, int64_t a_rows_per_token,
                                     const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                                     const float* absmax_code, const float* absmax_offset, int64_t experts, int64_t N,
                                     int64_t K, int64_t blocksize, int32_t quant_type, const int32_t* ids,
                                     int64_t tokens, int64_t top_k, const float* combine, void* out, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_gemm_4bit_grouped(fn, dtype, A, a_rows_per_token, B, absmax, absmax_8bit, absmax_code,
                                              absmax_offset, experts, N, K, blocksize, quant_type, ids, tokens,
                                              top_k, out, empty);
        },
        [&] {
            const auto qt = static_cast<QuantType>(quant_type);
            return with_dtype(dtype, [&](auto tag) {
                using T = typename decltype(tag)::type;
                return ops::gemm_4bit_grouped<T>(fn, static_cast<const T*>(A), a_rows_per_token, B, absmax,
                                                 absmax_8bit, absmax_code, absmax_offset, experts, N, K, blocksize,
                                                 qt, ids, tokens, top_k, combine, static_cast<T*>(out), stream);
            });
        });
}

// EXACT is the backend's own cgemm_4bit operation (so the same bytes); sizes fit int once validated. Only a
// backend at 4bit 1.2 or later defines ops::gemm_4bit_int8, and one at 1.3 or later ops::gemm_4bit_bf16.
#if KBIT_BACKEND_4BIT_MINOR >= 2
inline kbit_status gemm_4bit_precision(const char* fn, int32_t precision, int32_t dtype, const void* A,
                                       const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                                       const float* absmax_code, const float* absmax_offset, void* out,
                                       const void* bias, int64_t M, int64_t N, int64_t K, int64_t blocksize,
                                       int32_t quant_type, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_gemm_4bit_precision(fn, KBIT_BACKEND_4BIT_MINOR, precision, dtype, A, B, absmax,
                                                absmax_8bit, absmax_code, absmax_offset, out, M, N, K, blocksize,
                                                empty);
        },
        [&] {
            const QuantType qt = quant_type == KBIT_QUANT_FP4 ? QuantType::FP4 : QuantType::NF4;
            return with_dtype(dtype, [&](auto tag) {
                using T = typename decltype(tag)::type;
                const T* a = static_cast<const T*>(A);
                const T* b = static_cast<const T*>(bias);
                T* o = static_cast<T*>(out);
#if KBIT_BACKEND_4BIT_MINOR >= 3
                if (precision == KBIT_PRECISION_BF16)
                    return ops::gemm_4bit_bf16<T>(fn, a, B, absmax, absmax_8bit, absmax_code, absmax_offset, o, b, M,
                                                  N, K, blocksize, qt, stream);
#endif
                if (precision == KBIT_PRECISION_INT8)
                    return ops::gemm_4bit_int8<T>(fn, a, B, absmax, absmax_8bit, absmax_code, absmax_offset, o, b, M,
                                                  N, K, blocksize, qt, stream);
                return ops::gemm_4bit<T>(fn, a, B, absmax, absmax_8bit, absmax_code, absmax_offset, o, b,
                                         static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                         static_cast<int>(blocksize), qt, stream);
            });
        });
}
#endif

inline kbit_status quantize_4bit_dtype(const char* fn, int32_t quant_type, int32_t dtype, const void* A, float* absmax,
                                       uint8_t* out, int64_t blocksize, int64_t n, void* stream) {
    return blockwise_4bit<Blockwise::Quantize>(fn, quant_type, DtypeElement{dtype}, A, absmax, out, blocksize, n,
                                               stream);
}

inline kbit_status dequantize_4bit_dtype(const char* fn, int32_t quant_type, int32_t dtype, const uint8_t* A,
                                         const float* absmax, void* out, int64_t blocksize, int64_t n, void* stream) {
    return blockwise_4bit<Blockwise::Dequantize>(fn, quant_type, DtypeElement{dtype}, A, absmax, out, blocksize, n,
                                                 stream);
}

inline kbit_status nested_absmax_quantize(const char* fn, const float* absmax, const float* code, uint8_t* qabsmax,
                                          float* nested_absmax, float* offset, int64_t blocks,
                                          int64_t nested_blocksize, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_nested_absmax(fn, "absmax", absmax, code, "nested_absmax", nested_absmax, "qabsmax",
                                          qabsmax, "offset", offset, blocks, nested_blocksize, empty);
        },
        [&] {
            return ops::nested_absmax_quantize(fn, absmax, code, qabsmax, nested_absmax, offset, blocks,
                                               nested_blocksize, stream);
        });
}

inline kbit_status nested_absmax_dequantize(const char* fn, const uint8_t* qabsmax, const float* code,
                                            const float* nested_absmax, float offset, float* absmax, int64_t blocks,
                                            int64_t nested_blocksize, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_nested_absmax(fn, "qabsmax", qabsmax, code, "nested_absmax", nested_absmax, "absmax",
                                          absmax, nullptr, nullptr, blocks, nested_blocksize, empty);
        },
        [&] {
            return ops::nested_absmax_dequantize(fn, qabsmax, code, nested_absmax, offset, absmax, blocks,
                                                 nested_blocksize, stream);
        });
}

// Both directions of torchao's NF4Tensor run this body: `elements` is w (quantize) or out (dequantize),
// the other four tensors are the NF4Tensor's.
template <Blockwise dir, class T, class Elements, class Data, class Scalers, class Factor>
kbit_status torchao_nf4(const char* fn, Elements* elements, Data* quantized_data, Scalers* quantized_scalers,
                        Factor* quantization_factor, Factor* scaler_mean, int64_t n, int64_t block_size,
                        int64_t scaler_block_size, void* stream) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_torchao_nf4(fn, dir, elements, quantized_data, quantized_scalers, quantization_factor,
                                        scaler_mean, n, block_size, scaler_block_size, empty);
        },
        [&] {
            if constexpr (dir == Blockwise::Quantize)
                return ops::torchao_quantize<T>(fn, elements, quantized_data, quantized_scalers, quantization_factor,
                                                scaler_mean, n, block_size, scaler_block_size, stream);
            else
                return ops::torchao_dequantize<T>(fn, quantized_data, quantized_scalers, quantization_factor,
                                                  scaler_mean, elements, n, block_size, scaler_block_size, stream);
        });
}

template <class T>
kbit_status torchao_quantize(const char* fn, const T* w, uint8_t* quantized_data, int8_t* quantized_scalers,
                             T* quantization_factor, T* scaler_mean, int64_t n, int64_t block_size,
                             int64_t scaler_block_size, void* stream) {
    return torchao_nf4<Blockwise::Quantize, T>(fn, w, quantized_data, quantized_scalers, quantization_factor,
                                               scaler_mean, n, block_size, scaler_block_size, stream);
}

template <class T>
kbit_status torchao_dequantize(const char* fn, const uint8_t* quantized_data, const int8_t* quantized_scalers,
                               const T* quantization_factor, const T* scaler_mean, T* out, int64_t n,
                               int64_t block_size, int64_t scaler_block_size, void* stream) {
    return torchao_nf4<Blockwise::Dequantize, T>(fn, out, quantized_data, quantized_scalers, quantization_factor,
                                                 scaler_mean, n, block_size, scaler_block_size, stream);
}

}  // namespace kbit::exports
