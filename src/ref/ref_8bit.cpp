#include "ref_8bit.h"

#include <cmath>
#include <vector>

#include "kbit_code8.h"
#include "kbit_half.h"
#include "kbit_nan_x86.h"  // x86's NaN bits in dequantized outputs on every host (behaviour §1.1)

namespace kbit::ref {

template <class T>
void quantize_blockwise_8bit_blocks(const float* code, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                                    int64_t n, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
        const int64_t start = b * blocksize;
        const int64_t end = start + blocksize < n ? start + blocksize : n;
        float amax = absmax_start(end - start, blocksize);
        for (int64_t i = start; i < end; ++i) amax = absmax_fold(amax, Elem<T>::load(A[i]));
        absmax[b] = amax;
        const float r = 1.0f / amax;  // zero block: +inf, then 0 * inf = NaN -> code 0
        for (int64_t i = start; i < end; ++i) out[i] = code8_index(code, Elem<T>::load(A[i]) * r);
    }
}

template <class T>
void quantize_blockwise_8bit(const float* code, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                             int64_t n) {
    quantize_blockwise_8bit_blocks(code, A, absmax, out, blocksize, n, 0, (n + blocksize - 1) / blocksize);
}

template <class T>
void dequantize_blockwise_8bit_range(const float* code, const uint8_t* A, const float* absmax, T* out,
                                     int64_t blocksize, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = Elem<T>::store(mul_rn(code[A[i]], absmax[i / blocksize]));
}

template <class T>
void dequantize_blockwise_8bit(const float* code, const uint8_t* A, const float* absmax, T* out,
                               int64_t blocksize, int64_t n) {
    dequantize_blockwise_8bit_range(code, A, absmax, out, blocksize, 0, n);
}

#define KBIT_REF_8BIT_INSTANTIATE(T)                                                                        \
    template void quantize_blockwise_8bit<T>(const float*, const T*, float*, uint8_t*, int64_t, int64_t);   \
    template void dequantize_blockwise_8bit<T>(const float*, const uint8_t*, const float*, T*, int64_t,     \
                                               int64_t);                                                  \
    template void quantize_blockwise_8bit_blocks<T>(const float*, const T*, float*, uint8_t*, int64_t,      \
                                                    int64_t, int64_t, int64_t);                            \
    template void dequantize_blockwise_8bit_range<T>(const float*, const uint8_t*, const float*, T*,        \
                                                     int64_t, int64_t, int64_t);
KBIT_REF_8BIT_INSTANTIATE(float)
KBIT_REF_8BIT_INSTANTIATE(kbit_half)
KBIT_REF_8BIT_INSTANTIATE(kbit_bf16)
#undef KBIT_REF_8BIT_INSTANTIATE

void int8_vector_quant(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t rows,
                       int64_t cols) {
    const float threshold_fp16 = int8_threshold_fp16(threshold);
    for (int64_t r = 0; r < rows; ++r) {
        const kbit_half* row = A + r * cols;
        float amax = 0.0f;  // the max of fp16 magnitudes is itself an fp16 value
        for (int64_t c = 0; c < cols; ++c)
            amax = int8_row_stat_fold(amax, std::fabs(half_to_float(row[c].bits)), threshold, threshold_fp16);
        rowStats[r] = amax;
        const float scale = int8_row_scale(amax);
        for (int64_t c = 0; c < cols; ++c)
            out[r * cols + c] = int8_quantize_element(half_to_float(row[c].bits), scale, threshold);
    }
}

void int8_outlier_flags(const kbit_half* A, uint8_t* flags, float threshold, int64_t cols, int64_t r0, int64_t r1) {
    const float threshold_fp16 = int8_threshold_fp16(threshold);
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < cols; ++c)
            if (int8_is_outlier(std::fabs(half_to_float(A[r * cols + c].bits)), threshold_fp16)) flags[c] = 1;
}

void int8_outlier_columns(const kbit_half* A, int8_t* out, uint8_t* outlier_cols, float threshold,
                          int64_t rows, int64_t cols) {
    std::vector<uint8_t> flags(static_cast<size_t>(cols), 0);
    if (int8_has_outliers(threshold)) int8_outlier_flags(A, flags.data(), threshold, cols, 0, rows);
    for (int64_t c = 0; c < cols; ++c) {
        if (outlier_cols != nullptr) outlier_cols[c] = flags[c];
        if (flags[c] != 0 && rows > 1)
            for (int64_t r = 0; r < rows; ++r) out[r * cols + c] = 0;
    }
}

void igemm_s32(int64_t m, int64_t n, int64_t k, const int8_t* A, const int8_t* B, int32_t* C, int64_t lda,
               int64_t ldb, int64_t ldc) {
    for (int64_t t = 0; t < n; ++t)
        for (int64_t o = 0; o < k; ++o) {
            int64_t acc = 0;
            for (int64_t i = 0; i < m; ++i) acc += int64_t{A[o * lda + i]} * int64_t{B[t * ldb + i]};
            C[t * ldc + o] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));
        }
}

void igemm_s8(int64_t m, int64_t n, int64_t k, const int8_t* A, const int8_t* B, int8_t* C, const float* row_scale,
              int64_t lda, int64_t ldb, int64_t ldc) {
    for (int64_t t = 0; t < n; ++t)
        for (int64_t o = 0; o < k; ++o) {
            int32_t acc = 0;
            igemm_s32(m, 1, 1, A + o * lda, B + t * ldb, &acc, lda, ldb, 1);
            C[t * ldc + o] = row_scale != nullptr ? int8_scale_saturate_rn(acc, row_scale[o]) : int8_saturate(acc);
        }
}

void dequant_mm_int32_fp16(const int32_t* A, const float* rowStats, const float* colStats, kbit_half* out,
                           const kbit_half* bias, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float scaled = mul_rn(mul_rn(static_cast<float>(A[r * cols + c]), rowStats[r]), colStats[c]);
            const float b = bias != nullptr ? half_to_float(bias[c].bits) : 0.0f;
            out[r * cols + c].bits = float_to_half(fma_rn(scaled, kMmDequantScale, b));
        }
}

void int8_outlier_weights(const int8_t* W, const float* W_stats, const int64_t* cols, int64_t count,
                          int64_t out_features, int64_t in_features, float* w) {
    for (int64_t o = 0; o < out_features; ++o)
        for (int64_t j = 0; j < count; ++j) {
            const float v = static_cast<float>(W[o * in_features + cols[j]]) * W_stats[o] * kInv127;
            w[j * out_features + o] = half_to_float(float_to_half(v));
        }
}

void int8_outlier_matmul_rows(const kbit_half* A, int64_t in_features, const int64_t* cols, int64_t count,
                              const float* w, kbit_half* out, int64_t out_features, int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t)
        for (int64_t o = 0; o < out_features; ++o) {
            float acc = -0.0f;
            for (int64_t j = 0; j < count; ++j)
                acc = add_rn(acc, mul_rn(half_to_float(A[t * in_features + cols[j]].bits), w[j * out_features + o]));
            kbit_half& y = out[t * out_features + o];
            y.bits = float_to_half(add_rn(half_to_float(y.bits), acc));
        }
}

void int8_outlier_matmul_fp16(const kbit_half* A, const int8_t* W, const float* W_stats,
                              const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                              int64_t in_features) {
    std::vector<int64_t> cols;
    for (int64_t c = 0; c < in_features; ++c)
        if (outlier_cols[c] != 0) cols.push_back(c);
    const int64_t count = static_cast<int64_t>(cols.size());
    std::vector<float> w(static_cast<size_t>(count * out_features));
    int8_outlier_weights(W, W_stats, cols.data(), count, out_features, in_features, w.data());
    int8_outlier_matmul_rows(A, in_features, cols.data(), count, w.data(), out, out_features, 0, rows);
}

}  // namespace kbit::ref
