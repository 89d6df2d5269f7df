// The bf16 class's dot kernel for AVX2 + FMA (kernels_4bit_bf16.h), from Isa::Avx2 up where the CPU has no
// AVX512_BF16 (the AVX-512 BF16 kernels replace it there): vdpbf16ps emulated with fp32 FMAs, byte for byte.
// The 16 lanes are two vectors of 8; lane j of a group takes byte j of its 16 packed bytes: the high nibble
// (element 2j) and the low one (element 2j + 1) index the block's 16 class weights as fp32 (bf16 values, DAZ
// applied when the table is made, 8 lanes at a time) with two vpermps and a blend. The prepared activations hold pairs
// (a[2j], a[2j + 1]) in 32-bit word j, so a shift and a mask give them as fp32. Each step is one FMA (the
// product of two bf16 is exact) and a flush of a subnormal result to the zero of its sign: the class's lane
// step (kbit_precision_bf16.h), so the bytes are the reference's. One weight row at a time.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_precision_bf16.h"
#include "kernels_4bit_bf16.h"

#if !KBIT_CPU_ARM64
#define KBIT_AVX2 __attribute__((target("avx2,fma")))

namespace kbit::cpu {
namespace {

constexpr int kRows = 4;  // activation rows per pass

// acc + a * w, then a subnormal result flushed to the zero of its sign.
KBIT_AVX2 inline __m256 lane_step(__m256 acc, __m256 a, __m256 w) {
    const __m256 r = _mm256_fmadd_ps(a, w, acc);
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 tiny = _mm256_cmp_ps(_mm256_and_ps(r, magnitude), _mm256_set1_ps(0x1.0p-126f), _CMP_LT_OQ);
    return _mm256_andnot_ps(_mm256_and_ps(tiny, magnitude), r);
}

// The 16 class weights of a block as fp32, entries 0..7 and 8..15.
struct Table {
    __m256 lo, hi;
};
// bf16_class_weight of 8 levels and a scale, as fp32: the product, RN_bf16 in integer operations (NaN quietened
// as float_to_bf16 does), DAZ.
KBIT_AVX2 inline __m256 class_weights(__m256 levels, __m256 s) {
    const __m256 p = _mm256_mul_ps(levels, s);
    const __m256i u = _mm256_castps_si256(p), hi = _mm256_srli_epi32(u, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7FFF));
    __m256i h = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
    h = _mm256_blendv_epi8(h, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    const __m256i subnormal =
        _mm256_cmpeq_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7F80)), _mm256_setzero_si256());
    h = _mm256_blendv_epi8(h, _mm256_and_si256(h, _mm256_set1_epi32(0x8000)), subnormal);
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}
KBIT_AVX2 inline Table make_table(const float* lut, float s) {
    const __m256 sv = _mm256_set1_ps(s);
    return {class_weights(_mm256_loadu_ps(lut), sv), class_weights(_mm256_loadu_ps(lut + 8), sv)};
}
KBIT_AVX2 inline __m256 look_up(const Table& t, __m256i idx) {
    const __m256 lo = _mm256_permutevar8x32_ps(t.lo, idx), hi = _mm256_permutevar8x32_ps(t.hi, idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

// The group's 8 lanes h (0: lanes 0..7, 1: lanes 8..15) of one activation row: even and odd elements as fp32.
KBIT_AVX2 inline void activations(const uint16_t* a, __m256* even, __m256* odd) {
    const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// bf16_lane_tree over lanes 0..7 (v0) and 8..15 (v1).
KBIT_AVX2 inline float lane_tree(__m256 v0, __m256 v1) {
    const __m256 t8 = _mm256_add_ps(v0, v1);
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));
}

KBIT_AVX2 void dot_row(const uint16_t* a, int M, int64_t kp, int64_t K, const uint8_t* B, const float* scales,
                       int64_t blocksize, const float* lut, int64_t r, float* sums, int64_t ldo) {
    __m256 acc[kRows][2];
    for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    Table table{};
    int64_t current = -1;
    const int64_t base = r * K;
    for (int64_t g = 0; g < K; g += kBf16Group) {
        const int64_t n = K - g < kBf16Group ? K - g : kBf16Group;
        alignas(16) uint8_t tail[16] = {};
        const uint8_t* bytes = B + (base + g) / 2;
        if (n < kBf16Group) bytes = static_cast<const uint8_t*>(std::memcpy(tail, bytes, static_cast<size_t>(n / 2)));
        const int64_t b0 = (base + g) / blocksize, b1 = (base + g + n - 1) / blocksize;
        __m256 we[2], wo[2];
        if (b0 == b1) {
            if (b0 != current) {
                table = make_table(lut, scales[b0]);
                current = b0;
            }
            for (int h = 0; h < 2; ++h) {
                const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + 8 * h));
                const __m256i x = _mm256_cvtepu8_epi32(eight);
                we[h] = look_up(table, _mm256_srli_epi32(x, 4));
                wo[h] = look_up(table, _mm256_and_si256(x, _mm256_set1_epi32(15)));
            }
        } else {  // a group across two blocks (K % 32 != 0): element by element
            alignas(32) uint32_t e[16], o[16];
            auto weight = [&](int64_t k) -> uint32_t {
                if (k >= n) return 0;
                const int64_t at = base + g + k;
                return static_cast<uint32_t>(bf16_class_weight(lut[nibble_at(B, at)], scales[at / blocksize])) << 16;
            };
            for (int j = 0; j < 16; ++j) {
                e[j] = weight(2 * j);
                o[j] = weight(2 * j + 1);
            }
            for (int h = 0; h < 2; ++h) {
                we[h] = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(e + 8 * h)));
                wo[h] = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(o + 8 * h)));
            }
        }
        if (n < kBf16Group) {  // weights past K are +0 (their nibbles were read as 0 above)
            alignas(32) int32_t keep_e[16], keep_o[16];
            for (int j = 0; j < 16; ++j) {
                keep_e[j] = 2 * j < n ? -1 : 0;
                keep_o[j] = 2 * j + 1 < n ? -1 : 0;
            }
            for (int h = 0; h < 2; ++h) {
                we[h] = _mm256_and_ps(we[h], _mm256_load_ps(reinterpret_cast<const float*>(keep_e + 8 * h)));
                wo[h] = _mm256_and_ps(wo[h], _mm256_load_ps(reinterpret_cast<const float*>(keep_o + 8 * h)));
            }
        }
        for (int m = 0; m < M; ++m)
            for (int h = 0; h < 2; ++h) {
                __m256 ae, ao;
                activations(a + m * kp + g + 16 * h, &ae, &ao);
                acc[m][h] = lane_step(acc[m][h], ao, wo[h]);
                acc[m][h] = lane_step(acc[m][h], ae, we[h]);
            }
    }
    for (int m = 0; m < M; ++m) sums[m * ldo + r] = lane_tree(acc[m][0], acc[m][1]);
}

KBIT_AVX2 void dot_rows(const uint16_t* a, int M, int64_t K, const uint8_t* B, const float* scales, int64_t blocksize,
                        QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    const int64_t kp = (K + kBf16Group - 1) / kBf16Group * kBf16Group;
    const float* lut = qt == QuantType::FP4 ? kFp4Values : kNf4Values;
    for (int m0 = 0; m0 < M; m0 += kRows)
        for (int64_t r = r0; r < r1; ++r)
            dot_row(a + m0 * kp, M - m0 < kRows ? M - m0 : kRows, kp, K, B, scales, blocksize, lut, r, sums + m0 * ldo,
                    ldo);
}

}  // namespace

void override_bf16_dot_avx2(Bf16Dot4bitKernels& table) {
    if (!isa_at_least(Isa::Avx2)) return;
    table = {1, &dot_rows, "avx2 fma"};
}

}  // namespace kbit::cpu
#endif  // !KBIT_CPU_ARM64
