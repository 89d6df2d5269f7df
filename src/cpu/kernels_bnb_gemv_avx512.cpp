// The 4-bit GEMV on bitsandbytes' repacked CPU weight layout (kbit_bnb_cpu.h), one kernel per
// Highway target (intrinsics inside each target's section; the layout fixes the lane arithmetic).
// One group of 32 output rows is K / 2 runs of 32 bytes; a run read as 16 16-bit lanes gives lane j,
// for rows j and 16 + j, the nibbles of columns 2 kk (bits 0-3 and 4-7) and 2 kk + 1 (bits 8-11 and
// 12-15).
//
// AVX-512: four shifts and four `vpermps` lookups in the exact fp32 table decode 64 weights (vpermps
// reads only the low four bits of each index lane, so no masks), each lane one output row. Per block:
// four fp32 accumulators (rows 0-15 / 16-31, even / odd column) of activation * table value, then the
// two halves' sums scaled once by the block's bf16 absmax (16 contiguous values per half) into the
// running totals; the totals are rounded once to bf16. Up to four activation rows share each decoded
// run.
//
// AVX2: a run is read as 8 32-bit lanes (lane i: 16-bit lanes 2i and 2i + 1), so eight shifts give the
// nibbles of rows {2i}, {16 + 2i}, {2i + 1}, {17 + 2i} for both columns without widening loads. An
// 8-lane `vpermps` reads three index bits: each value is two look-ups (table entries 0-7 and 8-15)
// and a `vblendvps` on index bit 3, moved to the sign bit by a shift. Per block one accumulator per
// row set sums both columns (even column first), scaled once by the block's absmax, whose bf16 pairs
// split by a shift and a mask into the same row sets. Two activation rows share each decoded run (16
// registers).
//
// Class F, the accuracy of kbit's own GEMV kernels (kernels_4bit_dot_avx512.cpp); the two targets sum
// in different orders.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_bnb_gemv_avx512.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstring>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_half.h"
#include "kernels_bnb_cpu.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu {
namespace HWY_NAMESPACE {
namespace {
// Software prefetches, measured with the weights cold (4096x4096, one Sapphire Rapids core): the
// weights are one sequential stream, yet with the hardware prefetchers alone (which do not cross
// 4 KB pages) it ran at 6.6 GB/s against 14.0 warm; 4 KB ahead: 10.0-10.4 GB/s (1 KB
// 9.4, 2 KB 10.0-10.3, 8 KB alike). The 32 scales of a group's block are one 64-byte line N * 2
// bytes past the previous block's, in another page: prefetched 4 blocks ahead (3-5% more).
constexpr int64_t kWeightPrefetchBytes = 4096;
constexpr int64_t kScalePrefetchBlocks = 4;

// Prefetches the 32 scales of group g's block kScalePrefetchBlocks after `block`, in the next group
// once this one ends.
HWY_INLINE void prefetch_scales(const kbit_bf16* absmax, int64_t N, int64_t blocks, int64_t block, int64_t g) {
    int64_t ahead_block = block + kScalePrefetchBlocks, ahead_group = g;
    if (ahead_block >= blocks) {
        ahead_block -= blocks;
        ++ahead_group;
    }
    if (ahead_block < blocks) hwy::Prefetch(absmax + ahead_block * N + 32 * ahead_group);
}
}  // namespace

#if HWY_TARGET == HWY_AVX3
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::Full512<float>;
using DU = hn::RebindToUnsigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;  // 16 lanes of 16 bits
using VF = hn::Vec<DF>;

// 16 bf16 values as fp32 (exact: a bf16 is the high half of an fp32).
HWY_INLINE VF load_bf16(const kbit_bf16* p) {
    const DF df;
    const DU du;
    const D16 d16;
    const auto bits = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p)));
    return hn::BitCast(df, hn::ShiftLeft<16>(bits));
}


// Activation rows mi .. mi + MT - 1 of group g: MT rows share every decoded weight vector.
template <int MT>
HWY_INLINE void gemv_tile(const VF table, const uint8_t* wg, const kbit_bf16* x, int64_t x_stride, int64_t K,
                          const kbit_bf16* absmax, int64_t N, int64_t blocksize, int64_t g, kbit_bf16* out,
                          int64_t out_stride) {
    const DF df;
    VF total_lo[MT], total_hi[MT];
    for (int t = 0; t < MT; ++t) total_lo[t] = total_hi[t] = hn::Zero(df);
    const int64_t blocks = K / blocksize;
    for (int64_t k0 = 0; k0 < K; k0 += blocksize) {
        prefetch_scales(absmax, N, blocks, k0 / blocksize, g);
        VF lo_e[MT], lo_o[MT], hi_e[MT], hi_o[MT];
        for (int t = 0; t < MT; ++t) lo_e[t] = lo_o[t] = hi_e[t] = hi_o[t] = hn::Zero(df);
        for (int64_t kk = k0 / 2; kk < (k0 + blocksize) / 2; ++kk) {
            hwy::Prefetch(wg + kk * 32 + kWeightPrefetchBytes);  // into the next group at its end
            const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + kk * 32)));
            const VF w_lo_e{_mm512_permutexvar_ps(v, table.raw)};
            const VF w_hi_e{_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table.raw)};
            const VF w_lo_o{_mm512_permutexvar_ps(_mm512_srli_epi32(v, 8), table.raw)};
            const VF w_hi_o{_mm512_permutexvar_ps(_mm512_srli_epi32(v, 12), table.raw)};
            for (int t = 0; t < MT; ++t) {
                // Columns 2 kk and 2 kk + 1 as one 32-bit word broadcast from memory (a load, no
                // shuffle): the even column is its low half shifted up, the odd one its high half.
                uint32_t pair;
                std::memcpy(&pair, x + t * x_stride + 2 * kk, 4);
                const __m512i both = _mm512_set1_epi32(static_cast<int>(pair));
                const VF xe{_mm512_castsi512_ps(_mm512_slli_epi32(both, 16))};
                const VF xo{_mm512_castsi512_ps(_mm512_and_si512(both, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
                lo_e[t] = hn::MulAdd(w_lo_e, xe, lo_e[t]);
                hi_e[t] = hn::MulAdd(w_hi_e, xe, hi_e[t]);
                lo_o[t] = hn::MulAdd(w_lo_o, xo, lo_o[t]);
                hi_o[t] = hn::MulAdd(w_hi_o, xo, hi_o[t]);
            }
        }
        const kbit_bf16* scale = absmax + (k0 / blocksize) * N + 32 * g;
        const VF scale_lo = load_bf16(scale), scale_hi = load_bf16(scale + 16);
        for (int t = 0; t < MT; ++t) {
            total_lo[t] = hn::MulAdd(hn::Add(lo_e[t], lo_o[t]), scale_lo, total_lo[t]);
            total_hi[t] = hn::MulAdd(hn::Add(hi_e[t], hi_o[t]), scale_hi, total_hi[t]);
        }
    }
    for (int t = 0; t < MT; ++t) {
        alignas(64) float sums[32];
        hn::Store(total_lo[t], df, sums);
        hn::Store(total_hi[t], df, sums + 16);
        kbit_bf16* o = out + t * out_stride + 32 * g;
        for (int j = 0; j < 32; ++j) o[j] = kbit_bf16{float_to_bf16(sums[j])};
    }
}

// Every activation row's arithmetic is the same whatever the tile (MT) it is in: the tiles only
// share the decoding of the weights.
void gemv_groups(QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x, const uint8_t* w,
                 const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize, int64_t x_stride, int64_t out_stride,
                 int64_t g0, int64_t g1) {
    const DF df;
    const VF table = hn::LoadU(df, qt == QuantType::FP4 ? kFp4Values : kNf4Values);
    for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* wg = w + g * (K / 2) * 32;
        int64_t mi = 0;
        for (; mi + 4 <= M; mi += 4)
            gemv_tile<4>(table, wg, x + mi * x_stride, x_stride, K, absmax, N, blocksize, g, out + mi * out_stride,
                         out_stride);
        for (; mi < M; ++mi)
            gemv_tile<1>(table, wg, x + mi * x_stride, x_stride, K, absmax, N, blocksize, g, out + mi * out_stride,
                         out_stride);
    }
}

}  // namespace

void OverrideBnbGemv(BnbCpuKernels& t) { t.gemv_groups = &gemv_groups; }
#endif  // HWY_TARGET == HWY_AVX3

#if HWY_TARGET == HWY_AVX2
namespace {

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
}  // namespace HWY_NAMESPACE
}  // namespace kbit::cpu
HWY_AFTER_NAMESPACE();
