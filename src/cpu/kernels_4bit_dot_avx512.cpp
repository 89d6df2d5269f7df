// 4-bit dot products (GEMV / GEMM) for AVX-512: the caller's 16-entry fp32 table lives in one
// register and `vpermps`, which reads only the low 4 bits of each 32-bit index, looks up 16 weights
// per instruction. A group is 128 elements = 64 packed bytes loaded as 16 dwords of 8 nibbles each:
// shifting the dwords right by 0, 4, ..., 28 bits puts each nibble in turn under the index bits, so a
// group costs 1 load, 7 shifts and 8 vpermps, no widening shuffles and no masks (the previous
// 32-element group spent a widening load and a mask per 16 weights; shuffles share port 5 with
// vpermps on Intel cores). The activations are permuted once per call to the lanes' order instead
// (prepare). Per 128 weights: 1 + 7 + 8 decode instructions and 8 FMAs per activation row.
//
// Several weight rows (GEMV) or activation rows (GEMM) share each loaded or decoded vector; every
// (row, activation) pair has its own block accumulator and running total. The next tile's weight
// rows are prefetched while a tile runs: a tile's rows are short streams (2 KB at k = 4096), too
// short for the hardware prefetcher to ramp up on (weights cold, one thread, Zen 5: 18-20 GB/s with
// the prefetch, 11-12 without; two tiles ahead is no better, and worse at k = 14336, where it
// reaches past L1). Measured with the weights rotating over > 256 MB: fewer copies leave part of
// them in the 32 MB L3 and favour other orders (one row at a time looked 25% faster with 64 MB).
// Blocks of 32 or 64 elements split a group into lanes of different blocks: such groups scale
// their accumulator with a vector of the group's block scales, one lane per dword.
// Class F: fp32 sums in this kernel's own order, bounded against fp64 by the conformance suite.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_dot_avx512.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kernels_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::Full512<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

constexpr int64_t kGroup = 128;
constexpr int kLookups = 8;  // nibbles per dword: one vpermps each

// The element of a group that lane d of lookup i meets: nibble i of dword d is the low (i even) or
// high (i odd) nibble of byte 4d + i/2, and a byte holds element 2b in its high nibble.
constexpr int64_t element_of(int i, int d) { return 8 * d + 2 * (i / 2) + (i % 2 == 0 ? 1 : 0); }

void prepare(const float* a, int64_t k, float* prepared) {
    const int64_t body = k / kGroup * kGroup;
    for (int64_t g = 0; g < body; g += kGroup)
        for (int i = 0; i < kLookups; ++i)
            for (int d = 0; d < 16; ++d) prepared[g + 16 * i + d] = a[g + element_of(i, d)];
    for (int64_t e = body; e < k; ++e) prepared[e] = a[e];
}

// Lookup i of a group's dwords: the vpermps index is the low 4 bits, the rest is ignored (a raw
// intrinsic: Highway's IndicesFromVec asserts in-range indices in debug and sanitizer builds).
template <int I>
HWY_INLINE VF lookup(VF table, VU dwords) {
    return VF{_mm512_permutexvar_ps(hn::ShiftRight<4 * I>(dwords).raw, table.raw)};
}

// Groups of blocks shorter than kGroup (blocksize 32 or 64): lane d (elements 8d..8d+7) takes the
// scale of block 8d / blocksize of the group's kGroup / blocksize blocks. The group's 4 or 2 scales
// are read with one 16- or 8-byte broadcast, exactly their bytes: a masked load cost a third of the
// GEMV's time on Zen 5 (weights cold, one thread: 8.0 against 12.5 GB/s).
struct SplitGroupScales {
    bool four;                      // blocksize 32: four scales per group, else two
    hn::Indices512<float> of_lane;  // block of each lane

    explicit SplitGroupScales(int64_t blocksize) : four(blocksize <= 32) {
        const DF df;
        const DI di;
        alignas(64) int32_t lane_block[16];
        for (int d = 0; d < 16; ++d) lane_block[d] = static_cast<int32_t>(8 * d / std::min(blocksize, kGroup));
        of_lane = hn::IndicesFromVec(df, hn::Load(di, lane_block));
    }
    HWY_INLINE VF operator()(const float* first) const {
        if (four) return hn::TableLookupLanes(VF{_mm512_broadcast_f32x4(_mm_loadu_ps(first))}, of_lane);
        double pair;  // lanes 2i and 2i + 1 hold the two scales
        std::memcpy(&pair, first, sizeof pair);
        return hn::TableLookupLanes(VF{_mm512_castpd_ps(_mm512_set1_pd(pair))}, of_lane);
    }
};

// What every tile of one dot_rows call shares, set up once per call: rebuilding the group scales'
// lane indices per tile (16 stores, then a vector load that waits for them) and dividing by the
// blocksize took about a fifth of a GEMM's time at M = 8 (perf), whose tiles are 8 groups long.
struct TileSetup {
    VF table;
    SplitGroupScales group_scales;
    bool split_groups;
    int64_t groups_per_block;
    int64_t blocks_per_group;  // split groups only: kGroup / blocksize (no division per group)
    int64_t row_blocks;        // blocks per weight row

    TileSetup(const float* lut, int64_t blocksize, int64_t row_elems)
        : table(hn::LoadU(DF(), lut)),
          group_scales(blocksize),
          split_groups(blocksize < kGroup),
          groups_per_block(split_groups ? 1 : blocksize / kGroup),
          blocks_per_group(split_groups ? kGroup / blocksize : 0),
          row_blocks(row_elems / blocksize) {}
};

// The columns [c0, c1) of weight rows r .. r + RT - 1 against activation rows 0 .. MT - 1 (prepared,
// stride k); c0 and c1 are multiples of kGroup, c1 <= the last whole group's end. A slice that is not
// the first adds to sums; the last one also takes the elements past the last whole group. block0 is
// the block of a row's column c0 (c0 / blocksize) and in_block0 its group within it.
struct Columns {
    int64_t c0, c1;
    bool first, last;
    int64_t block0, in_block0;

    Columns(int64_t c0_, int64_t c1_, bool first_, bool last_, const TileSetup& s, int64_t blocksize)
        : c0(c0_), c1(c1_), first(first_), last(last_), block0(c0_ / blocksize),
          in_block0(s.split_groups ? 0 : c0_ % blocksize / kGroup) {}
};

// out[i] = the sum of the lanes of v[i] for i < 8, each exactly as hn::SumOfLanes adds them (the
// halves, then the 128-bit blocks, then lanes two apart, then neighbours), eight at once: 23 shuffles
// and adds instead of eight reductions of ~10 dependent steps each.
HWY_INLINE void SumLanesOf8(const __m512 (&v)[8], float* out) {
    __m512 half[4];  // half[p]: blocks 0-1 the halves' sum of v[2p], blocks 2-3 that of v[2p + 1]
    for (int p = 0; p < 4; ++p)
        half[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                                _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)));
    __m512 quarter[2];  // quarter[q]: block i the blocks' sum of v[4q + i]
    for (int q = 0; q < 2; ++q)
        quarter[q] = _mm512_add_ps(_mm512_shuffle_f32x4(half[2 * q], half[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                                   _mm512_shuffle_f32x4(half[2 * q], half[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    // Block i: lanes 0-1 from v[i], lanes 2-3 from v[4 + i], each lane j + lane j + 2 of its block.
    const __m512 pairs = _mm512_add_ps(_mm512_shuffle_ps(quarter[0], quarter[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_ps(quarter[0], quarter[1], _MM_SHUFFLE(3, 2, 3, 2)));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(2, 3, 0, 1))));
    for (int i = 0; i < 4; ++i) {
        out[i] = lanes[4 * i];
        out[4 + i] = lanes[4 * i + 2];
    }
}

template <int MT, int RT>
HWY_INLINE void dot_tile(const float* prepared, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                         int64_t blocksize, const float* lut, const TileSetup& s, int64_t r, float* sums, int64_t ldo,
                         const Columns& cols) {
    static_assert(MT * RT <= 8, "one SumLanesOf8 per tile");
    const DF df;
    const DU du;
    const VF table = s.table;
    VF acc[MT][RT], total[MT][RT];
    for (int t = 0; t < MT; ++t)
        for (int j = 0; j < RT; ++j) acc[t][j] = total[t][j] = hn::Zero(df);
    const int64_t base = r * row_elems;  // a multiple of blocksize, which is even
    // Row 0 of the tile at the current group, and its block's scale; row j lies j row strides on.
    // Pointers advanced per group, where indices computed from g cost scalar uops (a signed halving
    // and a spilled product per row) that compete with the vector work for its ports.
    const int64_t stride = row_elems / 2;
    const uint8_t* rows = B + (base + cols.c0) / 2;
    const float* tile_scales = scales + r * s.row_blocks + cols.block0;
    int64_t in_block = cols.in_block0;
    // Groups that split into blocks (kSplit) flush their accumulators after every group: the
    // group's first look-up then multiplies instead of adding to an accumulator zeroed by a move.
    auto groups = [&](auto split_tag) {
        constexpr bool kSplit = decltype(split_tag)::value;
        for (int64_t g = cols.c0; g < cols.c1; g += kGroup, rows += kGroup / 2) {
            VU dwords[RT];
            for (int j = 0; j < RT; ++j) {
                const uint8_t* row = rows + j * stride;
                hwy::Prefetch(row + RT * stride);  // row j of the next tile
                dwords[j] = hn::LoadU(du, reinterpret_cast<const uint32_t*>(row));
                // In a register: GCC otherwise folds the load into each of the 8 shifts, and with it
                // recomputes the row's address 8 times from registers it spilled to vector ones.
                asm("" : "+v"(dwords[j].raw));
            }
            // One lookup at a time for every row, so that only RT decoded vectors are live.
            auto step = [&](auto lookup_index) {
                constexpr int I = decltype(lookup_index)::value;  // a constant shift count
                VF w[RT];
                for (int j = 0; j < RT; ++j) w[j] = lookup<I>(table, dwords[j]);
                for (int t = 0; t < MT; ++t) {
                    VF a = hn::LoadU(df, prepared + t * k + g + 16 * I);
                    // Keep the activation in a register for all RT rows: GCC otherwise folds the load
                    // into each FMA, RT loads per vector, and the load ports become the limit.
                    if constexpr (RT > 1) asm("" : "+v"(a.raw));
                    for (int j = 0; j < RT; ++j)
                        acc[t][j] = kSplit && I == 0 ? hn::Mul(w[j], a) : hn::MulAdd(w[j], a, acc[t][j]);
                }
            };
            step(std::integral_constant<int, 0>());
            step(std::integral_constant<int, 1>());
            step(std::integral_constant<int, 2>());
            step(std::integral_constant<int, 3>());
            step(std::integral_constant<int, 4>());
            step(std::integral_constant<int, 5>());
            step(std::integral_constant<int, 6>());
            step(std::integral_constant<int, 7>());
            if constexpr (kSplit) {
                for (int j = 0; j < RT; ++j) {
                    const VF scale = s.group_scales(tile_scales + j * s.row_blocks);
                    for (int t = 0; t < MT; ++t) total[t][j] = hn::MulAdd(acc[t][j], scale, total[t][j]);
                }
                tile_scales += s.blocks_per_group;
            } else if (++in_block == s.groups_per_block) {
                in_block = 0;
                for (int j = 0; j < RT; ++j) {
                    const VF scale = hn::Set(df, tile_scales[j * s.row_blocks]);
                    for (int t = 0; t < MT; ++t) {
                        total[t][j] = hn::MulAdd(acc[t][j], scale, total[t][j]);
                        acc[t][j] = hn::Zero(df);
                    }
                }
                ++tile_scales;
            }
        }
    };
    if (s.split_groups) groups(std::true_type());
    else groups(std::false_type());
    if (in_block != 0)  // a block cut short by the slice's or the row's last whole group
        for (int j = 0; j < RT; ++j) {
            const VF scale = hn::Set(df, tile_scales[j * s.row_blocks]);
            for (int t = 0; t < MT; ++t) total[t][j] = hn::MulAdd(acc[t][j], scale, total[t][j]);
        }
    float reduced[8];
    if constexpr (MT * RT == 1) {
        reduced[0] = hn::GetLane(hn::SumOfLanes(df, total[0][0]));
    } else {
        __m512 v[8];
        for (int i = 0; i < 8; ++i) v[i] = i < MT * RT ? total[i / RT][i % RT].raw : _mm512_setzero_ps();
        SumLanesOf8(v, reduced);
    }
    const bool tail = cols.last && cols.c1 < k;
    for (int j = 0; j < RT; ++j) {
        const int64_t row_base = base + j * row_elems;
        for (int t = 0; t < MT; ++t) {
            float sum = reduced[t * RT + j];
            if (!cols.first) sum = sums[t * ldo + r + j] + sum;
            // Elements past the last whole group (k % 128), after the slice that ends the row.
            if (tail) sum = dot_4bit_tail(sum, prepared + t * k, cols.c1, k, B, row_base, scales, blocksize, lut);
            sums[t * ldo + r + j] = sum;
        }
    }
}

// GEMV: four weight rows share each activation load. GEMM: a tile of two weight rows meets every
// activation row, four at a time (8 accumulators, 8 totals), so the weights are read from memory
// once whatever M is; the columns are cut into slices whose M activation rows fit in L1 together
// (else every tile streams all M rows from L2: 16x its own bytes at M = 4). A tile of one weight row
// against eight activation rows, which decodes each vector once for all eight, was faster with the
// weights in cache (M = 8, 4096 x 4096: 3.11 against 3.55 ms) but slower with them cold, as the
// bench rotates them (9-12% of the limit against 12-15% on every shape): one row per tile halves the
// distance the next tile's prefetch runs ahead.
template <int RT>
void dot_tiles(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
               int64_t blocksize, const float* lut, const TileSetup& s, int64_t r, float* sums, int64_t ldo,
               const Columns& cols) {
    for_token_tiles(M, [&](auto mt, int t) {
        dot_tile<mt, RT>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, s, r, sums + t * ldo, ldo, cols);
    });
}

constexpr int64_t kSliceBytes = 32 * 1024;  // of activations, half of the smallest AVX-512 core's L1D

void dot_rows(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
              int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    const int64_t body = k / kGroup * kGroup;
    const TileSetup s(lut, blocksize, row_elems);
    if (M == 1) {
        const Columns all(0, body, true, true, s, blocksize);
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4)
            dot_tile<1, 4>(prepared, k, B, row_elems, scales, blocksize, lut, s, r, sums, ldo, all);
        for (; r < r1; ++r) dot_tile<1, 1>(prepared, k, B, row_elems, scales, blocksize, lut, s, r, sums, ldo, all);
        return;
    }
    const int64_t slice = std::max<int64_t>(kGroup, kSliceBytes / (4 * M) / kGroup * kGroup);
    for (int64_t c0 = 0;;) {
        const Columns cols(c0, std::min(body, c0 + slice), c0 == 0, c0 + slice >= body, s, blocksize);
        int64_t r = r0;
        for (; r + 2 <= r1; r += 2)
            dot_tiles<2>(prepared, M, k, B, row_elems, scales, blocksize, lut, s, r, sums, ldo, cols);
        for (; r < r1; ++r) dot_tiles<1>(prepared, M, k, B, row_elems, scales, blocksize, lut, s, r, sums, ldo, cols);
        c0 = cols.c1;
        if (cols.last) break;
    }
}

}  // namespace

void OverrideDot(Dot4bitKernels& t) { t = {kGroup, &dot_4bit_simd_supports, &prepare, &dot_rows}; }  // every slot
#endif  // HWY_TARGET == HWY_AVX3
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
