// The int8 class's dot kernel for AVX-512 VNNI (kernels_4bit_int8.h), from Isa::Avx512 up on CPUs with
// AVX512_VNNI (Ice Lake, Zen 4 and later). A tile is 16 weight rows, one per 32-bit lane: per chunk of 32
// columns the 16 x 16 packed bytes are transposed (4 x 4 words per 128-bit quarter) so that lane i holds
// row i's nibbles, and vpshufb turns the nibbles into the unsigned bytes L + 128. vpdpbusd multiplies
// them by a broadcast 32-bit word of 4 signed prepared activations and adds the 4 products to the lane:
// sum (L + 128) * q = sum L * q + 128 * sum q, so the chunk's 128 * qsum (one value per activation row and
// chunk) is subtracted once. The exact integer sums of 16 rows then sit in one vector, and the fp32
// terms are formed and added lane by lane in the reference's order (no FMA): the reference's bytes.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593; see the VBMI kernels).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "cpu_isa.h"
#include "kernels_4bit_int8.h"

#if !KBIT_CPU_ARM64
#define KBIT_VNNI __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512vnni")))

namespace kbit::cpu {
namespace {

constexpr int kRows = 16;

KBIT_VNNI void dot_rows(const int8_t* prepared, const Int8Chunk* chunks, int M, int64_t K, const uint8_t* B,
                        const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                        int64_t ldo) {
    alignas(16) uint8_t biased[16];
    for (int i = 0; i < 16; ++i) biased[i] = static_cast<uint8_t>(int8_levels(qt)[i] + 128);
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(biased)));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const int64_t nc = K / kInt8Chunk, row_bytes = K / 2;
    const int shift = int8_block_shift(blocksize);
    for (int64_t r = r0; r < r1; r += kRows) {
        const int64_t last = (r1 - r < kRows ? r1 : r + kRows) - 1;
        const uint8_t* rows[kRows];
        for (int i = 0; i < kRows; ++i) rows[i] = B + (r + i < last ? r + i : last) * row_bytes;
        __m512 total[kInt8MaxRows];
        for (int m = 0; m < M; ++m) total[m] = _mm512_setzero_ps();
        alignas(64) float s[kRows];
        __m512 scale = _mm512_setzero_ps();
        for (int64_t c = 0; c < nc; ++c) {
            if (int8_scales_change(K, blocksize, c)) {
                int8_tile_scales<kRows>(scales, r, last, K, shift, c, s);
                scale = _mm512_load_ps(s);
            }
            // Vector j holds rows j, j + 4, j + 8, j + 12 in its quarters; the transposes leave lane i = row i.
            const int64_t off = c * kInt8Chunk / 2;
            __m512i y[4];
            for (int j = 0; j < 4; ++j) {
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + off)));
                v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 4] + off)), 1);
                v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 8] + off)), 2);
                y[j] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 12] + off)), 3);
            }
            const __m512i t0 = _mm512_unpacklo_epi32(y[0], y[1]), t1 = _mm512_unpackhi_epi32(y[0], y[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(y[2], y[3]), t3 = _mm512_unpackhi_epi32(y[2], y[3]);
            const __m512i words[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                      _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            __m512i w[8];  // [2g + h]: word g's high (h = 0) or low (h = 1) nibbles as L + 128
            for (int g = 0; g < 4; ++g) {
                w[2 * g] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(words[g], 4), low4));
                w[2 * g + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(words[g], low4));
            }
            for (int m = 0; m < M; ++m) {
                const int8_t* a = prepared + m * K + c * kInt8Chunk;
                const Int8Chunk& ch = chunks[m * nc + c];
                __m512i acc[2] = {_mm512_set1_epi32(-128 * ch.qsum), _mm512_setzero_si512()};
                for (int j = 0; j < 8; ++j) {
                    int32_t word;
                    std::memcpy(&word, a + 4 * j, 4);
                    acc[j & 1] = _mm512_dpbusd_epi32(acc[j & 1], w[j], _mm512_set1_epi32(word));
                }
                const __m512 isum = _mm512_cvtepi32_ps(_mm512_add_epi32(acc[0], acc[1]));
                const __m512 se = _mm512_mul_ps(scale, _mm512_set1_ps(ch.e));
                total[m] = _mm512_add_ps(total[m], _mm512_mul_ps(se, isum));
            }
        }
        const __mmask16 keep = static_cast<__mmask16>((1u << (last - r + 1)) - 1u);
        for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(sums + m * ldo + r, keep, total[m]);
    }
}

}  // namespace

void override_int8_dot_avx512vnni(Int8Dot4bitKernels& table) {
    if (!isa_at_least(Isa::Avx512) || !__builtin_cpu_supports("avx512vnni")) return;
    table = {&prepare_int8_nibble_order, kRows, &dot_rows, "avx512 vnni"};
}

}  // namespace kbit::cpu
#endif  // !KBIT_CPU_ARM64
