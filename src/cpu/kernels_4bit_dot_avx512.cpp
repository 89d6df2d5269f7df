// 4-bit dot products (GEMV / GEMM) for AVX-512: the caller's 16-entry fp32 table lives in one
// register and `vpermps` looks up 16 weights per instruction. A group is 32 elements = 16 packed
// bytes, zero-extended to 16 lanes once; the high nibbles (even elements) index the table after a
// shift, the low nibbles (odd elements) after a mask. The activations are de-interleaved once per
// call instead (prepare: the group's even elements, then its odd ones), so each lookup meets its
// activations in one aligned-free load. Per 32 weights: 1 widening load, 1 shift, 1 and, 2 vpermps
// and 2 FMAs per activation row, against 35 instructions per 64 of the 256-bit byte-plane kernel.
//
// Several weight rows (GEMV) or activation rows (GEMM) share each decoded or loaded vector; every
// (row, activation) pair has its own block accumulator and running total, scaled once per block.
// Class F: fp32 sums in this kernel's own order, bounded against fp64 by the conformance suite.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_dot_avx512.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kernels_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu {
namespace HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::Full512<float>;
using DU = hn::RebindToUnsigned<DF>;
using D8 = hn::Rebind<uint8_t, DF>;  // 16 bytes
using VF = hn::Vec<DF>;

constexpr int64_t kGroup = 32;

void prepare(const float* a, int64_t k, float* prepared) {
    const int64_t body = k / kGroup * kGroup;
    for (int64_t g = 0; g < body; g += kGroup)
        for (int64_t j = 0; j < kGroup / 2; ++j) {
            prepared[g + j] = a[g + 2 * j];
            prepared[g + kGroup / 2 + j] = a[g + 2 * j + 1];
        }
    for (int64_t e = body; e < k; ++e) prepared[e] = a[e];
}

// Weight rows r .. r + RT - 1 against activation rows 0 .. MT - 1 (prepared, stride k).
template <int MT, int RT>
HWY_INLINE void dot_tile(const float* prepared, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                         int64_t blocksize, const float* lut, int64_t r, float* sums, int64_t ldo) {
    const DF df;
    const DU du;
    const D8 d8;
    const VF table = hn::LoadU(df, lut);
    const auto low4 = hn::Set(du, 0x0Fu);
    const int64_t body = k / kGroup * kGroup;
    const int64_t groups_per_block = blocksize / kGroup;  // blocksize >= 32
    VF acc[MT][RT], total[MT][RT];
    for (int t = 0; t < MT; ++t)
        for (int j = 0; j < RT; ++j) acc[t][j] = total[t][j] = hn::Zero(df);
    const int64_t base = r * row_elems;  // a multiple of blocksize
    int64_t in_block = 0, beta = base / blocksize;
    for (int64_t g = 0; g < body; g += kGroup) {
        VF hi[RT], lo[RT];
        for (int j = 0; j < RT; ++j) {
            const auto bytes = hn::PromoteTo(du, hn::LoadU(d8, B + (base + j * row_elems + g) / 2));
            hi[j] = hn::TableLookupLanes(table, hn::IndicesFromVec(df, hn::ShiftRight<4>(bytes)));
            lo[j] = hn::TableLookupLanes(table, hn::IndicesFromVec(df, hn::And(bytes, low4)));
        }
        for (int t = 0; t < MT; ++t) {
            const float* a = prepared + t * k + g;
            const VF even = hn::LoadU(df, a), odd = hn::LoadU(df, a + kGroup / 2);
            for (int j = 0; j < RT; ++j) acc[t][j] = hn::MulAdd(lo[j], odd, hn::MulAdd(hi[j], even, acc[t][j]));
        }
        if (++in_block == groups_per_block) {
            in_block = 0;
            for (int j = 0; j < RT; ++j) {
                const VF scale = hn::Set(df, scales[beta + j * (row_elems / blocksize)]);
                for (int t = 0; t < MT; ++t) {
                    total[t][j] = hn::MulAdd(acc[t][j], scale, total[t][j]);
                    acc[t][j] = hn::Zero(df);
                }
            }
            ++beta;
        }
    }
    if (in_block != 0)  // a block cut short by the row's last whole group
        for (int j = 0; j < RT; ++j) {
            const VF scale = hn::Set(df, scales[beta + j * (row_elems / blocksize)]);
            for (int t = 0; t < MT; ++t) total[t][j] = hn::MulAdd(acc[t][j], scale, total[t][j]);
        }
    for (int j = 0; j < RT; ++j) {
        const int64_t row_base = base + j * row_elems;
        for (int t = 0; t < MT; ++t) {
            float sum = hn::GetLane(hn::SumOfLanes(df, total[t][j]));
            // Elements past the last whole group (k % 32), in order, one scale per block run.
            const float* a = prepared + t * k;
            for (int64_t kk = body; kk < k;) {
                const int64_t b = (row_base + kk) / blocksize;
                const int64_t run_end = std::min(k, (b + 1) * blocksize - row_base);
                float partial = 0.0f;
                for (; kk < run_end; ++kk) partial += a[kk] * lut[nibble_at(B, row_base + kk)];
                sum += partial * scales[b];
            }
            sums[t * ldo + r + j] = sum;
        }
    }
}

// Weight rows [r0, r1) for MT activation rows: RT weight rows at a time, then one by one.
template <int MT, int RT>
void dot_rows_of(const float* prepared, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                 int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    int64_t r = r0;
    for (; r + RT <= r1; r += RT) dot_tile<MT, RT>(prepared, k, B, row_elems, scales, blocksize, lut, r, sums, ldo);
    for (; r < r1; ++r) dot_tile<MT, 1>(prepared, k, B, row_elems, scales, blocksize, lut, r, sums, ldo);
}

// GEMV: four weight rows share each activation load. GEMM: four activation rows share each decoded
// weight vector, two weight rows at a time (16 accumulators and totals in 32 registers).
void dot_rows(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
              int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    if (M == 1) return dot_rows_of<1, 4>(prepared, k, B, row_elems, scales, blocksize, lut, r0, r1, sums, ldo);
    int t = 0;
    for (; t + 4 <= M; t += 4)
        dot_rows_of<4, 2>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
    for (; t + 2 <= M; t += 2)
        dot_rows_of<2, 2>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
    for (; t < M; ++t)
        dot_rows_of<1, 4>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
}

}  // namespace

void OverrideDot512(Dot4bitKernels& t) {
    t.group = kGroup;
    t.supports = &dot_4bit_simd_supports;
    t.prepare = &prepare;
    t.dot_rows = &dot_rows;
}
#endif  // HWY_TARGET == HWY_AVX3
}  // namespace HWY_NAMESPACE
}  // namespace kbit::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kbit::cpu {

void override_dot_4bit_avx512(Dot4bitKernels& table) {
    override_for_active_isa(table, &N_AVX3::OverrideDot512, nullptr);
}

}  // namespace kbit::cpu
#endif  // HWY_ONCE
