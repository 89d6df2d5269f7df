// Scalar reference of the bf16 precision class (ref_4bit_bf16.h, docs/behaviour.md §3.7).
#include "ref_4bit_bf16.h"

#include <vector>

#include "ref_4bit.h"

namespace kbit::ref {

namespace {
int64_t padded(int64_t K) { return (K + kBf16Group - 1) / kBf16Group * kBf16Group; }
}  // namespace

template <class T>
void bf16_activation_rows(const T* A, int64_t M, int64_t K, uint16_t* a) {
    const int64_t kp = padded(K);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < kp; ++k) a[m * kp + k] = k < K ? bf16_class_activation(Elem<T>::load(A[m * K + k])) : 0;
}

float bf16_dot_4bit(const uint16_t* a, int64_t K, const uint8_t* B, int64_t base, const float* scales,
                    int64_t blocksize, const float* lut) {
    // The 16 weights of the current block, formed once per block. Elements come in pairs (k + 1, k) of
    // ascending even k, and blocks start at even nibbles, so a pair never crosses a block.
    uint16_t table[16];
    int64_t limit = 0;  // the first nibble past the current block
    auto weight = [&](int64_t k) -> uint16_t {
        if (k >= K) return 0;
        if (base + k >= limit) {
            const int64_t beta = (base + k) / blocksize;
            for (int q = 0; q < 16; ++q) table[q] = bf16_class_weight(lut[q], scales[beta]);
            limit = (beta + 1) * blocksize;
        }
        return table[nibble_at(B, base + k)];
    };
    float lanes[kBf16Lanes] = {};
    for (int64_t g = 0; g < padded(K); g += kBf16Group)
        for (int j = 0; j < kBf16Lanes; ++j) {
            const int64_t k = g + 2 * j;
            lanes[j] = bf16_lane_step(lanes[j], a[k + 1], weight(k + 1));
            lanes[j] = bf16_lane_step(lanes[j], a[k], weight(k));
        }
    return bf16_lane_tree(lanes);
}

void bf16_dot_4bit_rows(const uint16_t* a, int64_t M, int64_t K, const uint8_t* B, const float* scales,
                        int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    const float* lut = qt == QuantType::FP4 ? kFp4Values : kNf4Values;
    for (int64_t m = 0; m < M; ++m)
        for (int64_t r = r0; r < r1; ++r)
            sums[m * ldo + r] = bf16_dot_4bit(a + m * padded(K), K, B, r * K, scales, blocksize, lut);
}

template <class T>
void gemm_4bit_bf16(const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                    const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M, int64_t N,
                    int64_t K, int64_t blocksize, int quant_type) {
    const float* lut = quant_type == 1 ? kFp4Values : kNf4Values;
    const int64_t blocks = (N * K + blocksize - 1) / blocksize;
    std::vector<float> scales(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b)
        scales[b] = gemm_block_scale(b, absmax, absmax_8bit, absmax_code, absmax_offset);
    std::vector<uint16_t> a(static_cast<size_t>(M * padded(K)));
    bf16_activation_rows(A, M, K, a.data());
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            float total = bf16_dot_4bit(a.data() + i * padded(K), K, B, j * K, scales.data(), blocksize, lut);
            if (bias != nullptr) total = total + Elem<T>::load(bias[j]);
            out[i * N + j] = Elem<T>::store(total);
        }
}

#define KBIT_REF_4BIT_BF16_INSTANTIATE(T)                                                                          \
    template void bf16_activation_rows<T>(const T*, int64_t, int64_t, uint16_t*);                                   \
    template void gemm_4bit_bf16<T>(const T*, const uint8_t*, const float*, const uint8_t*, const float*,          \
                                    const float*, T*, const T*, int64_t, int64_t, int64_t, int64_t, int);

KBIT_REF_4BIT_BF16_INSTANTIATE(float)
KBIT_REF_4BIT_BF16_INSTANTIATE(kbit_half)
KBIT_REF_4BIT_BF16_INSTANTIATE(kbit_bf16)

}  // namespace kbit::ref
