// Exact int8 GEMM (Highway): BLIS-style blocking with packed int16 operands and a register-blocked
// micro-kernel of kMR token rows x kNV vectors of outputs. Both operands keep the reduction dimension
// contiguous (X [tokens][K], W [outputs][K]), so the packed unit is a pair of consecutive K values:
// one int32 lane holding two int16, which vpmaddwd multiplies and sums exactly. For a handful of
// tokens (GEMV-like shapes) packing would cost more than it saves; a dot-product kernel reads W once.
#include <omp.h>

#include <algorithm>
#include <new>

#include "cpu_isa.h"
#include "igemm_8bit.h"
#include "parallel_range.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "igemm_8bit.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

// Only the AVX2 and AVX-512 targets feed the kernel table; Highway's baseline target is skipped.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
HWY_BEFORE_NAMESPACE();
namespace kbit::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kMR = 4;         // token rows per micro-tile
constexpr int64_t kNV = 2;         // output vectors per micro-tile
constexpr int64_t kKcPairs = 256;  // K pairs per packed block: a W micro-panel of kNV vectors stays in L1
constexpr int64_t kNcPanels = 8;   // micro-panels per packed W block (L2)
constexpr int64_t kDirectMaxTokens = 4;

HWY_INLINE int32_t PackPair(int8_t lo, int8_t hi) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(int16_t{lo})) |
                                (static_cast<uint32_t>(static_cast<uint16_t>(int16_t{hi})) << 16));
}

HWY_INLINE int32_t PairAt(const int8_t* row, int64_t m, int64_t p) {
    const int8_t lo = row[2 * p];
    const int8_t hi = 2 * p + 1 < m ? row[2 * p + 1] : int8_t{0};
    return PackPair(lo, hi);
}

// xp[(g * P + p) * kMR + r] = pair p of token g * kMR + r (zero beyond n).
void PackX(const int8_t* X, int64_t ldb, int64_t n, int64_t m, int64_t P, int32_t* xp, int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
        for (int64_t r = 0; r < kMR; ++r) {
            const int64_t t = g * kMR + r;
            int32_t* dst = xp + g * P * kMR + r;
            if (t >= n) {
                for (int64_t p = 0; p < P; ++p) dst[p * kMR] = 0;
                continue;
            }
            const int8_t* row = X + t * ldb;
            for (int64_t p = 0; p < P; ++p) dst[p * kMR] = PairAt(row, m, p);
        }
}

// Block of `panels` micro-panels from output o0 and pairs [p0, p0 + kb): panel j holds, for each pair,
// kNV vectors whose lane l is output o0 + j * NR + v * L + l (zero beyond k).
void PackW(const int8_t* W, int64_t lda, int64_t k, int64_t m, int64_t o0, int64_t panels, int64_t p0, int64_t kb,
           int64_t L, int32_t* wp) {
    const int64_t NR = kNV * L;
    for (int64_t j = 0; j < panels; ++j)
        for (int64_t c = 0; c < NR; ++c) {
            const int64_t o = o0 + j * NR + c;
            int32_t* dst = wp + j * kb * NR + c;
            if (o >= k) {
                for (int64_t p = 0; p < kb; ++p) dst[p * NR] = 0;
                continue;
            }
            const int8_t* row = W + o * lda;
            for (int64_t p = 0; p < kb; ++p) dst[p * NR] = PairAt(row, m, p0 + p);
        }
}

// rows x NR tile of int32 partial sums over kb pairs, added to (or stored into) C.
template <int64_t kRows>
HWY_INLINE void MicroKernel(const int32_t* xp, const int32_t* wp, int64_t kb, int32_t* C, int64_t ldc, int64_t cols,
                            bool accumulate) {
    const hn::ScalableTag<int32_t> d32;
    const hn::Repartition<int16_t, decltype(d32)> d16;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d32));
    hn::Vec<decltype(d32)> acc[kRows][kNV], odd[kRows][kNV];
    for (int64_t r = 0; r < kRows; ++r)
        for (int64_t v = 0; v < kNV; ++v) acc[r][v] = odd[r][v] = hn::Zero(d32);
    for (int64_t p = 0; p < kb; ++p) {
        const auto w0 = hn::BitCast(d16, hn::Load(d32, wp + (p * kNV + 0) * L));
        const auto w1 = hn::BitCast(d16, hn::Load(d32, wp + (p * kNV + 1) * L));
        for (int64_t r = 0; r < kRows; ++r) {
            const auto x = hn::BitCast(d16, hn::Set(d32, xp[p * kMR + r]));
            acc[r][0] = hn::ReorderWidenMulAccumulate(d32, x, w0, acc[r][0], odd[r][0]);
            acc[r][1] = hn::ReorderWidenMulAccumulate(d32, x, w1, acc[r][1], odd[r][1]);
        }
    }
    HWY_ALIGN int32_t tile[kNV * 16];
    for (int64_t r = 0; r < kRows; ++r) {
        int32_t* c = C + r * ldc;
        for (int64_t v = 0; v < kNV; ++v) {
            const auto sum = hn::RearrangeToOddPlusEven(acc[r][v], odd[r][v]);
            if ((v + 1) * L <= cols) {
                hn::StoreU(accumulate ? hn::Add(sum, hn::LoadU(d32, c + v * L)) : sum, d32, c + v * L);
            } else {
                hn::Store(sum, d32, tile);
                for (int64_t l = 0; v * L + l < cols; ++l) c[v * L + l] = static_cast<int32_t>(
                    static_cast<uint32_t>(accumulate ? c[v * L + l] : 0) + static_cast<uint32_t>(tile[l]));
            }
        }
    }
}

void BlockedGemm(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                 int32_t* C, int64_t ldc) {
    const hn::ScalableTag<int32_t> d32;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d32));
    const int64_t NR = kNV * L;
    const int64_t P = (m + 1) / 2;
    const int64_t groups = (n + kMR - 1) / kMR;
    const int64_t nc = kNcPanels * NR;
    const int64_t jc_blocks = (k + nc - 1) / nc;
    const int64_t threads = omp_get_max_threads();
    // Jobs: output blocks, times token ranges when there are fewer output blocks than threads.
    const int64_t token_splits = jc_blocks >= threads ? 1 : std::min<int64_t>(groups, (threads + jc_blocks - 1) / jc_blocks);

    const auto xp = hwy::AllocateAligned<int32_t>(static_cast<size_t>(groups * P * kMR));
    const auto wbuf = hwy::AllocateAligned<int32_t>(static_cast<size_t>(threads * kKcPairs * nc));
    if (!xp || !wbuf) throw std::bad_alloc();
    parallel_range(groups, 16, [&](int64_t g0, int64_t g1) { PackX(X, ldb, n, m, P, xp.get(), g0, g1); });

    parallel_range(jc_blocks * token_splits, 1, [&](int64_t j0, int64_t j1) {
        int32_t* wp = wbuf.get() + omp_get_thread_num() * kKcPairs * nc;
        for (int64_t job = j0; job < j1; ++job) {
            const int64_t jc = job / token_splits, split = job % token_splits;
            const int64_t g_begin = groups * split / token_splits, g_end = groups * (split + 1) / token_splits;
            const int64_t o0 = jc * nc;
            const int64_t panels = std::min<int64_t>(kNcPanels, (k - o0 + NR - 1) / NR);
            for (int64_t p0 = 0; p0 < P; p0 += kKcPairs) {
                const int64_t kb = std::min<int64_t>(kKcPairs, P - p0);
                PackW(W, lda, k, m, o0, panels, p0, kb, L, wp);
                for (int64_t g = g_begin; g < g_end; ++g) {
                    const int64_t t0 = g * kMR;
                    const int64_t rows = std::min<int64_t>(kMR, n - t0);
                    const int32_t* xg = xp.get() + (g * P + p0) * kMR;
                    for (int64_t j = 0; j < panels; ++j) {
                        const int64_t oj = o0 + j * NR;
                        const int64_t cols = std::min<int64_t>(NR, k - oj);
                        int32_t* c = C + t0 * ldc + oj;
                        const int32_t* wj = wp + j * kb * NR;
                        switch (rows) {
                            case 4: MicroKernel<4>(xg, wj, kb, c, ldc, cols, p0 > 0); break;
                            case 3: MicroKernel<3>(xg, wj, kb, c, ldc, cols, p0 > 0); break;
                            case 2: MicroKernel<2>(xg, wj, kb, c, ldc, cols, p0 > 0); break;
                            default: MicroKernel<1>(xg, wj, kb, c, ldc, cols, p0 > 0); break;
                        }
                    }
                }
            }
        }
    });
}

// Few tokens: X rows widened once, each W row read once and widened on the fly.
void DirectGemm(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                int32_t* C, int64_t ldc) {
    const hn::ScalableTag<int16_t> d16;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    const hn::Repartition<int32_t, decltype(d16)> d32;
    const int64_t L16 = static_cast<int64_t>(hn::Lanes(d16));
    const int64_t mv = m / L16 * L16;
    const auto xw = hwy::AllocateAligned<int16_t>(static_cast<size_t>(n * (mv > 0 ? mv : 1)));
    if (!xw) throw std::bad_alloc();
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < mv; ++i) xw[t * mv + i] = X[t * ldb + i];
    parallel_range(k, 64, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
            const int8_t* w = W + o * lda;
            hn::Vec<decltype(d32)> acc[kDirectMaxTokens], odd[kDirectMaxTokens];
            for (int64_t t = 0; t < n; ++t) acc[t] = odd[t] = hn::Zero(d32);
            for (int64_t i = 0; i < mv; i += L16) {
                const auto wv = hn::PromoteTo(d16, hn::LoadU(d8, w + i));
                for (int64_t t = 0; t < n; ++t)
                    acc[t] = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, xw.get() + t * mv + i), wv, acc[t], odd[t]);
            }
            for (int64_t t = 0; t < n; ++t) {
                uint32_t sum = static_cast<uint32_t>(
                    hn::GetLane(hn::SumOfLanes(d32, hn::RearrangeToOddPlusEven(acc[t], odd[t]))));
                const int8_t* x = X + t * ldb;
                for (int64_t i = mv; i < m; ++i) sum += static_cast<uint32_t>(int32_t{w[i]} * int32_t{x[i]});
                C[t * ldc + o] = static_cast<int32_t>(sum);
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

}  // namespace HWY_NAMESPACE
}  // namespace kbit::cpu
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET

#if HWY_ONCE
namespace kbit::cpu {

IgemmFn igemm_s32_kernel() {
    switch (active_isa()) {
        case Isa::Avx512: return N_AVX3::IgemmS32;
        case Isa::Avx2: return N_AVX2::IgemmS32;
        default: return nullptr;
    }
}

}  // namespace kbit::cpu
#endif  // HWY_ONCE
