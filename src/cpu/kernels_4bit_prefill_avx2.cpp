// cgemm_4bit with many activation rows (prefill) on AVX2 (Highway's AVX2 target; AVX-512 has its own
// outer-product kernel, kernels_4bit_prefill_avx512.cpp): a panel of 64 weight rows is dequantized to
// fp32 (the active ISA's 4-bit dequantizer) over a chunk of K, then multiplied by a register-blocked
// kernel: tiles of 4 activation rows x 3 weight rows (12 accumulators of 16 registers), each lane
// summing its own share of the chunk, reduced at the end of the chunk. A tile's activations (4 x 1024
// floats, 16 KB) stay in L1 across the panel's tiles; the panel (256 KB) in L2. The dot kernels
// (kernels_4bit_dot_avx2.cpp) decode every weight once per slice of activation rows.
//
// Class F: w = fp32(lut[q] * scale), then fp32 FMAs in this kernel's order (the lanes over the chunk,
// a reduction across lanes, chunks added in order), bounded against fp64 by the conformance suite.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_prefill_avx2.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "cpu_isa.h"
#include "kernels_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX2
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

constexpr int64_t kPanelRows = 64;  // weight rows dequantized together
constexpr int64_t kChunk = 1024;    // columns of K per panel (or one block, if longer)
constexpr int kTileM = 4, kTileN = 3;
// From here on the panels beat the dot kernels (measured with this tiling on AVX-512, where it ran
// before the outer-product kernel: one Sapphire Rapids core, 4096 x 4096 fp32, ms per call dot /
// panels: M = 8 3.1 / 3.8, 16 7.4 / 6.3, 32 19.9 / 11.9, 64 53 / 20).
constexpr int kMinRows = 16;

int64_t chunk_of(int64_t blocksize) { return std::max(kChunk, blocksize); }

// out[r * ldo + c] (+)= sum_k a[r * lda + k] * w[c * ldw + k] for r < MR, c < NR, k < kc (a multiple
// of 16, so of the lane count).
template <int MR, int NR>
void tile(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t kc, float* out, int64_t ldo, bool add) {
    const DF df;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    hn::Vec<DF> acc[MR][NR];
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) acc[r][c] = hn::Zero(df);
    for (int64_t k = 0; k < kc; k += N) {
        hn::Vec<DF> wv[NR];
        for (int c = 0; c < NR; ++c) wv[c] = hn::LoadU(df, w + c * ldw + k);
        for (int r = 0; r < MR; ++r) {
            const auto av = hn::LoadU(df, a + r * lda + k);
            for (int c = 0; c < NR; ++c) acc[r][c] = hn::MulAdd(av, wv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) {
            const float s = hn::GetLane(hn::SumOfLanes(df, acc[r][c]));
            float* o = out + r * ldo + c;
            *o = add ? *o + s : s;
        }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool);

template <int MR>
TileFn tile_of_width(int nr) {
    static_assert(kTileN == 3, "tile widths 1..3");
    switch (nr) {
        case 1: return &tile<MR, 1>;
        case 2: return &tile<MR, 2>;
        default: return &tile<MR, 3>;
    }
}

TileFn tile_of(int mr, int nr) {
    static_assert(kTileM == 4, "tile heights 1..4");
    switch (mr) {
        case 1: return tile_of_width<1>(nr);
        case 2: return tile_of_width<2>(nr);
        case 3: return tile_of_width<3>(nr);
        default: return tile_of_width<4>(nr);
    }
}

int64_t panel_floats(int) { return kPanelRows * chunk_of(kMaxBlocksize); }

bool supports(int M, int64_t k, int64_t blocksize) {
    return M >= kMinRows && k > 0 && k % blocksize == 0 && k % 16 == 0;
}

void rows(const float* a, int M, int64_t k, const uint8_t* B, const float* scales, int64_t blocksize, QuantType qt,
          int64_t r0, int64_t r1, float* sums, int64_t ldo, float* panel) {
    const auto& dequantize = quant_4bit_kernels<float>().dequantize_range;
    const int64_t chunk = chunk_of(blocksize);
    for (int64_t n0 = r0; n0 < r1; n0 += kPanelRows) {
        const int64_t nb = std::min(kPanelRows, r1 - n0);
        for (int64_t k0 = 0; k0 < k; k0 += chunk) {
            const int64_t kc = std::min(chunk, k - k0);  // a multiple of blocksize, so of 16
            for (int64_t j = 0; j < nb; ++j) {
                const int64_t e = (n0 + j) * k + k0;  // starts a block: k % blocksize == 0
                dequantize(qt, B + e / 2, scales + e / blocksize, panel + j * kc, blocksize, 0, kc, false);
            }
            for (int64_t m0 = 0; m0 < M; m0 += kTileM) {
                const int mr = static_cast<int>(std::min<int64_t>(kTileM, M - m0));
                for (int64_t j = 0; j < nb; j += kTileN) {
                    const int nr = static_cast<int>(std::min<int64_t>(kTileN, nb - j));
                    tile_of(mr, nr)(a + m0 * k + k0, k, panel + j * kc, kc, kc, sums + m0 * ldo + n0 + j, ldo, k0 > 0);
                }
            }
        }
    }
}

}  // namespace

void OverridePrefill(Prefill4bitKernels& t) { t = {&supports, &panel_floats, &rows}; }  // every slot
#endif  // HWY_TARGET == HWY_AVX2
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
