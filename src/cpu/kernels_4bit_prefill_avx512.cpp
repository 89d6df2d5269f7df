// cgemm_4bit with many activation rows (prefill) for AVX-512: a panel of 64 weight rows is
// dequantized to fp32 (the active ISA's 4-bit dequantizer) over a chunk of K, then multiplied by a
// register-blocked kernel, 6 activation rows x 4 weight rows per tile: 24 accumulators, 10 loads per
// 24 FMAs, each lane summing its own 1/16 of the chunk, reduced at the end of the chunk. A tile's
// activations (6 x 1024 floats, 24 KB) stay in L1 across the panel's 16 tiles; the panel (256 KB)
// in L2. The dot kernels (kernels_4bit_dot_avx512.cpp) decode every weight once per slice of
// activation rows and ran at 27 GFLOP/s on one Sapphire Rapids core at M = 512, a seventh of
// dequantize + OpenBLAS SGEMM.
//
// Class F: w = fp32(lut[q] * scale), then fp32 FMAs in this kernel's order (16 lanes over the
// chunk, a reduction tree, chunks added in order), bounded against fp64 by the conformance suite.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a self-initialised variable that
// -Wmaybe-uninitialized reports at every inlined call (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu_isa.h"
#include "kernels_4bit.h"

#define KBIT_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))

namespace kbit::cpu {
namespace {

constexpr int64_t kPanelRows = 64;   // weight rows dequantized together
constexpr int64_t kChunk = 1024;     // columns of K per panel (or one block, if longer)
constexpr int kTileM = 6, kTileN = 4;
// From here on the panels beat the dot kernels (one Sapphire Rapids core, 4096 x 4096 fp32, ms per
// call dot / panels: M = 8 3.1 / 3.8, 16 7.4 / 6.3, 32 19.9 / 11.9, 64 53 / 20).
constexpr int kPrefillMinRows = 16;

int64_t chunk_of(int64_t blocksize) { return std::max(kChunk, blocksize); }

// out[r * ldo + c] (+)= sum_k a[r * lda + k] * w[c * ldw + k] for r < MR, c < NR, k < kc (kc % 16 == 0).
template <int MR, int NR>
KBIT_AVX512 void tile(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t kc, float* out, int64_t ldo,
                      bool add) {
    __m512 acc[MR][NR];
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k += 16) {
        __m512 wv[NR];
        for (int c = 0; c < NR; ++c) wv[c] = _mm512_loadu_ps(w + c * ldw + k);
        for (int r = 0; r < MR; ++r) {
            const __m512 av = _mm512_loadu_ps(a + r * lda + k);
            for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_fmadd_ps(av, wv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) {
            const float s = _mm512_reduce_add_ps(acc[r][c]);
            float* o = out + r * ldo + c;
            *o = add ? *o + s : s;
        }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool);

template <int MR>
constexpr TileFn tile_of_width(int nr) {
    return nr == 1 ? &tile<MR, 1> : nr == 2 ? &tile<MR, 2> : nr == 3 ? &tile<MR, 3> : &tile<MR, 4>;
}

TileFn tile_of(int mr, int nr) {
    switch (mr) {
        case 1: return tile_of_width<1>(nr);
        case 2: return tile_of_width<2>(nr);
        case 3: return tile_of_width<3>(nr);
        case 4: return tile_of_width<4>(nr);
        case 5: return tile_of_width<5>(nr);
        default: return tile_of_width<6>(nr);
    }
}

bool supports(int M, int64_t k, int64_t blocksize) {
    return M >= kPrefillMinRows && k > 0 && k % blocksize == 0 && k % 16 == 0;
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

void override_prefill_4bit_avx512(Prefill4bitKernels& table) {
    if (!isa_at_least(Isa::Avx512)) return;
    table.supports = &supports;
    table.panel_floats = kPanelRows * chunk_of(kMaxBlocksize);
    table.rows = &rows;
}

}  // namespace kbit::cpu
