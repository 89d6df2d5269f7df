// The 4-bit interface of libkbit_cpu.so: argument checks (shared with every backend through
// kbit_validate_4bit.h), thread drivers over the kernels of the active ISA, and the exported
// functions (one template per family, stamped out per dtype and format).
#include <algorithm>
#include <vector>

#include "kbit/kbit_4bit.h"
#include "kbit_error.h"
#include "kbit_validate_4bit.h"
#include "kernels_4bit.h"
#include "parallel_range.h"
#include "ref_4bit.h"

namespace {

using kbit::Elem;
using kbit::QuantType;
using kbit::cpu::parallel_range;
using kbit::cpu::parallel_range_aligned;

// Outputs at least this large are written with non-temporal stores: they cannot stay in the cache
// anyway, and streaming saves the read-for-ownership of every output line.
constexpr int64_t kStreamBytes = int64_t{8} << 20;

// ------------------------------------------------------------------------------------------------
// Drivers
// ------------------------------------------------------------------------------------------------

template <class T>
void quantize(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n) {
    const auto& k = kbit::cpu::quant_4bit_kernels<T>();
    const int64_t blocks = (n + blocksize - 1) / blocksize;
    parallel_range(blocks, std::max<int64_t>(1, (int64_t{1} << 16) / blocksize),
                   [&](int64_t b0, int64_t b1) { k.quantize_blocks(qt, A, absmax, out, blocksize, n, b0, b1); });
}

template <class T>
void dequantize(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize, int64_t n) {
    const auto& k = kbit::cpu::quant_4bit_kernels<T>();
    const bool stream = n * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
    // Chunks start on multiples of 64 elements: whole bytes and whole 32-element kernel groups.
    parallel_range_aligned(n, 64, int64_t{1} << 16, [&](int64_t i0, int64_t i1) {
        k.dequantize_range(qt, A, absmax, out, blocksize, i0, i1, stream);
    });
}

// Rows per thread so that each thread gets a worthwhile amount of weight.
int64_t min_rows(int64_t k) { return std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(1, k)); }

template <class T>
void gemv(int m, int k, const T* A, const uint8_t* B, const float* absmax, const float* datatype, T* out, int ldb,
          int blocksize) {
    const auto& dot = kbit::cpu::dot_4bit_kernels();
    const int64_t row_elems = 2 * static_cast<int64_t>(ldb);
    // The ref ISA, rows that do not start a block, or k == 0 (all-zero sums; the inputs, the table
    // included, may then be NULL, and the SIMD kernels read the table up front).
    if (dot.group == 0 || k == 0 || row_elems % blocksize != 0) {
        parallel_range(m, min_rows(k), [&](int64_t r0, int64_t r1) {
            kbit::ref::gemv_4bit_rows(k, A, B, absmax, datatype, out, ldb, blocksize, static_cast<int>(r0),
                                      static_cast<int>(r1));
        });
        return;
    }
    std::vector<float> a(static_cast<size_t>(k)), prepared(static_cast<size_t>(k)), sums(static_cast<size_t>(m));
    for (int i = 0; i < k; ++i) a[i] = Elem<T>::load(A[i]);
    dot.prepare(a.data(), k, prepared.data());
    parallel_range(m, min_rows(k), [&](int64_t r0, int64_t r1) {
        dot.dot_rows(prepared.data(), 1, k, B, row_elems, absmax, blocksize, datatype, r0, r1, sums.data(), m);
        for (int64_t r = r0; r < r1; ++r) out[r] = Elem<T>::store(sums[r]);
    });
}

template <class T>
void gemm(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
          const float* absmax_offset, T* out, const T* bias, int M, int N, int K, int blocksize, int quant_type) {
    const auto& dot = kbit::cpu::dot_4bit_kernels();
    if (dot.group == 0 || K % blocksize != 0) {
        kbit::ref::gemm_4bit(A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, bias, M, N, K, blocksize,
                             quant_type);
        return;
    }
    const int64_t blocks = static_cast<int64_t>(N) * K / blocksize;
    std::vector<float> restored;
    const float* scales = absmax;
    if (absmax_8bit != nullptr) {
        restored.resize(static_cast<size_t>(blocks));
        parallel_range(blocks, int64_t{1} << 16, [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b)
                restored[b] = kbit::ref::gemm_block_scale(b, absmax, absmax_8bit, absmax_code, absmax_offset);
        });
        scales = restored.data();
    }
    const size_t mk = static_cast<size_t>(M) * K;
    std::vector<float> a(static_cast<size_t>(K)), prepared(mk), sums(static_cast<size_t>(M) * N);
    for (int i = 0; i < M; ++i) {
        for (int kk = 0; kk < K; ++kk) a[kk] = Elem<T>::load(A[static_cast<size_t>(i) * K + kk]);
        dot.prepare(a.data(), K, prepared.data() + static_cast<size_t>(i) * K);
    }
    const float* lut = quant_type == 1 ? kbit::kFp4Values : kbit::kNf4Values;
    parallel_range(N, std::max<int64_t>(1, min_rows(K) / std::max(1, M)), [&](int64_t r0, int64_t r1) {
        dot.dot_rows(prepared.data(), M, K, B, K, scales, blocksize, lut, r0, r1, sums.data(), N);
        for (int i = 0; i < M; ++i)
            for (int64_t j = r0; j < r1; ++j) {
                float s = sums[static_cast<size_t>(i) * N + j];
                if (bias != nullptr) s += Elem<T>::load(bias[j]);
                out[static_cast<size_t>(i) * N + j] = Elem<T>::store(s);
            }
    });
}

// ------------------------------------------------------------------------------------------------
// Entry templates: validate, then run. Nothing is written unless every argument is valid.
// ------------------------------------------------------------------------------------------------

template <class T>
kbit_status quantize_entry(const char* fn, QuantType qt, const T* A, float* absmax, uint8_t* out,
                           int64_t blocksize, int64_t n) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_blockwise_4bit(fn, kbit::Blockwise::Quantize, A, absmax, out, blocksize,
                                                            n, sizeof(T), &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty) quantize(qt, A, absmax, out, blocksize, n);
        return s;
    });
}

template <class T>
kbit_status dequantize_entry(const char* fn, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                             int64_t blocksize, int64_t n) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_blockwise_4bit(fn, kbit::Blockwise::Dequantize, A, absmax, out,
                                                            blocksize, n, sizeof(T), &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty) dequantize(qt, A, absmax, out, blocksize, n);
        return s;
    });
}

template <class T>
kbit_status gemv_entry(const char* fn, int m, int k, const T* A, const uint8_t* B, const float* absmax,
                       const float* datatype, T* out, int ldb, int blocksize) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_gemv_4bit(fn, m, k, A, B, absmax, datatype, out, ldb, blocksize, &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty) gemv(m, k, A, B, absmax, datatype, out, ldb, blocksize);
        return s;
    });
}

template <class T>
kbit_status gemm_entry(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                       const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N,
                       int K, int blocksize, int quant_type) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_gemm_4bit(fn, A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out,
                                                       M, N, K, blocksize, &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty)
            gemm(A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, bias, M, N, K, blocksize, quant_type);
        return s;
    });
}

template <class T>
kbit_status torchao_quantize_entry(const char* fn, const T* w, uint8_t* qd, int8_t* qs, T* qf, T* mean, int64_t n,
                                   int64_t block_size, int64_t scaler_block_size) {
    return kbit::guarded(fn, [&] {
        static const char* const names[5] = {"w", "quantized_data", "quantized_scalers", "quantization_factor",
                                             "scaler_mean"};
        const void* const ptrs[5] = {w, qd, qs, qf, mean};
        bool empty = false;
        const kbit_status s = kbit::validate_torchao_nf4(fn, names, ptrs, n, block_size, scaler_block_size, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        // Block absmax and element indices are independent per block; the mean keeps torch's order.
        const int64_t blocks = n / block_size;
        const int64_t min_blocks = std::max<int64_t>(1, (int64_t{1} << 14) / block_size);
        std::vector<T> scalers(static_cast<size_t>(blocks));
        parallel_range(blocks, min_blocks, [&](int64_t b0, int64_t b1) {
            kbit::ref::torchao_block_absmax(w, scalers.data(), b0, b1, block_size);
        });
        kbit::ref::torchao_scalers(scalers.data(), qs, qf, mean, blocks, scaler_block_size);
        parallel_range(blocks, min_blocks, [&](int64_t b0, int64_t b1) {
            kbit::ref::torchao_quantize_elements(w, scalers.data(), qd, b0, b1, block_size);
        });
        return s;
    });
}

template <class T>
kbit_status torchao_dequantize_entry(const char* fn, const uint8_t* qd, const int8_t* qs, const T* qf,
                                     const T* mean, T* out, int64_t n, int64_t block_size,
                                     int64_t scaler_block_size) {
    return kbit::guarded(fn, [&] {
        static const char* const names[5] = {"quantized_data", "quantized_scalers", "quantization_factor",
                                             "scaler_mean", "out"};
        const void* const ptrs[5] = {qd, qs, qf, mean, out};
        bool empty = false;
        const kbit_status s = kbit::validate_torchao_nf4(fn, names, ptrs, n, block_size, scaler_block_size, &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty) {
            // Blocks are independent: split them across threads.
            const int64_t blocks = n / block_size;
            parallel_range_aligned(blocks, scaler_block_size, std::max<int64_t>(1, (int64_t{1} << 16) / block_size),
                                   [&](int64_t b0, int64_t b1) {
                                       const int64_t g0 = b0 / scaler_block_size;
                                       kbit::ref::torchao_dequantize(qd + b0 * block_size / 2, qs + b0, qf + g0, mean,
                                                                     out + b0 * block_size, (b1 - b0) * block_size,
                                                                     block_size, scaler_block_size);
                                   });
        }
        return s;
    });
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Exported functions
// ------------------------------------------------------------------------------------------------

extern "C" {

KBIT_API uint32_t kbit_4bit_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_4BIT_VERSION_MAJOR, KBIT_4BIT_VERSION_MINOR);
}

#define KBIT_CPU_BLOCKWISE_4BIT(T, dt, fmt, QT)                                                                     \
    KBIT_API kbit_status cquantize_blockwise_##dt##_##fmt(float* /*code*/, T* A, float* absmax, unsigned char* out, \
                                                          int blocksize, const int n) {                             \
        return quantize_entry<T>("cquantize_blockwise_" #dt "_" #fmt, QT, A, absmax, out, blocksize, n);             \
    }                                                                                                               \
    KBIT_API kbit_status cdequantize_blockwise_##dt##_##fmt(float* /*code*/, unsigned char* A, float* absmax,       \
                                                            T* out, int blocksize, const int n, void* /*stream*/) { \
        return dequantize_entry<T>("cdequantize_blockwise_" #dt "_" #fmt, QT, A, absmax, out, blocksize, n);         \
    }

KBIT_CPU_BLOCKWISE_4BIT(float, fp32, fp4, QuantType::FP4)
KBIT_CPU_BLOCKWISE_4BIT(kbit_half, fp16, fp4, QuantType::FP4)
KBIT_CPU_BLOCKWISE_4BIT(kbit_bf16, bf16, fp4, QuantType::FP4)
KBIT_CPU_BLOCKWISE_4BIT(float, fp32, nf4, QuantType::NF4)
KBIT_CPU_BLOCKWISE_4BIT(kbit_half, fp16, nf4, QuantType::NF4)
KBIT_CPU_BLOCKWISE_4BIT(kbit_bf16, bf16, nf4, QuantType::NF4)
#undef KBIT_CPU_BLOCKWISE_4BIT

#define KBIT_CPU_GEMV_GEMM_4BIT(T, dt)                                                                              \
    KBIT_API kbit_status cgemm_4bit_inference_naive_##dt(int m, int /*n*/, int k, T* A, unsigned char* B,           \
                                                         float* absmax, float* datatype, T* out, int /*lda*/,       \
                                                         int ldb, int /*ldc*/, int blocksize, void* /*stream*/) {   \
        return gemv_entry<T>("cgemm_4bit_inference_naive_" #dt, m, k, A, B, absmax, datatype, out, ldb, blocksize);  \
    }                                                                                                               \
    KBIT_API kbit_status cgemm_4bit_##dt(const T* A, const uint8_t* B, const float* absmax,                         \
                                         const uint8_t* absmax_8bit, const float* absmax_code,                      \
                                         const float* absmax_offset, T* out, const T* bias, int M, int N, int K,    \
                                         int blocksize, int quant_type, void* /*stream*/) {                         \
        return gemm_entry<T>("cgemm_4bit_" #dt, A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, bias, M, \
                             N, K, blocksize, quant_type);                                                          \
    }

KBIT_CPU_GEMV_GEMM_4BIT(float, fp32)
KBIT_CPU_GEMV_GEMM_4BIT(kbit_half, fp16)
KBIT_CPU_GEMV_GEMM_4BIT(kbit_bf16, bf16)
#undef KBIT_CPU_GEMV_GEMM_4BIT

KBIT_API kbit_status kbit_quantize_4bit(int32_t quant_type, int32_t dtype, const void* A, float* absmax,
                                        uint8_t* out, int64_t blocksize, int64_t n, void* /*stream*/) {
    static const char* fn = "kbit_quantize_4bit";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_blockwise_4bit_64(fn, kbit::Blockwise::Quantize, quant_type, dtype, A, absmax, out,
                                             blocksize, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const auto qt = static_cast<QuantType>(quant_type);
        if (dtype == KBIT_DTYPE_FP32) quantize(qt, static_cast<const float*>(A), absmax, out, blocksize, n);
        else if (dtype == KBIT_DTYPE_FP16) quantize(qt, static_cast<const kbit_half*>(A), absmax, out, blocksize, n);
        else quantize(qt, static_cast<const kbit_bf16*>(A), absmax, out, blocksize, n);
        return s;
    });
}

KBIT_API kbit_status kbit_dequantize_4bit(int32_t quant_type, int32_t dtype, const uint8_t* A, const float* absmax,
                                          void* out, int64_t blocksize, int64_t n, void* /*stream*/) {
    static const char* fn = "kbit_dequantize_4bit";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_blockwise_4bit_64(fn, kbit::Blockwise::Dequantize, quant_type, dtype, A, absmax, out,
                                             blocksize, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const auto qt = static_cast<QuantType>(quant_type);
        if (dtype == KBIT_DTYPE_FP32) dequantize(qt, A, absmax, static_cast<float*>(out), blocksize, n);
        else if (dtype == KBIT_DTYPE_FP16) dequantize(qt, A, absmax, static_cast<kbit_half*>(out), blocksize, n);
        else dequantize(qt, A, absmax, static_cast<kbit_bf16*>(out), blocksize, n);
        return s;
    });
}

KBIT_API kbit_status kbit_nested_absmax_quantize(const float* absmax, const float* code, uint8_t* qabsmax,
                                                 float* nested_absmax, float* offset, int64_t blocks,
                                                 int64_t nested_blocksize, void* /*stream*/) {
    static const char* fn = "kbit_nested_absmax_quantize";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        kbit_status s = kbit::validate_nested_absmax(fn, "absmax", absmax, code, "nested_absmax", nested_absmax,
                                                     "qabsmax", qabsmax, "offset", offset, blocks, nested_blocksize,
                                                     &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty)
            kbit::ref::nested_absmax_quantize(absmax, code, qabsmax, nested_absmax, offset, blocks, nested_blocksize);
        return s;
    });
}

KBIT_API kbit_status kbit_nested_absmax_dequantize(const uint8_t* qabsmax, const float* code,
                                                   const float* nested_absmax, float offset, float* absmax,
                                                   int64_t blocks, int64_t nested_blocksize, void* /*stream*/) {
    static const char* fn = "kbit_nested_absmax_dequantize";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        kbit_status s = kbit::validate_nested_absmax(fn, "qabsmax", qabsmax, code, "nested_absmax", nested_absmax,
                                                     "absmax", absmax, nullptr, nullptr, blocks, nested_blocksize,
                                                     &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty)
            kbit::ref::nested_absmax_dequantize(qabsmax, code, nested_absmax, offset, absmax, blocks,
                                                nested_blocksize);
        return s;
    });
}

#define KBIT_CPU_TORCHAO(T, dt)                                                                                    \
    KBIT_API kbit_status kbit_quantize_nf4_torchao_##dt(const T* w, uint8_t* quantized_data,                       \
                                                        int8_t* quantized_scalers, T* quantization_factor,         \
                                                        T* scaler_mean, int64_t n, int64_t block_size,             \
                                                        int64_t scaler_block_size, void* /*stream*/) {             \
        return torchao_quantize_entry<T>("kbit_quantize_nf4_torchao_" #dt, w, quantized_data, quantized_scalers,   \
                                         quantization_factor, scaler_mean, n, block_size, scaler_block_size);      \
    }                                                                                                              \
    KBIT_API kbit_status kbit_dequantize_nf4_torchao_##dt(                                                         \
        const uint8_t* quantized_data, const int8_t* quantized_scalers, const T* quantization_factor,              \
        const T* scaler_mean, T* out, int64_t n, int64_t block_size, int64_t scaler_block_size, void* /*stream*/) { \
        return torchao_dequantize_entry<T>("kbit_dequantize_nf4_torchao_" #dt, quantized_data, quantized_scalers,  \
                                           quantization_factor, scaler_mean, out, n, block_size, scaler_block_size); \
    }

KBIT_CPU_TORCHAO(float, fp32)
KBIT_CPU_TORCHAO(kbit_half, fp16)
KBIT_CPU_TORCHAO(kbit_bf16, bf16)
#undef KBIT_CPU_TORCHAO

}  // extern "C"
