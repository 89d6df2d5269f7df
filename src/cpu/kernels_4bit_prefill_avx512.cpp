// cgemm_4bit with many activation rows (prefill) on AVX-512, as an outer product: the weights are
// decoded into strips of 16 rows laid out column by column ([column][row], one row per lane), and a
// tile of 12 activation rows x 2 strips keeps 24 accumulators, each lane one output. Per column a
// tile loads 2 weight vectors, broadcasts 12 activations (load-port work) and issues 24 FMAs, with no
// reduction across lanes: the sums go straight to the output rows, which are contiguous in n. The
// dot-product form this replaces on AVX-512 (kernels_4bit_prefill_avx2.cpp, kept for AVX2) reduced
// every accumulator across its lanes at the end of each chunk of K and spent a third of the time at
// M = 16 in the generic dequantizer filling its panel.
//
// A strip is decoded straight into its transposed layout: one vpgatherdd fetches the same 8 columns
// (one dword) of the 16 rows, and the 8 nibbles of each lane go under vpermps one at a time, as in
// the dot kernels (kernels_4bit_dot_avx512.cpp); a second gather fetches the 16 rows' block scales
// once per block. K is cut into chunks of 256 columns: per chunk the activations are packed once
// (M x 256 floats, 512 KB at M = 512), then per panel of 128 weight rows its 8 strips are decoded
// (128 KB, in L2), then each pair of strips (32 KB, in L1) meets every tile of activation rows, each
// tile one contiguous stream. On one core at M = 512 (4096 x 4096) the tile loop runs at ~88% of the core's
// FMA rate (perf, cpu-clock); a call took 126-132 ms against 165-174 for the dot-form panels, best
// of interleaved runs. A software prefetch of the next strip's bytes measured no gain (not kept).
//
// Class F: w = fp32(lut[q] * scale), as the dequantizer rounds it, then fp32 FMAs in this kernel's
// order (each output's products over a chunk in column order, chunks added in order), bounded
// against fp64 by the conformance suite.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_prefill_avx512.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kernels_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3
namespace {

constexpr int64_t kStrip = 16;       // weight rows per strip, one per lane
constexpr int64_t kPanelStrips = 8;  // strips decoded together
constexpr int64_t kChunk = 256;      // columns of K per panel: a strip is 16 KB, the panel 128 KB
constexpr int kTileM = 12;           // activation rows per tile (x 2 strips: 24 accumulators of 32 registers)
constexpr int kTileStrips = 2;
// From M = 12 on the panels beat the dot kernels, which decode each weight again for every 4
// activation rows (one Sapphire Rapids-class core, 4096 x 4096, weights in cache, best of interleaved
// runs, ms dot / panels: M = 12 6.2 / 4.8, 16 6.2 / 6.2); below 12 the dot kernels measured as fast
// or faster.
constexpr int kMinRows = 12;

// Strip of `rows` (1..16) weight rows from row n, columns [k0, k0 + kc) of rows of k columns:
// strip[c * 16 + lane] = fp32(lut[W(n + lane, k0 + c)] * scale); lanes past `rows` hold zeros.
void pack_strip(const uint8_t* B, const float* scales, int64_t k, int64_t blocksize, __m512 table, int64_t n,
                int64_t rows, int64_t k0, int64_t kc, float* strip) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __mmask16 valid = static_cast<__mmask16>(rows >= kStrip ? 0xFFFF : (1u << rows) - 1);
    const int64_t row_blocks = k / blocksize;
    // Per lane: its row's first byte and first block, from row n's (k < 2^28, so they fit 32 bits).
    const __m512i row_byte = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(k / 2)));
    const __m512i row_block = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(row_blocks)));
    const uint8_t* first_byte = B + n * k / 2;
    const float* first_scale = scales + n * row_blocks;
    for (int64_t c = 0; c < kc;) {
        // The columns of one block: one scale per lane; a division per block, not per dword (a
        // division per 8 columns cost more than their decoding).
        const int64_t block = (k0 + c) / blocksize;
        const int64_t block_end = std::min(kc, (block + 1) * blocksize - k0);
        const __m512i lane_block = _mm512_add_epi32(row_block, _mm512_set1_epi32(static_cast<int32_t>(block)));
        const __m512 scale = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, lane_block, first_scale, 4);
        for (; c < block_end; c += 8) {  // c is a multiple of 8: 8 columns are one dword of each row
            const __m512i dwords =
                _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, row_byte, first_byte + (k0 + c) / 2, 1);
            // Column c + i is byte i / 2 of the dword, its high nibble for even i; vpermps reads the
            // low 4 bits of each lane.
            float* out = strip + c * kStrip;
            auto put = [&](int i, __m512i indices) {
                _mm512_storeu_ps(out + i * kStrip, _mm512_mul_ps(_mm512_permutexvar_ps(indices, table), scale));
            };
            put(0, _mm512_srli_epi32(dwords, 4));
            put(1, dwords);
            put(2, _mm512_srli_epi32(dwords, 12));
            put(3, _mm512_srli_epi32(dwords, 8));
            put(4, _mm512_srli_epi32(dwords, 20));
            put(5, _mm512_srli_epi32(dwords, 16));
            put(6, _mm512_srli_epi32(dwords, 28));
            put(7, _mm512_srli_epi32(dwords, 24));
        }
    }
}

// out[m * ldo + 16 s + lane] (+)= sum_c packed[c * kTileM + m] * strips[(s * kc + c) * 16 + lane] for
// m < MR, s < NS (packed: one tile of activations, pack_activations); the last strip writes only the
// lanes of last_mask.
template <int MR, int NS>
void tile(const float* packed, const float* strips, int64_t kc, float* out, int64_t ldo, __mmask16 last_mask,
          bool add) {
    __m512 acc[MR][NS];
    for (int m = 0; m < MR; ++m)
        for (int s = 0; s < NS; ++s) acc[m][s] = _mm512_setzero_ps();
    for (int64_t c = 0; c < kc; ++c) {
        __m512 w[NS];
        for (int s = 0; s < NS; ++s) w[s] = _mm512_loadu_ps(strips + (s * kc + c) * kStrip);
        for (int m = 0; m < MR; ++m) {
            const __m512 am = _mm512_set1_ps(packed[c * kTileM + m]);
            for (int s = 0; s < NS; ++s) acc[m][s] = _mm512_fmadd_ps(am, w[s], acc[m][s]);
        }
    }
    for (int m = 0; m < MR; ++m)
        for (int s = 0; s < NS; ++s) {
            float* o = out + m * ldo + s * kStrip;
            const __mmask16 lanes = s == NS - 1 ? last_mask : static_cast<__mmask16>(0xFFFF);
            const __m512 v = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, o), acc[m][s]) : acc[m][s];
            _mm512_mask_storeu_ps(o, lanes, v);
        }
}

using TileFn = void (*)(const float*, const float*, int64_t, float*, int64_t, __mmask16, bool);

// kTiles[mr - 1][ns - 1]: the tile of mr (1..kTileM) activation rows and ns (1..kTileStrips) strips.
template <int MR, int... NS>
constexpr std::array<TileFn, kTileStrips> tiles_of_height(std::integer_sequence<int, NS...>) {
    return {&tile<MR, NS + 1>...};
}
template <int... MR>
constexpr std::array<std::array<TileFn, kTileStrips>, kTileM> make_tiles(std::integer_sequence<int, MR...>) {
    return {tiles_of_height<MR + 1>(std::make_integer_sequence<int, kTileStrips>())...};
}
constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kTileM>());

// Activation rows are cut into tiles_of(M) tiles of as equal heights as can be (M = 16: 8 + 8, not
// 12 + 4, whose 8 accumulators would leave the FMA units waiting on their latency).
int64_t tiles_of(int M) { return (M + kTileM - 1) / kTileM; }
int64_t tile_start(int M, int64_t t) {
    const int64_t tiles = tiles_of(M);
    return t * (M / tiles) + std::min<int64_t>(t, M % tiles);
}

// The panel's strips, then one chunk of every activation row packed by tiles.
int64_t panel_floats(int M) { return kStrip * kPanelStrips * kChunk + tiles_of(M) * kTileM * kChunk; }

bool supports(int M, int64_t k, int64_t blocksize) {
    return M >= kMinRows && k > 0 && k % blocksize == 0 && k % kStrip == 0 && k < (int64_t{1} << 28);
}

// Columns [k0, k0 + kc) of the M activation rows (row-major, k columns) by tiles:
// packed[(t * kc + c) * kTileM + i] = a[(tile_start(t) + i) * k + k0 + c], zero past the tile. A tile
// then reads one contiguous stream (12 rows would be 12 streams, and 12 pointers in 16 GPRs).
void pack_activations(const float* a, int M, int64_t k, int64_t k0, int64_t kc, float* packed) {
    for (int64_t t = 0; t < tiles_of(M); ++t)
        for (int i = 0; i < kTileM; ++i) {
            const int64_t m = tile_start(M, t) + i;
            float* to = packed + t * kc * kTileM + i;
            if (m < tile_start(M, t + 1)) {
                const float* from = a + m * k + k0;
                for (int64_t c = 0; c < kc; ++c) to[c * kTileM] = from[c];
            } else {
                for (int64_t c = 0; c < kc; ++c) to[c * kTileM] = 0.0f;
            }
        }
}

// Chunk by chunk of K: the chunk of every activation row is packed once (M x 256 floats, in L2);
// then panel by panel of weight rows, its strips decoded once; then each pair of strips (32 KB, in
// L1) meets every tile of activation rows.
void rows(const float* a, int M, int64_t k, const uint8_t* B, const float* scales, int64_t blocksize, QuantType qt,
          int64_t r0, int64_t r1, float* sums, int64_t ldo, float* panel) {
    const __m512 table = _mm512_loadu_ps(qt == QuantType::FP4 ? kFp4Values : kNf4Values);
    float* packed = panel + kStrip * kPanelStrips * kChunk;
    for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
        const int64_t kc = std::min(kChunk, k - k0);  // a multiple of 16, as k is
        pack_activations(a, M, k, k0, kc, packed);
        for (int64_t n0 = r0; n0 < r1; n0 += kStrip * kPanelStrips) {
            const int64_t panel_rows = std::min(kStrip * kPanelStrips, r1 - n0);
            const int64_t strips = (panel_rows + kStrip - 1) / kStrip;
            for (int64_t s = 0; s < strips; ++s)
                pack_strip(B, scales, k, blocksize, table, n0 + s * kStrip, std::min(kStrip, panel_rows - s * kStrip),
                           k0, kc, panel + s * kc * kStrip);
            for (int64_t s = 0; s < strips; s += kTileStrips) {
                const int ns = static_cast<int>(std::min<int64_t>(kTileStrips, strips - s));
                const int64_t last_rows = std::min(kStrip, panel_rows - (s + ns - 1) * kStrip);
                const auto last_mask = static_cast<__mmask16>(last_rows >= kStrip ? 0xFFFF : (1u << last_rows) - 1);
                for (int64_t t = 0; t < tiles_of(M); ++t) {
                    const int64_t m0 = tile_start(M, t);
                    const int mr = static_cast<int>(tile_start(M, t + 1) - m0);
                    kTiles[mr - 1][ns - 1](packed + t * kc * kTileM, panel + s * kc * kStrip, kc,
                                           sums + m0 * ldo + n0 + s * kStrip, ldo, last_mask, k0 > 0);
                }
            }
        }
    }
}

}  // namespace

void OverridePrefill(Prefill4bitKernels& t) { t = {&supports, &panel_floats, &rows}; }  // every slot
#endif  // HWY_TARGET == HWY_AVX3
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
