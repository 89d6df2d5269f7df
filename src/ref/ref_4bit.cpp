#include "ref_4bit.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kbit_code8.h"
#include "kbit_torchao_math.h"

namespace kbit::ref {

// ------------------------------------------------------------------------------------------------
// Blockwise 4-bit
// ------------------------------------------------------------------------------------------------

template <class T>
void quantize_4bit_blocks(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                          int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
        const int64_t begin = b * blocksize;
        const int64_t end = std::min(begin + blocksize, n);
        float amax = absmax_start(end - begin, blocksize);
        for (int64_t i = begin; i < end; ++i) amax = absmax_fold(amax, Elem<T>::load(A[i]));
        absmax[b] = amax;
        const float r = 1.0f / amax;
        for (int64_t i = begin; i < end; i += 2) {  // blocksize is even: pairs never straddle blocks
            const float y0 = Elem<T>::load(A[i]) * r;
            const float y1 = (i + 1 < n ? Elem<T>::load(A[i + 1]) : 0.0f) * r;  // odd n: padding zero
            out[i / 2] = pack_nibbles(index_4bit(qt, y0), index_4bit(qt, y1));
        }
    }
}

template <class T>
void quantize_4bit(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n) {
    quantize_4bit_blocks(qt, A, absmax, out, blocksize, n, 0, (n + blocksize - 1) / blocksize);
}

template <class T>
void dequantize_4bit_range(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                           int64_t i0, int64_t i1) {
    const float* lut = lut_4bit(qt);
    // mul_rn: x86's NaN bits on every host (behaviour §1.1), as for every dequantizer output below.
    for (int64_t i = i0; i < i1; ++i) out[i] = Elem<T>::store(mul_rn(lut[nibble_at(A, i)], absmax[i / blocksize]));
}

template <class T>
void dequantize_4bit(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize, int64_t n) {
    dequantize_4bit_range(qt, A, absmax, out, blocksize, 0, n);
}

// ------------------------------------------------------------------------------------------------
// GEMV / GEMM
// ------------------------------------------------------------------------------------------------

namespace {

// Dot product of activations a[0, k) with the 4-bit weight row whose element kk is nibble
// `base + kk`, in the reference order (per-block fp32 partial sums, scaled once per block).
template <class T, class Scale>
float dot_4bit_row(const T* a, int64_t k, const uint8_t* B, int64_t base, const float* lut, int64_t blocksize,
                   Scale scale_of_block) {
    float total = 0.0f;
    int64_t kk = 0;
    while (kk < k) {
        const int64_t beta = (base + kk) / blocksize;
        const int64_t run_end = std::min(k, (beta + 1) * blocksize - base);
        float partial = 0.0f;
        for (; kk < run_end; ++kk) {
            const float product = Elem<T>::load(a[kk]) * lut[nibble_at(B, base + kk)];
            partial += product;
        }
        const float scaled = partial * scale_of_block(beta);
        total += scaled;
    }
    return total;
}

}  // namespace

template <class T>
void gemv_4bit_rows(int k, const T* A, const uint8_t* B, const float* absmax, const float* datatype, T* out,
                    int ldb, int blocksize, int r0, int r1) {
    const int64_t row_stride = 2 * static_cast<int64_t>(ldb);
    for (int r = r0; r < r1; ++r) {
        const float sum = dot_4bit_row(A, k, B, row_stride * r, datatype, blocksize,
                                       [absmax](int64_t beta) { return absmax[beta]; });
        out[r] = Elem<T>::store(sum);
    }
}

void dot_4bit_rows(const float* a, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                   int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    for (int m = 0; m < M; ++m)
        for (int64_t r = r0; r < r1; ++r)
            sums[m * ldo + r] = dot_4bit_row(a + m * k, k, B, r * row_elems, lut, blocksize,
                                             [scales](int64_t beta) { return scales[beta]; });
}

template <class T>
void gemv_4bit(int m, int k, const T* A, const uint8_t* B, const float* absmax, const float* datatype, T* out,
               int ldb, int blocksize) {
    gemv_4bit_rows(k, A, B, absmax, datatype, out, ldb, blocksize, 0, m);
}

template <class T>
void gemm_4bit(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
               const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
               int blocksize, int quant_type) {
    const float* lut = quant_type == 1 ? kFp4Values : kNf4Values;
    auto scale = [=](int64_t beta) { return gemm_block_scale(beta, absmax, absmax_8bit, absmax_code, absmax_offset); };
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            float sum = dot_4bit_row(A + static_cast<int64_t>(i) * K, K, B, static_cast<int64_t>(j) * K, lut,
                                     blocksize, scale);
            if (bias != nullptr) sum += Elem<T>::load(bias[j]);
            out[static_cast<int64_t>(i) * N + j] = Elem<T>::store(sum);
        }
    }
}

template <class T>
void gemm_4bit_expert_rows(const T* x, int64_t M, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                           const float* absmax_code, const float* absmax_offset, int64_t first, int64_t N, int64_t K,
                           int64_t blocksize, int quant_type, T* y, int64_t n0, int64_t n1) {
    const float* lut = quant_type == 1 ? kFp4Values : kNf4Values;
    auto scale = [=](int64_t beta) { return gemm_block_scale(beta, absmax, absmax_8bit, absmax_code, absmax_offset); };
    for (int64_t i = 0; i < M; ++i)
        for (int64_t n = n0; n < n1; ++n)
            y[i * N + n] = Elem<T>::store(dot_4bit_row(x + i * K, K, B, first + n * K, lut, blocksize, scale));
}

template <class T>
void gemm_4bit_grouped(const T* A, int64_t a_rows_per_token, const uint8_t* B, const float* absmax,
                       const uint8_t* absmax_8bit, const float* absmax_code, const float* absmax_offset,
                       int64_t experts, int64_t N, int64_t K, int64_t blocksize, int quant_type, const int32_t* ids,
                       int64_t tokens, int64_t top_k, const float* combine, T* out) {
    (void)experts;
    std::vector<T> y(static_cast<size_t>(top_k * N));
    for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t j = 0; j < top_k; ++j) {
            const int64_t row = a_rows_per_token == 1 ? t : t * top_k + j;
            gemm_4bit_expert_rows(A + row * K, 1, B, absmax, absmax_8bit, absmax_code, absmax_offset,
                                  ids[t * top_k + j] * N * K, N, K, blocksize, quant_type, y.data() + j * N, 0, N);
        }
        if (combine == nullptr) {
            std::copy(y.begin(), y.end(), out + t * top_k * N);
            continue;
        }
        for (int64_t n = 0; n < N; ++n) {
            float s = 0.0f;
            for (int64_t j = 0; j < top_k; ++j)
                s = grouped_combine_step(s, combine[t * top_k + j], Elem<T>::load(y[j * N + n]));
            out[t * N + n] = Elem<T>::store(s);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Nested absmax
// ------------------------------------------------------------------------------------------------

float nested_absmax_offset(const float* absmax, int64_t blocks) {
    double sum = 0.0;
    for (int64_t b = 0; b < blocks; ++b) sum += absmax[b];
    return static_cast<float>(sum / static_cast<double>(blocks));
}

void nested_absmax_quantize(const float* absmax, const float* code, uint8_t* qabsmax, float* nested_absmax,
                            float* offset, int64_t blocks, int64_t nested_blocksize) {
    const float mean = nested_absmax_offset(absmax, blocks);
    for (int64_t nb = 0; nb * nested_blocksize < blocks; ++nb) {
        const int64_t begin = nb * nested_blocksize;
        const int64_t end = std::min(begin + nested_blocksize, blocks);
        float amax = absmax_start(end - begin, nested_blocksize);
        for (int64_t b = begin; b < end; ++b) amax = absmax_fold(amax, absmax[b] - mean);
        nested_absmax[nb] = amax;
        const float r = 1.0f / amax;
        for (int64_t b = begin; b < end; ++b) qabsmax[b] = code8_index(code, (absmax[b] - mean) * r);
    }
    *offset = mean;
}

void nested_absmax_dequantize(const uint8_t* qabsmax, const float* code, const float* nested_absmax, float offset,
                              float* absmax, int64_t blocks, int64_t nested_blocksize) {
    for (int64_t b = 0; b < blocks; ++b) {
        const float scaled = mul_rn(code[qabsmax[b]], nested_absmax[b / nested_blocksize]);
        absmax[b] = add_rn(scaled, offset);
    }
}

// ------------------------------------------------------------------------------------------------
// torchao NF4Tensor
// ------------------------------------------------------------------------------------------------

namespace {

template <class T>
std::array<T, 16> make_torchao_table() {
    std::array<T, 16> t;
    for (int i = 0; i < 16; ++i) t[i] = Elem<T>::store(torchao_nf4_value<T>(i));
    return t;
}

}  // namespace

template <class T>
const T* torchao_nf4_table() {
    static const std::array<T, 16> table = make_torchao_table<T>();
    return table.data();
}

template <class T>
void torchao_block_absmax(const T* w, T* scalers, int64_t b0, int64_t b1, int64_t block_size) {
    for (int64_t b = b0; b < b1; ++b) scalers[b] = torchao_block_scaler(w + b * block_size, block_size);
}

template <class T>
void torchao_quantize_elements(const T* w, const T* scalers, uint8_t* quantized_data, int64_t b0, int64_t b1,
                               int64_t block_size) {
    float table[16];
    for (int j = 0; j < 16; ++j) table[j] = torchao_nf4_value<T>(j);
    for (int64_t b = b0; b < b1; ++b) {
        const float s = Elem<T>::load(scalers[b]);
        for (int64_t i = b * block_size; i < (b + 1) * block_size; i += 2) {
            const uint8_t hi = torchao_element_index<T>(Elem<T>::load(w[i]), s, table);
            const uint8_t lo = torchao_element_index<T>(Elem<T>::load(w[i + 1]), s, table);
            quantized_data[i / 2] = pack_nibbles(hi, lo);
        }
    }
}

template <class T>
void torchao_quantize(const T* w, uint8_t* quantized_data, int8_t* quantized_scalers, T* quantization_factor,
                      T* scaler_mean, int64_t n, int64_t block_size, int64_t scaler_block_size) {
    const int64_t blocks = n / block_size;
    std::vector<T> scalers(static_cast<size_t>(blocks));
    torchao_block_absmax(w, scalers.data(), 0, blocks, block_size);
    torchao_scalers(scalers.data(), quantized_scalers, quantization_factor, scaler_mean, blocks, scaler_block_size);
    torchao_quantize_elements(w, scalers.data(), quantized_data, 0, blocks, block_size);
}

template <class T>
void torchao_dequantize(const uint8_t* quantized_data, const int8_t* quantized_scalers,
                        const T* quantization_factor, const T* scaler_mean, T* out, int64_t n, int64_t block_size,
                        int64_t scaler_block_size) {
    float table[16];
    for (int j = 0; j < 16; ++j) table[j] = torchao_nf4_value<T>(j);
    const float mean = Elem<T>::load(*scaler_mean);
    for (int64_t b = 0; b < n / block_size; ++b) {
        const float factor = Elem<T>::load(quantization_factor[b / scaler_block_size]);
        const float scaler = torchao_restored_scaler<T>(quantized_scalers[b], factor, mean);
        for (int64_t i = b * block_size; i < (b + 1) * block_size; ++i)
            out[i] = torchao_dequantize_element<T>(table[nibble_at(quantized_data, i)], scaler);
    }
}

// ------------------------------------------------------------------------------------------------
// Instantiations
// ------------------------------------------------------------------------------------------------

#define KBIT_REF_4BIT_INSTANTIATE(T)                                                                               \
    template void quantize_4bit_blocks<T>(QuantType, const T*, float*, uint8_t*, int64_t, int64_t, int64_t,        \
                                          int64_t);                                                                \
    template void quantize_4bit<T>(QuantType, const T*, float*, uint8_t*, int64_t, int64_t);                       \
    template void dequantize_4bit_range<T>(QuantType, const uint8_t*, const float*, T*, int64_t, int64_t,          \
                                           int64_t);                                                               \
    template void dequantize_4bit<T>(QuantType, const uint8_t*, const float*, T*, int64_t, int64_t);               \
    template void gemv_4bit_rows<T>(int, const T*, const uint8_t*, const float*, const float*, T*, int, int, int,  \
                                    int);                                                                          \
    template void gemv_4bit<T>(int, int, const T*, const uint8_t*, const float*, const float*, T*, int, int);      \
    template void gemm_4bit<T>(const T*, const uint8_t*, const float*, const uint8_t*, const float*, const float*, \
                               T*, const T*, int, int, int, int, int);                                             \
    template void gemm_4bit_expert_rows<T>(const T*, int64_t, const uint8_t*, const float*, const uint8_t*,           \
                                           const float*, const float*, int64_t, int64_t, int64_t, int64_t, int, T*,  \
                                           int64_t, int64_t);                                                        \
    template void gemm_4bit_grouped<T>(const T*, int64_t, const uint8_t*, const float*, const uint8_t*, const float*, \
                                       const float*, int64_t, int64_t, int64_t, int64_t, int, const int32_t*, int64_t, \
                                       int64_t, const float*, T*);                                                   \
    template const T* torchao_nf4_table<T>();                                                                      \
    template void torchao_quantize<T>(const T*, uint8_t*, int8_t*, T*, T*, int64_t, int64_t, int64_t);             \
    template void torchao_block_absmax<T>(const T*, T*, int64_t, int64_t, int64_t);                                \
    template void torchao_quantize_elements<T>(const T*, const T*, uint8_t*, int64_t, int64_t, int64_t);           \
    template void torchao_dequantize<T>(const uint8_t*, const int8_t*, const T*, const T*, T*, int64_t, int64_t,   \
                                        int64_t);

KBIT_REF_4BIT_INSTANTIATE(float)
KBIT_REF_4BIT_INSTANTIATE(kbit_half)
KBIT_REF_4BIT_INSTANTIATE(kbit_bf16)

}  // namespace kbit::ref
