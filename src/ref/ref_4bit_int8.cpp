// Scalar reference of the int8 precision class (ref_4bit_int8.h, docs/behaviour.md §3.6).
#include "ref_4bit_int8.h"

#include <vector>

#include "ref_4bit.h"

namespace kbit::ref {

template <class T>
void quantize_int8_rows(const T* A, int64_t M, int64_t K, int8_t* q, Int8Chunk* chunks) {
    float x[kInt8Chunk];
    for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < K / kInt8Chunk; ++c) {
            const int64_t k0 = m * K + c * kInt8Chunk;
            for (int64_t i = 0; i < kInt8Chunk; ++i) x[i] = Elem<T>::load(A[k0 + i]);
            chunks[m * (K / kInt8Chunk) + c] = quantize_int8_chunk(x, q + k0);
        }
}

int32_t int8_chunk_dot(const int8_t* q, const uint8_t* B, int64_t base, int64_t c, const int8_t* levels) {
    int32_t isum = 0;
    for (int64_t i = c * kInt8Chunk; i < (c + 1) * kInt8Chunk; ++i)
        isum += static_cast<int32_t>(q[i]) * levels[nibble_at(B, base + i)];
    return isum;
}

void int8_dot_4bit_rows(const int8_t* q, const Int8Chunk* chunks, int64_t M, int64_t K, const uint8_t* B,
                        const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                        int64_t ldo) {
    const int8_t* levels = int8_levels(qt);
    const int64_t nc = K / kInt8Chunk;
    for (int64_t m = 0; m < M; ++m)
        for (int64_t r = r0; r < r1; ++r) {
            float total = 0.0f;
            for (int64_t c = 0; c < nc; ++c) {
                const int32_t isum = int8_chunk_dot(q + m * K, B, r * K, c, levels);
                const float term =
                    int8_chunk_term(scales[(r * K + c * kInt8Chunk) / blocksize], chunks[m * nc + c].e, isum);
                total = total + term;
            }
            sums[m * ldo + r] = total;
        }
}

template <class T>
void gemm_4bit_int8(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                    const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M, int64_t N,
                    int64_t K, int64_t blocksize, int quant_type) {
    const QuantType qt = quant_type == 1 ? QuantType::FP4 : QuantType::NF4;
    const int8_t* levels = int8_levels(qt);
    const int64_t nc = K / kInt8Chunk;
    std::vector<int8_t> q(static_cast<size_t>(M * K));
    std::vector<Int8Chunk> chunks(static_cast<size_t>(M * nc));
    quantize_int8_rows(A, M, K, q.data(), chunks.data());
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            float total = 0.0f;
            for (int64_t c = 0; c < nc; ++c) {
                const int64_t beta = (j * K + c * kInt8Chunk) / blocksize;
                const float s = gemm_block_scale(beta, absmax, absmax_8bit, absmax_code, absmax_offset);
                const int32_t isum = int8_chunk_dot(q.data() + i * K, B, j * K, c, levels);
                total = total + int8_chunk_term(s, chunks[i * nc + c].e, isum);
            }
            if (bias != nullptr) total = total + Elem<T>::load(bias[j]);
            out[i * N + j] = Elem<T>::store(total);
        }
}

#define KBIT_REF_4BIT_INT8_INSTANTIATE(T)                                                                          \
    template void quantize_int8_rows<T>(const T*, int64_t, int64_t, int8_t*, Int8Chunk*);                           \
    template void gemm_4bit_int8<T>(const T*, const uint8_t*, const float*, const uint8_t*, const float*,          \
                                    const float*, T*, const T*, int64_t, int64_t, int64_t, int64_t, int);

KBIT_REF_4BIT_INT8_INSTANTIATE(float)
KBIT_REF_4BIT_INT8_INSTANTIATE(kbit_half)
KBIT_REF_4BIT_INT8_INSTANTIATE(kbit_bf16)

}  // namespace kbit::ref
