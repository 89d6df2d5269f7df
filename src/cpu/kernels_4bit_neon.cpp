// kernels_4bit_neon.cpp — the 4-bit quantizer, dequantizer and dot kernels (GEMV / GEMM) for
// AArch64, Highway's NEON target only (128-bit vectors; the SVE levels run these, cpu_isa.h). The
// 16-entry code table is looked up by TBL (TableLookupBytes on one 16-byte register): a table of
// 16 fp32 (or fp16 / bf16) entries is held as 4 (or 2) byte planes, plane k holding byte k of every
// entry, so one TBL per plane looks up 16 index bytes and byte / halfword zips (InterleaveLower /
// Upper) reassemble the entries in index order. The planes come from one de-interleaving load
// (LD4 / LD2) of the entries.
//
// Dequantize: per block the 16 entries are scaled and rounded to the output type first (exactly the
// reference's mul_rn + round, x86's NaN bits included: behaviour §1.1), so the elements of a block
// are pure table look-ups. Quantize: the code of each normalised value is the number of thresholds it
// exceeds (kbit_formats.h), counted by compares. Both are bit-exact with kbit::ref. Dot: the planes
// of the caller's (unscaled) table, fp32 FMAs per block, each block's sums scaled once (class F, the
// same scheme as the x86 dot kernels).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_neon.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "hwy_elem-inl.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cpu_isa.h"
#include "kbit_dtype.h"
#include "kbit_formats.h"
#include "kernels_4bit.h"
#include "ref_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if KBIT_HWY_SIZED_KERNEL_TARGET && HWY_ARCH_ARM_A64
namespace {

const hn::Full128<float> df;
const hn::Full128<uint8_t> d8;
const hn::Full128<uint16_t> d16;
const hn::Full128<uint32_t> du32;
using VF = hn::Vec<hn::Full128<float>>;
using VU8 = hn::Vec<hn::Full128<uint8_t>>;
using VU32 = hn::Vec<hn::Full128<uint32_t>>;

// ------------------------------------------------------------------------------------------------
// Table look-ups
// ------------------------------------------------------------------------------------------------

// Byte planes of 16 fp32 entries: p[k][j] = byte k of entries[j] (LD4).
struct Planes4 {
    VU8 p[4];
};
// (Planes are built from named vectors: the implicit constructors of a struct of vectors are not
// compiled for the target, and GCC refuses to inline the vectors' constructors into them.)
HWY_INLINE Planes4 planes_f32(const float* entries) {
    VU8 p0, p1, p2, p3;
    hn::LoadInterleaved4(d8, reinterpret_cast<const uint8_t*>(entries), p0, p1, p2, p3);
    return Planes4{{p0, p1, p2, p3}};
}

// f[m] = entries[idx[4m + l]] in lane l: 16 fp32 values in index order (4 TBL, 8 zips).
HWY_INLINE void lookup_f32(const Planes4& t, VU8 idx, VF f[4]) {
    const VU8 b0 = hn::TableLookupBytes(t.p[0], idx), b1 = hn::TableLookupBytes(t.p[1], idx);
    const VU8 b2 = hn::TableLookupBytes(t.p[2], idx), b3 = hn::TableLookupBytes(t.p[3], idx);
    const auto w01l = hn::BitCast(d16, hn::InterleaveLower(d8, b0, b1));
    const auto w01u = hn::BitCast(d16, hn::InterleaveUpper(d8, b0, b1));
    const auto w23l = hn::BitCast(d16, hn::InterleaveLower(d8, b2, b3));
    const auto w23u = hn::BitCast(d16, hn::InterleaveUpper(d8, b2, b3));
    f[0] = hn::BitCast(df, hn::InterleaveLower(d16, w01l, w23l));
    f[1] = hn::BitCast(df, hn::InterleaveUpper(d16, w01l, w23l));
    f[2] = hn::BitCast(df, hn::InterleaveLower(d16, w01u, w23u));
    f[3] = hn::BitCast(df, hn::InterleaveUpper(d16, w01u, w23u));
}

// Byte planes of 16 16-bit entries (LD2).
struct Planes2 {
    VU8 lo, hi;
};

// The index bytes of the 32 elements packed in p[0, 16), in element order (element 2j is the high
// nibble of byte j): first = elements 0-15, second = 16-31.
HWY_INLINE void nibble_indices(const uint8_t* p, VU8& first, VU8& second) {
    const VU8 x = hn::LoadU(d8, p);
    const VU8 hi = hn::ShiftRight<4>(x), lo = hn::And(x, hn::Set(d8, 0x0F));
    first = hn::InterleaveLower(d8, hi, lo);
    second = hn::InterleaveUpper(d8, hi, lo);
}

// ------------------------------------------------------------------------------------------------
// Dequantize
// ------------------------------------------------------------------------------------------------

constexpr int64_t kGroup = 32;  // elements per dequantize step (16 packed bytes)

// lut[4m, 4m + 4) * scale, as the reference's mul_rn (x86's NaN bits; a finite scale cannot make one).
HWY_INLINE VF scaled_entries(const float* lut, int m, VF scale, bool finite) {
    const VF e = hn::LoadU(df, lut + 4 * m);
    return finite ? hn::Mul(e, scale) : MulX86Nan(df, e, scale);
}

// The 16 entries of a block as fp32 planes: Elem<float>::store(mul_rn(lut[j], scale)).
HWY_INLINE Planes4 block_planes_f32(const float* lut, float scale) {
    alignas(16) float entries[16];
    const VF s = hn::Set(df, scale);
    const bool finite = std::isfinite(scale);
    for (int m = 0; m < 4; ++m) hn::Store(scaled_entries(lut, m, s, finite), df, entries + 4 * m);
    return planes_f32(entries);
}

// The same rounded to T (fp16 / bf16), as byte planes of the 16-bit patterns.
template <class T>
HWY_INLINE Planes2 block_planes_16(const float* lut, float scale) {
    alignas(16) uint16_t entries[16];
    const VF s = hn::Set(df, scale);
    const bool finite = std::isfinite(scale);
    const hn::Rebind<uint16_t, decltype(df)> dh;
    for (int m = 0; m < 4; ++m) hn::Store(DemoteToBits<T>(df, scaled_entries(lut, m, s, finite)), dh, entries + 4 * m);
    VU8 lo, hi;
    hn::LoadInterleaved2(d8, reinterpret_cast<const uint8_t*>(entries), lo, hi);
    return Planes2{lo, hi};
}

template <class T>
HWY_INLINE std::conditional_t<std::is_same_v<T, float>, Planes4, Planes2> block_planes(const float* lut, float scale) {
    if constexpr (std::is_same_v<T, float>) return block_planes_f32(lut, scale);
    else return block_planes_16<T>(lut, scale);
}

// 16 elements of T from the block's planes, stored at o.
HWY_INLINE void store_16(const Planes4& t, VU8 idx, float* o) {
    VF f[4];
    lookup_f32(t, idx, f);
    for (int m = 0; m < 4; ++m) hn::StoreU(f[m], df, o + 4 * m);
}
HWY_INLINE void store_16(const Planes2& t, VU8 idx, uint16_t* o) {
    const VU8 lo = hn::TableLookupBytes(t.lo, idx), hi = hn::TableLookupBytes(t.hi, idx);
    hn::StoreU(hn::BitCast(d16, hn::InterleaveLower(d8, lo, hi)), d16, o);
    hn::StoreU(hn::BitCast(d16, hn::InterleaveUpper(d8, lo, hi)), d16, o + 8);
}

template <class T>
void dequantize_range(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize, int64_t i0,
                      int64_t i1, bool /*stream: NEON has no non-temporal store worth it here*/) {
    // Groups of 32 elements under one scale: blocks that are powers of two of at least a group;
    // other blocksizes go to the reference, which divides.
    if (blocksize < kGroup || (blocksize & (blocksize - 1)) != 0) {
        ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i0, i1);
        return;
    }
    const float* lut = ref::lut_4bit(qt);
    const int64_t head_end = std::min(i1, (i0 + kGroup - 1) / kGroup * kGroup);
    if (i0 < head_end) ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i0, head_end);
    int64_t i = head_end;
    const int64_t body_end = i + (i1 - i) / kGroup * kGroup;
    const int shift = __builtin_ctzll(static_cast<unsigned long long>(blocksize));
    using Planes = std::conditional_t<std::is_same_v<T, float>, Planes4, Planes2>;
    using Out = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;
    Out* o = reinterpret_cast<Out*>(out);
    if (i < body_end) {
        int64_t block = i >> shift;
        Planes t = block_planes<T>(lut, absmax[block]);
        for (; i < body_end; i += kGroup) {
            if ((i >> shift) != block) {
                block = i >> shift;
                t = block_planes<T>(lut, absmax[block]);
            }
            VU8 first, second;
            nibble_indices(A + i / 2, first, second);
            store_16(t, first, o + i);
            store_16(t, second, o + i + 16);
        }
    }
    if (i < i1) ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i, i1);
}

// ------------------------------------------------------------------------------------------------
// Quantize
// ------------------------------------------------------------------------------------------------

// The number of thresholds th[0, N) that y exceeds, per lane (NaN exceeds none): a compare gives
// all-ones (-1) where y > th, subtracted from the count.
template <int N>
HWY_INLINE VU32 count_above(VF y, const VF (&th)[N]) {
    VU32 c = hn::Zero(du32);
    for (int j = 0; j < N; ++j) c = hn::Sub(c, hn::BitCast(du32, hn::VecFromMask(df, hn::Gt(y, th[j]))));
    return c;
}

template <QuantType Q>
struct Thresholds {
    static constexpr int N = Q == QuantType::NF4 ? 15 : 7;
    VF t[N];
    Thresholds() {
        const float* src = Q == QuantType::NF4 ? kNf4Thresholds : kFp4MagnitudeThresholds;
        for (int j = 0; j < N; ++j) t[j] = hn::Set(df, src[j]);
    }
    // kbit_formats.h's index_4bit per lane.
    HWY_INLINE VU32 indices(VF y) const {
        if constexpr (Q == QuantType::NF4) {
            return count_above(y, t);
        } else {
            const VU32 c = count_above(hn::Abs(y), t);
            // count -> magnitude code {0,1,6,7,4,5,2,3}: flip bit 2 where bit 1 is set; sign 8 for y < 0
            const VU32 mag = hn::Xor(c, hn::ShiftLeft<1>(hn::And(c, hn::Set(du32, 2u))));
            return hn::Or(mag, hn::IfThenElseZero(hn::RebindMask(du32, hn::Lt(y, hn::Zero(df))), hn::Set(du32, 8u)));
        }
    }
};

// Blocks [b0, b1), all complete, blocksize a multiple of 8.
template <class T, QuantType Q>
void quantize_full_blocks(const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t b0, int64_t b1) {
    const Thresholds<Q> th;
    const hn::Full32<uint8_t> d4;
    for (int64_t b = b0; b < b1; ++b) {
        prefetch_quantize_4bit_input(A, blocksize, b, 1);
        const T* x = A + b * blocksize;
        uint8_t* o = out + b * blocksize / 2;
        const float amax = BlockAbsmax(df, x, blocksize, absmax_start(blocksize, blocksize));
        absmax[b] = amax;
        const VF r = hn::Set(df, 1.0f / amax);
        for (int64_t i = 0; i < blocksize; i += 8) {
            const VF v0 = LoadAsFloat(df, x + i), v1 = LoadAsFloat(df, x + i + 4);
            const VF even = hn::Mul(hn::ConcatEven(df, v1, v0), r);  // e0, e2, e4, e6 (UZP1)
            const VF odd = hn::Mul(hn::ConcatOdd(df, v1, v0), r);    // e1, e3, e5, e7 (UZP2)
            const VU32 bytes = hn::Or(hn::ShiftLeft<4>(th.indices(even)), th.indices(odd));
            hn::StoreU(hn::U8FromU32(bytes), d4, o + i / 2);
        }
    }
}

template <class T>
void quantize_blocks(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                     int64_t b0, int64_t b1) {
    // blocks [b0, full) are complete and of whole 8-element steps; the rest is the reference's
    const int64_t full = blocksize % 8 == 0 ? std::max(b0, std::min(b1, n / blocksize)) : b0;
    if (qt == QuantType::NF4) quantize_full_blocks<T, QuantType::NF4>(A, absmax, out, blocksize, b0, full);
    else quantize_full_blocks<T, QuantType::FP4>(A, absmax, out, blocksize, b0, full);
    if (full < b1) ref::quantize_4bit_blocks(qt, A, absmax, out, blocksize, n, full, b1);
}

// ------------------------------------------------------------------------------------------------
// Dot products (GEMV / GEMM)
// ------------------------------------------------------------------------------------------------

// A group is 32 elements = 16 packed bytes; its high nibbles (even elements) and low nibbles (odd
// elements) are looked up separately, so the activations are permuted once (prepare): within a
// group, the even elements first, then the odd ones.
constexpr int64_t kDotGroup = 32;

void prepare(const float* a, int64_t k, float* prepared) {
    const int64_t body = k / kDotGroup * kDotGroup;
    for (int64_t g = 0; g < body; g += kDotGroup)
        for (int64_t e = 0; e < kDotGroup; ++e) prepared[g + (e % 2) * (kDotGroup / 2) + e / 2] = a[g + e];
    for (int64_t e = body; e < k; ++e) prepared[e] = a[e];
}

// Whole groups of 32 in every block, rows that start a block.
bool supports(int64_t k, int64_t row_elems, int64_t blocksize) {
    return dot_4bit_simd_supports(k, row_elems, blocksize) && blocksize % kDotGroup == 0;
}

// Rows [r0, r1) for MT activation rows at once, NACC partial sums per activation row and block,
// each added times the block's scale to its own running total (one FMA); the totals meet at the end
// of the row. MT = 4: 16 accumulators beside the 4 planes, within NEON's 32 registers.
template <int MT>
void dot_rows_tile(const float* prepared, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
                   int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    constexpr int NACC = 2;
    const Planes4 planes = planes_f32(lut);
    const int64_t body = k / kDotGroup * kDotGroup;
    const int64_t groups_per_block = blocksize / kDotGroup;
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
        int64_t beta = base / blocksize;
        for (int64_t g = 0; g < body; g += kDotGroup) {
            const VU8 x = hn::LoadU(d8, w + g / 2);
            for (int half = 0; half < 2; ++half) {  // high nibbles (even elements), then low
                const VU8 idx = half == 0 ? hn::ShiftRight<4>(x) : hn::And(x, hn::Set(d8, 0x0F));
                VF f[4];
                lookup_f32(planes, idx, f);
                for (int t = 0; t < MT; ++t) {
                    const float* a = prepared + t * k + g + (kDotGroup / 2) * half;
                    for (int m = 0; m < 4; ++m)
                        acc[t][m % NACC] = hn::MulAdd(f[m], hn::LoadU(df, a + 4 * m), acc[t][m % NACC]);
                }
            }
            if (++in_block == groups_per_block) {
                in_block = 0;
                flush(hn::Set(df, scales[beta++]));
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

// ------------------------------------------------------------------------------------------------
// Overrides of the kernel tables (kernels_4bit.h)
// ------------------------------------------------------------------------------------------------

template <class T>
void OverrideQuant(Quant4bitKernels<T>& t) {
    t.quantize_blocks = &quantize_blocks<T>;
    t.dequantize_range = &dequantize_range<T>;
}
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(OverrideQuant);

void OverrideDot(Dot4bitKernels& t) { t = {kDotGroup, &supports, &prepare, &dot_rows}; }  // every slot

#endif  // KBIT_HWY_SIZED_KERNEL_TARGET && HWY_ARCH_ARM_A64
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
