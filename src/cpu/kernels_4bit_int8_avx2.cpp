// The int8 class's dot kernel for AVX2 (kernels_4bit_int8.h), from Isa::Avx2 up (AVX-512 CPUs without
// VNNI run it too). A tile is 8 weight rows, one per 32-bit lane: per chunk of 32 columns the tile's 8 x 16
// packed bytes are transposed (4 x 4 words per 128-bit half) so that lane i holds row i's nibbles, split
// into high and low nibbles and turned into int8 levels by vpshufb (magnitudes and signed values, both
// 16-entry tables). A broadcast 32-bit word of 4 prepared activations then meets 4 weights of every row:
// vpsignb moves the weight's sign onto the activation, vpmaddubsw multiplies |L| by it (pairs at most
// 2 * 127 * 127, no saturation), vpmaddwd adds the pairs into 32-bit lanes. The chunk's exact integer
// sums of the 8 rows thus sit in one vector, and the fp32 terms are formed and added lane by lane in the
// reference's order (no FMA), so the result is the reference's bytes. The weights are decoded once per
// tile and chunk for all M activation rows.
#include <immintrin.h>

#include <cstdint>

#include "cpu_isa.h"
#include "kernels_4bit_int8.h"

#if !KBIT_CPU_ARM64
#define KBIT_AVX2 __attribute__((target("avx2,fma")))

namespace kbit::cpu {
namespace {

constexpr int kRows = 8;

struct Levels {
    __m256i magnitude, value;
};

KBIT_AVX2 Levels load_levels(QuantType qt) {
    const int8_t* l = int8_levels(qt);
    alignas(16) int8_t mag[16], val[16];
    for (int i = 0; i < 16; ++i) {
        val[i] = l[i];
        mag[i] = static_cast<int8_t>(l[i] < 0 ? -l[i] : l[i]);
    }
    return {_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(mag))),
            _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(val)))};
}

KBIT_AVX2 void dot_rows(const int8_t* prepared, const Int8Chunk* chunks, int M, int64_t K, const uint8_t* B,
                        const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                        int64_t ldo) {
    const Levels lv = load_levels(qt);
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
    const int64_t nc = K / kInt8Chunk, row_bytes = K / 2;
    const int shift = int8_block_shift(blocksize);
    for (int64_t r = r0; r < r1; r += kRows) {
        const int64_t last = (r1 - r < kRows ? r1 : r + kRows) - 1;
        const uint8_t* rows[kRows];
        for (int i = 0; i < kRows; ++i) rows[i] = B + (r + i < last ? r + i : last) * row_bytes;
        __m256 total[kInt8MaxRows];
        for (int m = 0; m < M; ++m) total[m] = _mm256_setzero_ps();
        alignas(32) float s[kRows];
        __m256 scale = _mm256_setzero_ps();
        for (int64_t c = 0; c < nc; ++c) {
            if (int8_scales_change(K, blocksize, c)) {
                int8_tile_scales<kRows>(scales, r, last, K, shift, c, s);
                scale = _mm256_load_ps(s);
            }
            // Rows i and i + 4 share a vector; the 4 x 4 transposes leave lane i = row i.
            const int64_t off = c * kInt8Chunk / 2;
            __m256i y[4];
            for (int i = 0; i < 4; ++i)
                y[i] = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(rows[i + 4] + off),
                                           reinterpret_cast<const __m128i*>(rows[i] + off));
            const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
            const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
            const __m256i words[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                                      _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
            __m256i mag[8], val[8];  // [2g + h]: word g's high (h = 0) or low (h = 1) nibbles
            for (int g = 0; g < 4; ++g) {
                const __m256i idx[2] = {_mm256_and_si256(_mm256_srli_epi16(words[g], 4), low4),
                                        _mm256_and_si256(words[g], low4)};
                for (int h = 0; h < 2; ++h) {
                    mag[2 * g + h] = _mm256_shuffle_epi8(lv.magnitude, idx[h]);
                    val[2 * g + h] = _mm256_shuffle_epi8(lv.value, idx[h]);
                }
            }
            for (int m = 0; m < M; ++m) {
                const int8_t* a = prepared + m * K + c * kInt8Chunk;
                __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
                for (int w = 0; w < 8; ++w) {
                    int32_t word;
                    std::memcpy(&word, a + 4 * w, 4);
                    const __m256i signed_a = _mm256_sign_epi8(_mm256_set1_epi32(word), val[w]);
                    const __m256i pairs = _mm256_maddubs_epi16(mag[w], signed_a);
                    acc[w & 1] = _mm256_add_epi32(acc[w & 1], _mm256_madd_epi16(pairs, ones16));
                }
                const __m256 isum = _mm256_cvtepi32_ps(_mm256_add_epi32(acc[0], acc[1]));
                const __m256 se = _mm256_mul_ps(scale, _mm256_set1_ps(chunks[m * nc + c].e));
                total[m] = _mm256_add_ps(total[m], _mm256_mul_ps(se, isum));
            }
        }
        const int64_t n = last - r + 1;
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int m = 0; m < M; ++m) _mm256_maskstore_ps(sums + m * ldo + r, keep, total[m]);
    }
}

}  // namespace

void override_int8_dot_avx2(Int8Dot4bitKernels& table) {
    if (!isa_at_least(Isa::Avx2)) return;
    table = {&prepare_int8_nibble_order, kRows, &dot_rows, "avx2", {}};
}

}  // namespace kbit::cpu
#endif  // !KBIT_CPU_ARM64
