// The 4-bit GEMV on bitsandbytes' repacked CPU weight layout (kbit_bnb_cpu.h, kernels_bnb_cpu.h) for
// AVX-512 (Highway's AVX3 target; AVX2 has its own kernel, kernels_bnb_gemv_avx2.cpp). Four shifts and
// four `vpermps` lookups in the exact fp32 table decode 64 weights (vpermps reads only the low four
// bits of each index lane, so no masks), each lane one output row. Per block: four fp32 accumulators
// (rows 0-15 / 16-31, even / odd column) of activation * table value, then the two halves' sums scaled
// once by the block's bf16 absmax (16 contiguous values per half) into the running totals; the totals
// are rounded once to bf16. Up to four activation rows share each decoded run.
//
// Class F, the accuracy of kbit's own GEMV kernels (kernels_4bit_dot_avx512.cpp), in this kernel's
// order.
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
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3
namespace {

using bnb_gemv::kWeightPrefetchBytes;
using bnb_gemv::prefetch_scales;

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
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
