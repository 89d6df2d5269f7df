// The 4-bit GEMV on bitsandbytes' repacked CPU weight layout (kbit_bnb_cpu.h, kernels_bnb_cpu.h) for
// AVX2 (Highway's AVX2 target; AVX-512 has its own kernel, kernels_bnb_gemv_avx512.cpp). A run is read
// as 8 32-bit lanes (lane i: 16-bit lanes 2i and 2i + 1), so eight shifts give the nibbles of rows
// {2i}, {16 + 2i}, {2i + 1}, {17 + 2i} for both columns without widening loads. An 8-lane `vpermps`
// reads three index bits: each value is two look-ups (table entries 0-7 and 8-15) and a `vblendvps` on
// index bit 3, moved to the sign bit by a shift. Per block one accumulator per row set sums both
// columns (even column first), scaled once by the block's absmax, whose bf16 pairs split by a shift
// and a mask into the same row sets. Two activation rows share each decoded run (16 registers).
//
// Class F, the accuracy of kbit's own GEMV kernels (kernels_4bit_dot_avx2.cpp), in this kernel's
// order (not the AVX-512 kernel's).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_bnb_gemv_avx2.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstring>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_half.h"
#include "kernels_bnb_cpu.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX2
namespace {

using bnb_gemv::kWeightPrefetchBytes;
using bnb_gemv::prefetch_scales;

// table[q] for the nibble at bit `s` of each lane of v: entries 0-7 or 8-15 by the nibble's bit 3.
template <int S>
HWY_INLINE __m256 lookup(__m256i v, __m256 table_lo, __m256 table_hi) {
    const __m256i idx = S == 0 ? v : _mm256_srli_epi32(v, S);
    const __m256i high = S == 28 ? v : _mm256_slli_epi32(v, 28 - S);  // bit S + 3 -> the sign bit
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(table_lo, idx), _mm256_permutevar8x32_ps(table_hi, idx),
                            _mm256_castsi256_ps(high));
}

// A bf16 pair per 32-bit lane as two fp32 vectors (exact): the low halves, the high halves.
HWY_INLINE __m256 low_halves(__m256i pairs) { return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)); }
HWY_INLINE __m256 high_halves(__m256i pairs) {
    return _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Activation rows mi .. mi + MT - 1 of group g. Row sets: r = 0 rows 2i, 1 rows 16 + 2i, 2 rows
// 2i + 1, 3 rows 17 + 2i (i = 0..7, one per lane).
template <int MT>
HWY_INLINE void gemv_tile(__m256 table_lo, __m256 table_hi, const uint8_t* wg, const kbit_bf16* x, int64_t x_stride,
                          int64_t K, const kbit_bf16* absmax, int64_t N, int64_t blocksize, int64_t g, kbit_bf16* out,
                          int64_t out_stride) {
    __m256 total[MT][4];
    for (int t = 0; t < MT; ++t)
        for (int r = 0; r < 4; ++r) total[t][r] = _mm256_setzero_ps();
    const int64_t blocks = K / blocksize;
    for (int64_t k0 = 0; k0 < K; k0 += blocksize) {
        prefetch_scales(absmax, N, blocks, k0 / blocksize, g);
        __m256 sum[MT][4];
        for (int t = 0; t < MT; ++t)
            for (int r = 0; r < 4; ++r) sum[t][r] = _mm256_setzero_ps();
        for (int64_t kk = k0 / 2; kk < (k0 + blocksize) / 2; ++kk) {
            hwy::Prefetch(wg + kk * 32 + kWeightPrefetchBytes);
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + kk * 32));
            __m256 xe[MT], xo[MT];
            for (int t = 0; t < MT; ++t) {
                uint32_t pair;  // columns 2 kk (low half) and 2 kk + 1
                std::memcpy(&pair, x + t * x_stride + 2 * kk, 4);
                const __m256i both = _mm256_set1_epi32(static_cast<int>(pair));
                xe[t] = low_halves(both);
                xo[t] = high_halves(both);
            }
            // Bits 0-15 hold rows 2i / 16 + 2i (even column, then odd), bits 16-31 rows 2i + 1 / 17 + 2i.
            const __m256 w0e = lookup<0>(v, table_lo, table_hi), w1e = lookup<4>(v, table_lo, table_hi);
            const __m256 w0o = lookup<8>(v, table_lo, table_hi), w1o = lookup<12>(v, table_lo, table_hi);
            for (int t = 0; t < MT; ++t) {
                sum[t][0] = _mm256_fmadd_ps(w0o, xo[t], _mm256_fmadd_ps(w0e, xe[t], sum[t][0]));
                sum[t][1] = _mm256_fmadd_ps(w1o, xo[t], _mm256_fmadd_ps(w1e, xe[t], sum[t][1]));
            }
            const __m256 w2e = lookup<16>(v, table_lo, table_hi), w3e = lookup<20>(v, table_lo, table_hi);
            const __m256 w2o = lookup<24>(v, table_lo, table_hi), w3o = lookup<28>(v, table_lo, table_hi);
            for (int t = 0; t < MT; ++t) {
                sum[t][2] = _mm256_fmadd_ps(w2o, xo[t], _mm256_fmadd_ps(w2e, xe[t], sum[t][2]));
                sum[t][3] = _mm256_fmadd_ps(w3o, xo[t], _mm256_fmadd_ps(w3e, xe[t], sum[t][3]));
            }
        }
        // Scales of rows 0-15 then 16-31 as bf16 pairs: (2i, 2i + 1) and (16 + 2i, 17 + 2i).
        const kbit_bf16* scale = absmax + (k0 / blocksize) * N + 32 * g;
        const __m256i s_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scale));
        const __m256i s_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scale + 16));
        const __m256 sc[4] = {low_halves(s_lo), low_halves(s_hi), high_halves(s_lo), high_halves(s_hi)};
        for (int t = 0; t < MT; ++t)
            for (int r = 0; r < 4; ++r) total[t][r] = _mm256_fmadd_ps(sum[t][r], sc[r], total[t][r]);
    }
    for (int t = 0; t < MT; ++t) {
        alignas(32) float sums[4][8];
        for (int r = 0; r < 4; ++r) _mm256_store_ps(sums[r], total[t][r]);
        kbit_bf16* o = out + t * out_stride + 32 * g;
        for (int i = 0; i < 8; ++i) {
            o[2 * i] = kbit_bf16{float_to_bf16(sums[0][i])};
            o[16 + 2 * i] = kbit_bf16{float_to_bf16(sums[1][i])};
            o[2 * i + 1] = kbit_bf16{float_to_bf16(sums[2][i])};
            o[17 + 2 * i] = kbit_bf16{float_to_bf16(sums[3][i])};
        }
    }
}

// As for AVX-512: an activation row's arithmetic does not depend on the tile it is in.
void gemv_groups(QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x, const uint8_t* w,
                 const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize, int64_t x_stride, int64_t out_stride,
                 int64_t g0, int64_t g1) {
    const float* values = qt == QuantType::FP4 ? kFp4Values : kNf4Values;
    const __m256 table_lo = _mm256_loadu_ps(values), table_hi = _mm256_loadu_ps(values + 8);
    for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* wg = w + g * (K / 2) * 32;
        int64_t mi = 0;
        for (; mi + 2 <= M; mi += 2)
            gemv_tile<2>(table_lo, table_hi, wg, x + mi * x_stride, x_stride, K, absmax, N, blocksize, g,
                         out + mi * out_stride, out_stride);
        for (; mi < M; ++mi)
            gemv_tile<1>(table_lo, table_hi, wg, x + mi * x_stride, x_stride, K, absmax, N, blocksize, g,
                         out + mi * out_stride, out_stride);
    }
}

}  // namespace

void OverrideBnbGemv(BnbCpuKernels& t) { t.gemv_groups = &gemv_groups; }
#endif  // HWY_TARGET == HWY_AVX2
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
