// Exact int8 GEMM (Highway). Operands are widened to int16 and multiplied with vpmaddwd, which sums
// the products of one pair of consecutive K values into an int32 lane. A tile keeps 2 vectors of
// tokens (lanes) x 5 outputs of int32 accumulators in registers; per K pair it loads the tokens' pairs
// (X packed once per call, transposed into pairs: the smaller operand) and broadcasts each output's
// pair from W rows widened per block of 80 outputs x 512 K (no transposition of the large operand).
// For a handful of tokens (GEMV-like shapes) a plain dot product per output reads W once.
#include <algorithm>

#include "aligned_buffer.h"
#include "cpu_isa.h"
#include "kernels_8bit.h"
#include "parallel_range.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_igemm_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#if KBIT_HWY_KERNEL_TARGET
HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kOutsPerTile = 5;      // tile: 2 vectors of tokens x 5 outputs = 10 accumulators
constexpr int64_t kKcPairs = 256;        // K pairs per block: the tile's X panel (16 KiB) stays in L1
constexpr int64_t kNc = 16 * kOutsPerTile;  // outputs per widened W block (80 KiB, L2)
constexpr int64_t kDirectMaxTokens = 8;  // up to here, no packing (DirectGemm): measured crossover

// X transposed into pairs: xp[(tb * P + p) * TB + l] holds tokens tb * TB + l's K values 2p and
// 2p + 1 as two int16 in one int32 lane (zero beyond n and m). TB = two vectors of int32 lanes.
void PackX(const int8_t* X, int64_t ldb, int64_t n, int64_t m, int64_t P, int64_t TB, int32_t* xp, int64_t tb0,
           int64_t tb1) {
    for (int64_t tb = tb0; tb < tb1; ++tb)
        for (int64_t l = 0; l < TB; ++l) {
            const int64_t t = tb * TB + l;
            int32_t* dst = xp + tb * P * TB + l;
            const int8_t* row = X + t * ldb;
            for (int64_t p = 0; p < P; ++p) {
                const int16_t lo = t < n ? row[2 * p] : 0;
                const int16_t hi = t < n && 2 * p + 1 < m ? row[2 * p + 1] : 0;
                dst[p * TB] = static_cast<int32_t>(static_cast<uint16_t>(lo) | (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
            }
        }
}

// Rows [o0, o0 + count) of W (k x m, leading dimension lda), K pairs [p0, p0 + kb), widened to int16:
// row i at dst + i * stride pairs (int32 units); zero beyond k and m.
void WidenW(const int8_t* W, int64_t lda, int64_t k, int64_t m, int64_t o0, int64_t count, int64_t p0, int64_t kb,
            int32_t* dst, int64_t stride) {
    const hn::ScalableTag<int16_t> d16;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d16));
    for (int64_t i = 0; i < count; ++i) {
        int16_t* d = reinterpret_cast<int16_t*>(dst + i * stride);
        const int64_t o = o0 + i;
        const int64_t len = o < k ? std::max<int64_t>(0, std::min(2 * kb, m - 2 * p0)) : 0;
        const int8_t* s = W + o * lda + 2 * p0;
        int64_t j = 0;
        for (; j + L <= len; j += L) hn::Store(hn::PromoteTo(d16, hn::LoadU(d8, s + j)), d16, d + j);
        for (; j < len; ++j) d[j] = s[j];
        for (; j < 2 * kb; ++j) d[j] = 0;
    }
}

// vpmaddwd: int32 lane i = a[2i] * b[2i] + a[2i + 1] * b[2i + 1] (exact for int8-range inputs).
template <class D32, class V16>
HWY_INLINE hn::Vec<D32> MulPairs(D32 d32, V16 a, V16 b) {
    auto odd = hn::Zero(d32);  // ReorderWidenMulAccumulate's second sum: untouched on x86 targets
    return hn::RearrangeToOddPlusEven(hn::ReorderWidenMulAccumulate(d32, a, b, hn::Zero(d32), odd), odd);
}

// acc += MulPairs(a, b), pinned to acc's register: without the empty asm, GCC 12 schedules all
// products first and then runs out of the 16 AVX2 registers (spilling accumulators every step).
// AArch64 has 32 vector registers (and SVE's sizeless vectors no .raw): no pin there.
#if HWY_ARCH_X86
#define KBIT_PIN_REGISTER(acc) asm("" : "+x"(acc.raw))
#else
#define KBIT_PIN_REGISTER(acc) (void)0
#endif
#define KBIT_MADD_INTO(acc, a, b)                     \
    do {                                              \
        acc = hn::Add(acc, MulPairs(d32, a, b));      \
        KBIT_PIN_REGISTER(acc);                       \
    } while (0)

// Accumulators of a tile of TB tokens (2 vectors of lanes) x 5 outputs, over kb more K pairs; `acc`
// holds the 10 vectors between K blocks (zero on the first). Named variables: GCC 12 keeps these in
// registers but copies array elements every iteration.
HWY_INLINE void Tile(const int32_t* xp, const int32_t* w, int64_t ldw, int64_t kb, int32_t* acc, bool first) {
    const hn::ScalableTag<int32_t> d32;
    const hn::Repartition<int16_t, decltype(d32)> d16;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d32));
    auto c0a = hn::Zero(d32), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a, c3a = c0a, c3b = c0a,
         c4a = c0a, c4b = c0a;
    if (!first) {
        c0a = hn::Load(d32, acc + 0 * L), c0b = hn::Load(d32, acc + 1 * L), c1a = hn::Load(d32, acc + 2 * L);
        c1b = hn::Load(d32, acc + 3 * L), c2a = hn::Load(d32, acc + 4 * L), c2b = hn::Load(d32, acc + 5 * L);
        c3a = hn::Load(d32, acc + 6 * L), c3b = hn::Load(d32, acc + 7 * L), c4a = hn::Load(d32, acc + 8 * L);
        c4b = hn::Load(d32, acc + 9 * L);
    }
    const int32_t *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw, *w4 = w + 4 * ldw;
    // Output row w_row's K pair p, broadcast, into its two accumulators.
#define KBIT_MADD_ROW(ca, cb, w_row)                             \
    do {                                                         \
        const auto b = hn::BitCast(d16, hn::Set(d32, w_row[p])); \
        KBIT_MADD_INTO(ca, xa, b);                               \
        KBIT_MADD_INTO(cb, xb, b);                               \
    } while (0)
    for (int64_t p = 0; p < kb; ++p) {
        const auto xa = hn::BitCast(d16, hn::Load(d32, xp + p * 2 * L));
        const auto xb = hn::BitCast(d16, hn::Load(d32, xp + p * 2 * L + L));
        KBIT_MADD_ROW(c0a, c0b, w0);
        KBIT_MADD_ROW(c1a, c1b, w1);
        KBIT_MADD_ROW(c2a, c2b, w2);
        KBIT_MADD_ROW(c3a, c3b, w3);
        KBIT_MADD_ROW(c4a, c4b, w4);
    }
#undef KBIT_MADD_ROW
    hn::Store(c0a, d32, acc + 0 * L), hn::Store(c0b, d32, acc + 1 * L), hn::Store(c1a, d32, acc + 2 * L);
    hn::Store(c1b, d32, acc + 3 * L), hn::Store(c2a, d32, acc + 4 * L), hn::Store(c2b, d32, acc + 5 * L);
    hn::Store(c3a, d32, acc + 6 * L), hn::Store(c3b, d32, acc + 7 * L), hn::Store(c4a, d32, acc + 8 * L);
    hn::Store(c4b, d32, acc + 9 * L);
}

// Writes a finished tile: acc vector 2c + t / L, lane t % L is C[t][c].
HWY_INLINE void StoreTile(const int32_t* acc, int64_t L, int32_t* C, int64_t ldc, int64_t rows, int64_t cols) {
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t c = 0; c < cols; ++c) C[t * ldc + c] = acc[(2 * c + t / L) * L + t % L];
}

void BlockedGemm(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                 int32_t* C, int64_t ldc) {
    const hn::ScalableTag<int32_t> d32;
    const int64_t TB = 2 * static_cast<int64_t>(hn::Lanes(d32));
    const int64_t P = (m + 1) / 2;
    const int64_t token_blocks = (n + TB - 1) / TB;
    const int64_t jc_blocks = (k + kNc - 1) / kNc;
    const int64_t threads = max_workers();
    // Jobs: output blocks, times token ranges when there are fewer output blocks than threads.
    const int64_t token_splits =
        jc_blocks >= threads ? 1 : std::min<int64_t>(token_blocks, (threads + jc_blocks - 1) / jc_blocks);

    const auto xp = aligned_buffer<int32_t>(static_cast<size_t>(token_blocks * P * TB));
    const auto wbuf = aligned_buffer<int32_t>(static_cast<size_t>(threads * kNc * kKcPairs));
    parallel_range(token_blocks, 4, [&](int64_t b0, int64_t b1) { PackX(X, ldb, n, m, P, TB, xp.get(), b0, b1); });

    // Per job, the accumulators of all its tiles live in a tile-major buffer between K blocks, so
    // that C (strided by ldc) is written once per element.
    const int64_t tile_ints = 2 * kOutsPerTile * (TB / 2);
    const int64_t max_job_tiles = ((token_blocks + token_splits - 1) / token_splits) * (kNc / kOutsPerTile);
    const auto accbuf = aligned_buffer<int32_t>(static_cast<size_t>(threads * max_job_tiles * tile_ints));
    parallel_workers(jc_blocks * token_splits, 1, [&](int64_t j0, int64_t j1, int64_t worker) {
        int32_t* wblk = wbuf.get() + worker * kNc * kKcPairs;
        int32_t* accs = accbuf.get() + worker * max_job_tiles * tile_ints;
        for (int64_t job = j0; job < j1; ++job) {
            const int64_t jc = job / token_splits, split = job % token_splits;
            const int64_t tb_begin = token_blocks * split / token_splits;
            const int64_t tb_end = token_blocks * (split + 1) / token_splits;
            const int64_t o0 = jc * kNc;
            const int64_t outs = std::min(kNc, k - o0);
            const int64_t groups = (outs + kOutsPerTile - 1) / kOutsPerTile;
            for (int64_t p0 = 0; p0 < P; p0 += kKcPairs) {
                const int64_t kb = std::min(kKcPairs, P - p0);
                WidenW(W, lda, k, m, o0, groups * kOutsPerTile, p0, kb, wblk, kKcPairs);
                for (int64_t tb = tb_begin; tb < tb_end; ++tb) {
                    const int32_t* xpanel = xp.get() + (tb * P + p0) * TB;
                    int32_t* acc = accs + (tb - tb_begin) * groups * tile_ints;
                    for (int64_t g = 0; g < groups; ++g)
                        Tile(xpanel, wblk + g * kOutsPerTile * kKcPairs, kKcPairs, kb, acc + g * tile_ints, p0 == 0);
                }
            }
            for (int64_t tb = tb_begin; tb < tb_end; ++tb) {
                const int64_t t0 = tb * TB;
                const int32_t* acc = accs + (tb - tb_begin) * groups * tile_ints;
                for (int64_t g = 0; g < groups; ++g)
                    StoreTile(acc + g * tile_ints, TB / 2, C + t0 * ldc + o0 + g * kOutsPerTile, ldc, std::min(TB, n - t0),
                              std::min(kOutsPerTile, outs - g * kOutsPerTile));
            }
        }
    });
}

// The lanes' sum modulo 2^32 (the int32 GEMM's wrap-around). Not SumOfLanes: on AVX-512, Highway
// 1.0.3 sums int32 lanes with _mm512_reduce_add_epi32, whose signed additions overflow (undefined
// behaviour, flagged by UBSan) when the sum passes 2^31.
template <class D32>
HWY_INLINE uint32_t WrappingLaneSum(D32 d32, hn::Vec<D32> v) {
    HWY_ALIGN uint32_t lanes[hn::MaxLanes(d32)];
    hn::Store(hn::BitCast(hn::RebindToUnsigned<D32>(), v), hn::RebindToUnsigned<D32>(), lanes);
    uint32_t sum = 0;
    for (size_t i = 0; i < hn::Lanes(d32); ++i) sum += lanes[i];
    return sum;
}

// Dot products of one W row with kRows (1 to 4) token rows (int16), K a multiple of the vector length;
// W is widened in registers. Accumulators pinned as in Tile.
template <int kRows>
HWY_INLINE void DotRows(const int8_t* w, const int16_t* x, int64_t ldx, int64_t mv, uint32_t sums[4]) {
    const hn::ScalableTag<int16_t> d16;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    const hn::Repartition<int32_t, decltype(d16)> d32;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d16));
    auto a0 = hn::Zero(d32), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < mv; i += L) {
        const auto wv = hn::PromoteTo(d16, hn::LoadU(d8, w + i));
        KBIT_MADD_INTO(a0, hn::Load(d16, x + i), wv);
        if (kRows > 1) KBIT_MADD_INTO(a1, hn::Load(d16, x + ldx + i), wv);
        if (kRows > 2) KBIT_MADD_INTO(a2, hn::Load(d16, x + 2 * ldx + i), wv);
        if (kRows > 3) KBIT_MADD_INTO(a3, hn::Load(d16, x + 3 * ldx + i), wv);
    }
    sums[0] = WrappingLaneSum(d32, a0);
    if (kRows > 1) sums[1] = WrappingLaneSum(d32, a1);
    if (kRows > 2) sums[2] = WrappingLaneSum(d32, a2);
    if (kRows > 3) sums[3] = WrappingLaneSum(d32, a3);
}

// Few tokens: packing W would cost more than the products, so each W row is read once (per group of
// up to 4 tokens, from L1) and widened in registers; X rows are widened once.
void DirectGemm(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                int32_t* C, int64_t ldc) {
    const hn::ScalableTag<int16_t> d16;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d16));
    const int64_t mv = m / L * L;
    const int64_t ldx = mv > 0 ? mv : 1;
    const auto xw = aligned_buffer<int16_t>(static_cast<size_t>(n * ldx));
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < mv; ++i) xw[t * ldx + i] = X[t * ldb + i];
    parallel_range(k, 64, [&](int64_t o0, int64_t o1) {
        uint32_t sums[4];
        for (int64_t o = o0; o < o1; ++o) {
            const int8_t* w = W + o * lda;
            for (int64_t t0 = 0; t0 < n; t0 += 4) {
                const int64_t rows = std::min<int64_t>(4, n - t0);
                const int16_t* x = xw.get() + t0 * ldx;
                if (rows == 4) DotRows<4>(w, x, ldx, mv, sums);
                else if (rows == 3) DotRows<3>(w, x, ldx, mv, sums);
                else if (rows == 2) DotRows<2>(w, x, ldx, mv, sums);
                else DotRows<1>(w, x, ldx, mv, sums);
                for (int64_t t = t0; t < std::min(n, t0 + 4); ++t) {
                    uint32_t sum = sums[t - t0];
                    const int8_t* x = X + t * ldb;
                    for (int64_t i = mv; i < m; ++i) sum += static_cast<uint32_t>(int32_t{w[i]} * int32_t{x[i]});
                    C[t * ldc + o] = static_cast<int32_t>(sum);
                }
            }
        }
    });
}

void IgemmS32(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb, int32_t* C,
              int64_t ldc) {
    if (m == 0) {
        for (int64_t t = 0; t < n; ++t)
            for (int64_t o = 0; o < k; ++o) C[t * ldc + o] = 0;
        return;
    }
    if (n <= kDirectMaxTokens) DirectGemm(m, n, k, W, lda, X, ldb, C, ldc);
    else BlockedGemm(m, n, k, W, lda, X, ldb, C, ldc);
}

void OverrideIgemm(IgemmKernels& t) { t.s32 = &IgemmS32; }

}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // KBIT_HWY_KERNEL_TARGET
