// 4-bit dot products (GEMV / GEMM) for AVX2 (Highway's AVX2 target; AVX-512 has its own kernels,
// kernels_4bit_dot_avx512.cpp: one vpermps per 16 weights). A group is 64 elements = 32 packed bytes;
// its high nibbles (even elements) and low nibbles (odd elements) are looked up separately through the
// byte planes of the caller's 16-entry table (hwy_nibble_planes-inl.h) without rearranging, so the
// activations are permuted once instead (prepare).
//
// Class F: fp32 sums in this kernel's own order, bounded against fp64 by the conformance suite.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_dot_avx2.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "hwy_nibble_planes-inl.h"

#include <algorithm>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kernels_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX2
namespace {

constexpr int64_t kDotGroup = 64;

// Position in a prepared group of element e of the group (inverse of lookup_f32's lane order).
constexpr int64_t prepared_position(int64_t e) {
    const int64_t byte = e / 2, half = e % 2;            // high nibble: half 0
    const int64_t block = byte / 16, m = (byte % 16) / 4, p = byte % 4;
    return 32 * half + 8 * m + 4 * block + p;
}

void prepare(const float* a, int64_t k, float* prepared) {
    const int64_t body = k / kDotGroup * kDotGroup;
    for (int64_t g = 0; g < body; g += kDotGroup)
        for (int64_t e = 0; e < kDotGroup; ++e) prepared[g + prepared_position(e)] = a[g + e];
    for (int64_t e = body; e < k; ++e) prepared[e] = a[e];
}

// Rows [r0, r1) for MT activation rows at once. Each activation row has NACC independent partial
// sums per block and as many running totals (acc * scale is added to its own total), so the only
// chain that crosses groups is one FMA per total; the totals meet at the end of the row. Sized to
// keep every accumulator in the 16 AVX2 registers beside the four byte planes.
template <int MT>
void dot_rows_tile(const float* prepared, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                   int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    constexpr int NACC = MT == 2 ? 1 : 2;
    const DF df;
    const DU8 d8;
    const DU16 d16;
    const Planes planes = make_planes(lut);
    const int64_t body = k / kDotGroup * kDotGroup;
    const int64_t groups_per_block = blocksize >= kDotGroup ? blocksize / kDotGroup : 1;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t base = r * row_elems;  // flat nibble index of (r, 0); a multiple of blocksize
        const uint8_t* w = B + base / 2;
        VF total[MT][NACC], acc[MT][NACC];
        for (int t = 0; t < MT; ++t)
            for (int j = 0; j < NACC; ++j) total[t][j] = acc[t][j] = hn::Zero(df);
        auto flush = [&](const VF scale) {
            for (int t = 0; t < MT; ++t)
                for (int j = 0; j < NACC; ++j) {
                    total[t][j] = hn::MulAdd(acc[t][j], scale, total[t][j]);
                    acc[t][j] = hn::Zero(df);
                }
        };
        int64_t in_block = 0;
        int64_t beta = base / blocksize;  // block of the current group
        for (int64_t g = 0; g < body; g += kDotGroup) {
            const VU8 x = hn::LoadU(d8, w + g / 2);
            const VU8 mask = hn::Set(d8, 0x0F);
            for (int half = 0; half < 2; ++half) {  // high nibbles (even elements), then low
                const VU8 idx = half == 0 ? hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(d16, x))), mask)
                                          : hn::And(x, mask);
                VF f[4];
                lookup_f32(planes, idx, f);
                for (int t = 0; t < MT; ++t) {
                    const float* a = prepared + t * k + g + 32 * half;
                    for (int m = 0; m < 4; ++m)
                        acc[t][m % NACC] = hn::MulAdd(f[m], hn::LoadU(df, a + 8 * m), acc[t][m % NACC]);
                }
            }
            if (++in_block == groups_per_block) {
                in_block = 0;
                // blocksize 32: lanes 0-3 of every vector belong to the group's first block (bytes
                // 0-15), lanes 4-7 to the second.
                if (blocksize >= kDotGroup) {
                    flush(hn::Set(df, scales[beta]));
                    beta += 1;
                } else {
                    flush(hn::ConcatLowerLower(df, hn::Set(df, scales[beta + 1]), hn::Set(df, scales[beta])));
                    beta += 2;
                }
            }
        }
        if (in_block != 0) flush(hn::Set(df, scales[beta]));  // a block cut short by the row's last group
        for (int t = 0; t < MT; ++t) {
            VF sum_v = total[t][0];
            for (int j = 1; j < NACC; ++j) sum_v = hn::Add(sum_v, total[t][j]);
            const float sum = hn::GetLane(hn::SumOfLanes(df, sum_v));
            sums[t * ldo + r] = dot_4bit_tail(sum, prepared + t * k, body, k, B, base, scales, blocksize, lut);
        }
    }
}

void dot_rows(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
              int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    for_token_tiles(M, [&](auto mt, int t) {
        dot_rows_tile<mt>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
    });
}

}  // namespace

void OverrideDot(Dot4bitKernels& t) { t = {kDotGroup, &dot_4bit_simd_supports, &prepare, &dot_rows}; }  // every slot
#endif  // HWY_TARGET == HWY_AVX2
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
