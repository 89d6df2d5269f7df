// kernels_igemm_dotprod.cpp — the exact int8 GEMM (IgemmKernels::s32) for AArch64 CPUs with the
// dot-product extension (FEAT_DotProd, HWCAP_ASIMDDP): SDOT (vdotq_s32) adds the four products of
// four consecutive int8 pairs into each int32 lane, so int8 is multiplied as it is, without the
// Highway kernel's widening to int16 (which NEON runs as smull/smlal pairs). Integer sums modulo
// 2^32: the same bytes as that kernel and the reference.
//
// A tile is 4 tokens x 4 outputs: 16 int32x4 accumulators over K in 16-byte chunks, reduced by
// pairwise adds into one vector of 4 outputs per token. X is packed once per call (rows zero-padded
// to a multiple of 16 bytes, tokens to a multiple of 4), so tiles have no K tails. Many tokens:
// per job a block of 64 W rows x 512 K bytes (32 KiB) is packed (zero-padded, contiguous: W rows
// strided by a power-of-two lda would share L1 sets) and every token group of the job runs over it,
// C accumulating across K blocks. A handful of tokens (GEMV-like): W is read in place, once per
// group of 4 tokens, its last partial chunk copied into a zeroed one.
//
// Only the functions that execute SDOT carry the target attribute; the file is built with the
// baseline flags, so nothing shared with the rest of the library (inline functions of headers,
// OpenMP's outlined regions) is compiled for a newer architecture than the library's. The attribute
// names Armv8.2-A because GCC 12's arm_neon.h declares vdotq_s32 under that architecture ("+dotprod"
// on the Armv8.0 baseline cannot inline it); these loops use nothing else of Armv8.1/8.2 (no atomics).
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "aligned_buffer.h"
#include "cpu_isa.h"
#include "kernels_8bit.h"
#include "parallel_range.h"

#define KBIT_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace kbit::cpu {
namespace {

constexpr int64_t kTile = 4;             // tokens and outputs per tile
constexpr int64_t kChunk = 16;           // K bytes per SDOT
constexpr int64_t kNc = 64;              // outputs per packed W block
constexpr int64_t kKc = 512;             // K bytes per packed W block (a multiple of kChunk)
constexpr int64_t kDirectMaxTokens = 8;  // up to here W is not packed (the Highway kernel's crossover; not measured here)

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// out[t] lane o = sum over `chunks` 16-byte chunks of w[o] . x[t] (t, o < 4), wrapping like int32.
KBIT_DOTPROD inline void Tile(const int8_t* const w[kTile], const int8_t* const x[kTile], int64_t chunks,
                              int32x4_t out[kTile]) {
    int32x4_t c[kTile][kTile];
#pragma GCC unroll 4
    for (int t = 0; t < kTile; ++t)
#pragma GCC unroll 4
        for (int o = 0; o < kTile; ++o) c[t][o] = vdupq_n_s32(0);
    for (int64_t q = 0; q < chunks * kChunk; q += kChunk) {
        int8x16_t wv[kTile], xv[kTile];
#pragma GCC unroll 4
        for (int i = 0; i < kTile; ++i) wv[i] = vld1q_s8(w[i] + q), xv[i] = vld1q_s8(x[i] + q);
#pragma GCC unroll 4
        for (int t = 0; t < kTile; ++t)
#pragma GCC unroll 4
            for (int o = 0; o < kTile; ++o) c[t][o] = vdotq_s32(c[t][o], xv[t], wv[o]);
    }
    // [c0 c1 c2 c3] -> [sum c0, sum c1, sum c2, sum c3]
#pragma GCC unroll 4
    for (int t = 0; t < kTile; ++t)
        out[t] = vpaddq_s32(vpaddq_s32(c[t][0], c[t][1]), vpaddq_s32(c[t][2], c[t][3]));
}

// Writes (or, with `add`, adds to) C[t * ldc + o] the tile's out[t] lane o, t < rows, o < cols.
inline void StoreTile(const int32x4_t out[kTile], int32_t* C, int64_t ldc, int64_t rows, int64_t cols, bool add) {
    for (int64_t t = 0; t < rows; ++t) {
        int32_t* c = C + t * ldc;
        if (cols == kTile) {
            vst1q_s32(c, add ? vaddq_s32(vld1q_s32(c), out[t]) : out[t]);
            continue;
        }
        int32_t lanes[kTile];
        vst1q_s32(lanes, out[t]);
        for (int64_t o = 0; o < cols; ++o)
            c[o] = add ? static_cast<int32_t>(static_cast<uint32_t>(c[o]) + static_cast<uint32_t>(lanes[o])) : lanes[o];
    }
}

// Token rows [t0, t1) of X into xp (rows of kp bytes): row t < n is X's row zero-padded, others zero.
void PackX(const int8_t* X, int64_t ldb, int64_t n, int64_t m, int64_t kp, int8_t* xp, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
        int8_t* dst = xp + t * kp;
        const int64_t len = t < n ? m : 0;
        if (len > 0) std::memcpy(dst, X + t * ldb, static_cast<size_t>(len));
        std::memset(dst + len, 0, static_cast<size_t>(kp - len));
    }
}

// Rows [o0, o0 + count) of W, K bytes [p0, p0 + kb), into dst (rows of kKc bytes); zero beyond k and m.
void PackW(const int8_t* W, int64_t lda, int64_t k, int64_t m, int64_t o0, int64_t count, int64_t p0, int64_t kb,
           int8_t* dst) {
    for (int64_t i = 0; i < count; ++i) {
        int8_t* d = dst + i * kKc;
        const int64_t len = o0 + i < k ? std::min(kb, m - p0) : 0;
        if (len > 0) std::memcpy(d, W + (o0 + i) * lda + p0, static_cast<size_t>(len));
        std::memset(d + len, 0, static_cast<size_t>(kb - len));
    }
}

// Output groups [g0, g1) (4 outputs each) for all n tokens, W read in place.
KBIT_DOTPROD void DirectGroups(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* xp,
                               int64_t kp, int32_t* C, int64_t ldc, int64_t g0, int64_t g1) {
    const int64_t full = m / kChunk, tail = m % kChunk;
    for (int64_t g = g0; g < g1; ++g) {
        const int64_t o0 = g * kTile;
        const int8_t* w[kTile];
        int8_t wt[kTile][kChunk] = {};
        const int8_t* wtail[kTile] = {wt[0], wt[1], wt[2], wt[3]};
        for (int64_t r = 0; r < kTile; ++r) {
            w[r] = W + std::min(o0 + r, k - 1) * lda;  // past k: a valid row again, never stored
            if (tail > 0) std::memcpy(wt[r], w[r] + full * kChunk, static_cast<size_t>(tail));
        }
        for (int64_t t0 = 0; t0 < n; t0 += kTile) {
            const int8_t* x[kTile];
            for (int64_t i = 0; i < kTile; ++i) x[i] = xp + (t0 + i) * kp;
            int32x4_t out[kTile];
            Tile(w, x, full, out);
            if (tail > 0) {
                const int8_t* xt[kTile];
                for (int64_t i = 0; i < kTile; ++i) xt[i] = x[i] + full * kChunk;
                int32x4_t more[kTile];
                Tile(wtail, xt, 1, more);
                for (int64_t i = 0; i < kTile; ++i) out[i] = vaddq_s32(out[i], more[i]);
            }
            StoreTile(out, C + t0 * ldc + o0, ldc, std::min(kTile, n - t0), std::min(kTile, k - o0), false);
        }
    }
}

// Token groups [tg0, tg1) x outputs [o0, o0 + outs) over K bytes [p0, p0 + kb) from the packed W block.
KBIT_DOTPROD void BlockTiles(const int8_t* wblk, const int8_t* xp, int64_t kp, int64_t n, int64_t tg0, int64_t tg1,
                             int64_t o0, int64_t outs, int64_t p0, int64_t kb, int32_t* C, int64_t ldc) {
    for (int64_t tg = tg0; tg < tg1; ++tg) {
        const int64_t t0 = tg * kTile;
        const int8_t* x[kTile];
        for (int64_t i = 0; i < kTile; ++i) x[i] = xp + (t0 + i) * kp + p0;
        for (int64_t g = 0; g * kTile < outs; ++g) {
            const int8_t* w[kTile];
            for (int64_t r = 0; r < kTile; ++r) w[r] = wblk + (g * kTile + r) * kKc;
            int32x4_t out[kTile];
            Tile(w, x, kb / kChunk, out);
            StoreTile(out, C + t0 * ldc + o0 + g * kTile, ldc, std::min(kTile, n - t0), std::min(kTile, outs - g * kTile),
                      p0 > 0);
        }
    }
}

void IgemmDotprod(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                  int32_t* C, int64_t ldc) {
    if (m == 0) {
        for (int64_t t = 0; t < n; ++t)
            for (int64_t o = 0; o < k; ++o) C[t * ldc + o] = 0;
        return;
    }
    const int64_t kp = round_up(m, kChunk), n4 = round_up(n, kTile);
    const auto xp = aligned_buffer<int8_t>(static_cast<size_t>(n4 * kp));
    parallel_range(n4, 16, [&](int64_t t0, int64_t t1) { PackX(X, ldb, n, m, kp, xp.get(), t0, t1); });
    if (n <= kDirectMaxTokens) {
        parallel_range((k + kTile - 1) / kTile, 16,
                       [&](int64_t g0, int64_t g1) { DirectGroups(m, n, k, W, lda, xp.get(), kp, C, ldc, g0, g1); });
        return;
    }
    const int64_t token_groups = n4 / kTile;
    const int64_t out_blocks = (k + kNc - 1) / kNc;
    const int64_t threads = max_workers();
    // Jobs: output blocks, times token ranges when there are fewer output blocks than threads.
    const int64_t token_splits =
        out_blocks >= threads ? 1 : std::min<int64_t>(token_groups, (threads + out_blocks - 1) / out_blocks);
    const auto wbuf = aligned_buffer<int8_t>(static_cast<size_t>(threads * kNc * kKc));
    parallel_workers(out_blocks * token_splits, 1, [&](int64_t j0, int64_t j1, int64_t worker) {
        int8_t* wblk = wbuf.get() + worker * kNc * kKc;
        for (int64_t job = j0; job < j1; ++job) {
            const int64_t jc = job / token_splits, split = job % token_splits;
            const int64_t tg0 = token_groups * split / token_splits, tg1 = token_groups * (split + 1) / token_splits;
            const int64_t o0 = jc * kNc, outs = std::min(kNc, k - o0);
            for (int64_t p0 = 0; p0 < kp; p0 += kKc) {
                const int64_t kb = std::min(kKc, kp - p0);
                PackW(W, lda, k, m, o0, round_up(outs, kTile), p0, kb, wblk);
                BlockTiles(wblk, xp.get(), kp, n, tg0, tg1, o0, outs, p0, kb, C, ldc);
            }
        }
    });
}

}  // namespace

void override_igemm_dotprod(IgemmKernels& table) {
    if (!isa_at_least(Isa::Neon) || !cpu_has_arm_dotprod()) return;
    table.s32 = &IgemmDotprod;
    table.provider = "kbit sdot";
}

}  // namespace kbit::cpu
