// kernels_4bit_simd.cpp — the 4-bit kernels for Highway's AVX2 and AVX3 (AVX-512) targets. Both
// targets compile the same 256-bit source (AVX3 gains EVEX encodings and 32 registers), except the
// quantizer, which is compute-bound and has a 512-bit form on AVX3 (a 32-bucket table in place of the
// threshold search, and the absmax of 16 small blocks at once); one source for the rest keeps the
// AVX-512 path right by construction. Nibble lookups use byte shuffles (pshufb) on 16-entry tables
// held in registers.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "hwy_elem-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_isa.h"
#include "kernels_4bit.h"
#include "ref_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if KBIT_HWY_KERNEL_TARGET

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::Full256<float>;
using DU32 = hn::Full256<uint32_t>;
using DI32 = hn::Full256<int32_t>;
using DU16 = hn::Full256<uint16_t>;
using DU8 = hn::Full256<uint8_t>;
using VF = hn::Vec<DF>;
using VU8 = hn::Vec<DU8>;

// ------------------------------------------------------------------------------------------------
// Nibble expansion. 16 packed bytes x0..x15 hold elements e0..e31 (e2j = high nibble of xj). The
// bytes are duplicated into both 128-bit blocks, rearranged by `arrange` (a byte shuffle within
// blocks), and split into high/low nibbles interleaved per block, giving one index byte per element
// in the order the table lookups below need.
// ------------------------------------------------------------------------------------------------

HWY_INLINE VU8 nibble_indices(const uint8_t* p, VU8 arrange) {
    const DU8 d8;
    const DU16 d16;
    const VU8 x = hn::TableLookupBytes(hn::LoadDup128(d8, p), arrange);
    const VU8 mask = hn::Set(d8, 0x0F);
    const VU8 hi = hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(d16, x))), mask);
    return hn::InterleaveLower(d8, hi, hn::And(x, mask));
}

// For fp32 lookups: block 0 holds e0-3, e8-11, e16-19, e24-27; block 1 e4-7, e12-15, e20-23,
// e28-31, so the byte-plane interleaves of lookup_f32 come out in element order.
HWY_INLINE VU8 arrange_f32() {
    alignas(32) static constexpr uint8_t k[32] = {0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0,
                                                  2, 3, 6, 7, 10, 11, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0};
    return hn::Load(DU8(), k);
}

// For 16-bit lookups: block 0 holds e0-7, e16-23; block 1 e8-15, e24-31.
HWY_INLINE VU8 arrange_16() {
    alignas(32) static constexpr uint8_t k[32] = {0, 1, 2, 3, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0,
                                                  4, 5, 6, 7, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0};
    return hn::Load(DU8(), k);
}

// A 16-entry fp32 table as 4 byte planes (plane k = byte k of every entry, duplicated per block).
struct Planes {
    VU8 p[4];
};

HWY_INLINE Planes make_planes(const float* table) {
    alignas(16) uint8_t bytes[4][16];
    for (int j = 0; j < 16; ++j) {
        uint32_t u;
        std::memcpy(&u, &table[j], 4);
        for (int k = 0; k < 4; ++k) bytes[k][j] = static_cast<uint8_t>(u >> (8 * k));
    }
    Planes planes;
    for (int k = 0; k < 4; ++k) planes.p[k] = hn::LoadDup128(DU8(), bytes[k]);
    return planes;
}

// Looks up 32 fp32 values through byte planes; f[m] receives 8 values. With indices from
// nibble_indices(arrange_f32()) f[m] holds elements 8m..8m+7 in order; for arbitrary index bytes,
// lane l of f[m] comes from index byte 16 * (l / 4) + 4 * m + l % 4.
HWY_INLINE void lookup_f32(const Planes& t, VU8 idx, VF f[4]) {
    const DU8 d8;
    const DU16 d16;
    const DF df;
    const auto p0 = hn::TableLookupBytes(t.p[0], idx), p1 = hn::TableLookupBytes(t.p[1], idx);
    const auto p2 = hn::TableLookupBytes(t.p[2], idx), p3 = hn::TableLookupBytes(t.p[3], idx);
    const auto w01l = hn::BitCast(d16, hn::InterleaveLower(d8, p0, p1));
    const auto w01u = hn::BitCast(d16, hn::InterleaveUpper(d8, p0, p1));
    const auto w23l = hn::BitCast(d16, hn::InterleaveLower(d8, p2, p3));
    const auto w23u = hn::BitCast(d16, hn::InterleaveUpper(d8, p2, p3));
    f[0] = hn::BitCast(df, hn::InterleaveLower(d16, w01l, w23l));
    f[1] = hn::BitCast(df, hn::InterleaveUpper(d16, w01l, w23l));
    f[2] = hn::BitCast(df, hn::InterleaveLower(d16, w01u, w23u));
    f[3] = hn::BitCast(df, hn::InterleaveUpper(d16, w01u, w23u));
}

// ------------------------------------------------------------------------------------------------
// Dequantize
// ------------------------------------------------------------------------------------------------

// 16 scaled table entries rounded to T, as two byte planes (low and high byte of each entry).
struct Planes16 {
    VU8 lo, hi;
};

template <class T>
HWY_INLINE Planes16 make_planes16(const float* lut, float scale) {
    const DF df;
    const DU8 d8;
    const auto s = hn::Set(df, scale);
    const auto h = hn::Combine(DU16(), DemoteToBits<T>(df, hn::Mul(hn::LoadU(df, lut + 8), s)),
                               DemoteToBits<T>(df, hn::Mul(hn::LoadU(df, lut), s)));  // entries 0-7 | 8-15
    alignas(32) static constexpr uint8_t split[32] = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                                      0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};
    // u64 lanes: lo(0-7), hi(0-7), lo(8-15), hi(8-15)
    const auto s64 = hn::BitCast(DU32(), hn::TableLookupBytes(hn::BitCast(d8, h), hn::Load(d8, split)));
    alignas(32) static constexpr int32_t lo_idx[8] = {0, 1, 4, 5, 0, 1, 4, 5};
    alignas(32) static constexpr int32_t hi_idx[8] = {2, 3, 6, 7, 2, 3, 6, 7};
    Planes16 p;
    p.lo = hn::BitCast(d8, hn::TableLookupLanes(s64, hn::SetTableIndices(DU32(), lo_idx)));
    p.hi = hn::BitCast(d8, hn::TableLookupLanes(s64, hn::SetTableIndices(DU32(), hi_idx)));
    return p;
}

constexpr int64_t kGroup = 32;  // elements per dequantize step (16 packed bytes)

template <class T>
void dequantize_range(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize, int64_t i0,
                      int64_t i1, bool stream) {
    // Groups of 32 elements under one scale: blocks that are powers of two of at least a group. Other
    // blocksizes (bitsandbytes' CPU names take any) go to the reference, which divides.
    if (blocksize < kGroup || (blocksize & (blocksize - 1)) != 0) {
        ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i0, i1);
        return;
    }
    const float* lut = ref::lut_4bit(qt);
    // Non-temporal stores need aligned vectors: group starts are then 32-byte aligned exactly when
    // `out` is.
    stream = stream && (reinterpret_cast<uintptr_t>(out) % 32 == 0);
    int64_t i = i0;
    const int64_t head_end = std::min(i1, (i0 + kGroup - 1) / kGroup * kGroup);
    if (i < head_end) ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i, head_end);
    i = head_end;
    const int64_t body_end = i + (i1 - i) / kGroup * kGroup;
    const int shift = __builtin_ctzll(static_cast<unsigned long long>(blocksize));  // a power of two
    if constexpr (std::is_same_v<T, float>) {
        const DF df;
        const Planes planes = make_planes(lut);
        const VU8 arrange = arrange_f32();
        for (; i < body_end; i += kGroup) {
            const auto scale = hn::Set(df, absmax[i >> shift]);
            VF f[4];
            lookup_f32(planes, nibble_indices(A + i / 2, arrange), f);
            for (int m = 0; m < 4; ++m) StoreOrStream(hn::Mul(f[m], scale), df, out + i + 8 * m, stream);
        }
    } else {
        using U = uint16_t;
        const hn::Full256<U> d16;
        const DU8 d8;
        const VU8 arrange = arrange_16();
        int64_t block = -1;
        Planes16 t{};
        U* o = reinterpret_cast<U*>(out);
        for (; i < body_end; i += kGroup) {
            if ((i >> shift) != block) {
                block = i >> shift;
                t = make_planes16<T>(lut, absmax[block]);
            }
            const VU8 idx = nibble_indices(A + i / 2, arrange);
            const VU8 lo = hn::TableLookupBytes(t.lo, idx), hi = hn::TableLookupBytes(t.hi, idx);
            StoreOrStream(hn::BitCast(d16, hn::InterleaveLower(d8, lo, hi)), d16, o + i, stream);
            StoreOrStream(hn::BitCast(d16, hn::InterleaveUpper(d8, lo, hi)), d16, o + i + 16, stream);
        }
    }
    if (i < i1) ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i, i1);
}

// ------------------------------------------------------------------------------------------------
// Quantize
// ------------------------------------------------------------------------------------------------

// Lookup of 4 floats (duplicated per 128-bit block) by bits 0-1 of each lane: vpermilps, which
// Highway 1.0.3 does not expose for 256-bit vectors, and which is much cheaper than the cross-block
// vpermps on current AMD cores.
HWY_INLINE VF lookup4(VF table, hn::Vec<DU32> idx) { return VF{_mm256_permutevar_ps(table.raw, idx.raw)}; }

HWY_INLINE VF dup4(float a, float b, float c, float d) {
    alignas(16) const float t[4] = {a, b, c, d};
    return hn::LoadDup128(DF(), t);
}

// Threshold tables of the binary searches, built once per call (keeps them in registers).
struct SearchTables {
    VF nf4_t3, nf4_t4_lo, nf4_t4_hi, fp4_t3;
    SearchTables() {
        const float* T = kNf4Thresholds;
        nf4_t3 = dup4(T[1], T[5], T[9], T[13]);
        nf4_t4_lo = dup4(T[0], T[2], T[4], T[6]);
        nf4_t4_hi = dup4(T[8], T[10], T[12], T[14]);
        const float* M = kFp4MagnitudeThresholds;
        fp4_t3 = dup4(M[0], M[2], M[4], M[6]);
    }
};

// NF4 index (number of thresholds exceeded) by a 4-step binary search; NaN compares false -> 0.
HWY_INLINE hn::Vec<DU32> nf4_indices(VF y, const SearchTables& st) {
    const DF df;
    const DU32 du;
    const float* T = kNf4Thresholds;
    const auto m8 = (y > hn::Set(df, T[7]));
    auto idx = hn::IfThenElseZero(hn::RebindMask(du, m8), hn::Set(du, 8));
    const auto t2 = hn::IfThenElse(m8, hn::Set(df, T[11]), hn::Set(df, T[3]));
    idx = hn::Add(idx, hn::IfThenElseZero(hn::RebindMask(du, (y > t2)), hn::Set(du, 4)));
    const auto t3 = lookup4(st.nf4_t3, hn::ShiftRight<2>(idx));
    idx = hn::Add(idx, hn::IfThenElseZero(hn::RebindMask(du, (y > t3)), hn::Set(du, 2)));
    const auto half = hn::ShiftRight<1>(idx);
    const auto t4 = hn::IfThenElse(m8, lookup4(st.nf4_t4_hi, half), lookup4(st.nf4_t4_lo, half));
    return hn::Add(idx, hn::IfThenElseZero(hn::RebindMask(du, (y > t4)), hn::Set(du, 1)));
}

// FP4: sign 8 for y < 0; magnitude code from the count c of sorted thresholds |y| exceeds.
HWY_INLINE hn::Vec<DU32> fp4_indices(VF y, const SearchTables& st) {
    const DF df;
    const DU32 du;
    const auto a = hn::Abs(y);
    const float* M = kFp4MagnitudeThresholds;
    const auto m4 = (a > hn::Set(df, M[3]));
    auto c = hn::IfThenElseZero(hn::RebindMask(du, m4), hn::Set(du, 4));
    const auto t2 = hn::IfThenElse(m4, hn::Set(df, M[5]), hn::Set(df, M[1]));
    c = hn::Add(c, hn::IfThenElseZero(hn::RebindMask(du, (a > t2)), hn::Set(du, 2)));
    const auto t3 = lookup4(st.fp4_t3, hn::ShiftRight<1>(c));
    c = hn::Add(c, hn::IfThenElseZero(hn::RebindMask(du, (a > t3)), hn::Set(du, 1)));
    // count -> code {0,1,6,7,4,5,2,3}: flip bit 2 where bit 1 is set
    const auto mag = hn::Xor(c, hn::ShiftLeft<1>(hn::And(c, hn::Set(du, 2))));
    const auto neg = hn::RebindMask(du, (y < hn::Zero(df)));
    return hn::Or(mag, hn::IfThenElseZero(neg, hn::Set(du, 8)));
}

template <QuantType Q>
HWY_INLINE hn::Vec<DU32> indices(VF y, const SearchTables& st) {
    if constexpr (Q == QuantType::NF4) return nf4_indices(y, st);
    else return fp4_indices(y, st);
}

#if HWY_TARGET == HWY_AVX3
// AVX-512: a bucket table instead of the 256-bit binary search. bucket(v) = round(v * scale +
// offset) cuts the searched range into at most 32 buckets narrower than the smallest gap between two
// thresholds (NF4: y in [-1, 1], gaps >= 0.080, buckets 1 / 15.49; FP4: |y| in [0, 1], gaps >=
// 0.083, buckets 1 / 31.49), so a bucket holds at most one threshold and
// index = low[b] + (v > thr[b] ? step[b] : 0): two or three vpermi2 look-ups, a compare and a masked
// add. The bucket is one FMA: fma(v, scale, offset + 1.5 * 2^23) lands where a float's ulp is 1, so
// its low mantissa bits are the rounded integer, and vpermi2 reads only the low 5 bits of each index
// (no conversion). The tables are derived from the thresholds with that same scalar FMA and bucket()
// is monotone, so every finite v gets the search's answer. NaN: the sum is the NaN y itself, whose
// low 5 bits are 0 where y came from a 16-bit element (the payload sits above bit 12), so its bucket
// is 0, whose low code is 0, and the compare is false: the search's 0; fp32 payloads may set those
// bits, so the fp32 path first makes NaN sums +0 (vfixupimmps). Inputs only reach |v| <= 1 + 2^-22
// from a finite 1 / absmax; blocks with 1 / absmax = inf keep the 256-bit search.
struct Buckets512 {
    static constexpr float kMagic = 0x1.8p23f;  // floats in [2^23, 2^24) are the integers
    __m512 thr_lo, thr_hi;     // thr[b]: the threshold inside bucket b, +inf where there is none
    // low[b]: the code of the smallest v of bucket b; step[b]: code(v > thr[b]) - low[b]. The second
    // pair of each is the first << 4, for the element that takes a byte's high nibble (no shift later).
    __m512i low_lo[2], low_hi[2], step_lo[2], step_hi[2];
    __m512i minus_step[2];     // NF4's unit step, negated (subtracted under the compare's mask): -1, -16
    __m512i sign[2];           // FP4's sign bit: 8, 0x80
    __m512 scale, addend;      // bucket(v) = the low bits of fma(v, scale, addend)
    bool valid = true;         // every bucket holds at most one threshold, v = +-(1 + 2^-22) in range

    // round(v * scale + offset) as the kernel computes it (exact where |v * scale + offset| < 2^22).
    static int bucket(float v, float scale, float offset) {
        const float sum = std::fma(v, scale, offset + kMagic), magic = kMagic;
        uint32_t s, m;
        std::memcpy(&s, &sum, sizeof s);
        std::memcpy(&m, &magic, sizeof m);
        return static_cast<int>(s) - static_cast<int>(m);
    }

    // code_of(c): the code of a v that exceeds exactly c of the ascending thresholds t[0, n);
    // lowest: -1 where v is signed (NF4), 0 for a magnitude (FP4); offset an integer.
    template <class CodeOf>
    Buckets512(const float* t, int n, float scale_, float offset_, float lowest, CodeOf code_of) {
        alignas(64) float thr[32];
        alignas(64) int32_t count[32] = {}, low[32], step[32] = {};
        for (float& x : thr) x = INFINITY;
        for (int i = 0; i < n; ++i) {
            const int b = bucket(t[i], scale_, offset_);
            valid = valid && b >= 0 && b < 32;
            if (!valid) break;
            if (b == bucket(std::nextafter(t[i], INFINITY), scale_, offset_)) {
                valid = valid && thr[b] == INFINITY;
                thr[b] = t[i];
            }
            for (int later = b + 1; later < 32; ++later) ++count[later];
        }
        for (int b = 0; b < 32; ++b) {
            low[b] = code_of(count[b]);
            if (thr[b] != INFINITY) step[b] = code_of(count[b] + 1) - low[b];
        }
        const float edge = 1.0f + 0x1p-22f;
        const int first = bucket(lowest * edge, scale_, offset_), last = bucket(edge, scale_, offset_);
        valid = valid && first >= 0 && last <= 31;
        thr_lo = _mm512_load_ps(thr);
        thr_hi = _mm512_load_ps(thr + 16);
        for (int high = 0; high < 2; ++high) {
            const int shift = 4 * high;
            low_lo[high] = _mm512_slli_epi32(_mm512_load_si512(low), shift);
            low_hi[high] = _mm512_slli_epi32(_mm512_load_si512(low + 16), shift);
            step_lo[high] = _mm512_slli_epi32(_mm512_load_si512(step), shift);
            step_hi[high] = _mm512_slli_epi32(_mm512_load_si512(step + 16), shift);
            minus_step[high] = _mm512_set1_epi32(-(1 << shift));
            sign[high] = _mm512_set1_epi32(8 << shift);
        }
        scale = _mm512_set1_ps(scale_);
        addend = _mm512_set1_ps(offset_ + kMagic);
    }

    // The code of each lane of v, << 4 where kHigh. kUnitStep: every step is 1 (NF4's code is the
    // count itself), one look-up fewer. kFp32: v may be a NaN with low payload bits.
    template <bool kUnitStep, bool kHigh, bool kFp32>
    HWY_INLINE __m512i index(__m512 v) const {
        __m512 sum = _mm512_fmadd_ps(v, scale, addend);
        // token QNaN -> +0 (response 8), every other class -> the value itself (response 1)
        if constexpr (kFp32) sum = _mm512_fixupimm_ps(sum, sum, _mm512_set1_epi32(0x11111118), 0);
        const __m512i b = _mm512_castps_si512(sum);
        const __mmask16 gt = _mm512_cmp_ps_mask(v, _mm512_permutex2var_ps(thr_lo, b, thr_hi), _CMP_GT_OQ);
        const __m512i low = _mm512_permutex2var_epi32(low_lo[kHigh], b, low_hi[kHigh]);
        if constexpr (kUnitStep) return _mm512_mask_sub_epi32(low, gt, low, minus_step[kHigh]);
        const __m512i step = _mm512_permutex2var_epi32(step_lo[kHigh], b, step_hi[kHigh]);
        return _mm512_mask_add_epi32(low, gt, low, step);
    }
};

const Buckets512& nf4_buckets() {
    static const Buckets512 b(kNf4Thresholds, 15, 15.49f, 16.0f, -1.0f, [](int c) { return c; });
    return b;
}

// FP4 code of a magnitude count c: {0, 1, 6, 7, 4, 5, 2, 3}; the sign (8) is added per lane.
const Buckets512& fp4_buckets() {
    static const Buckets512 b(kFp4MagnitudeThresholds, 7, 31.49f, 0.0f, 0.0f, [](int c) { return c ^ ((c & 2) << 1); });
    return b;
}

template <QuantType Q, bool kHigh, bool kFp32>
HWY_INLINE __m512i indices512(__m512 y, const Buckets512& s) {
    if constexpr (Q == QuantType::NF4) {
        return s.index<true, kHigh, kFp32>(y);
    } else {
        const __m512i mag = s.index<false, kHigh, kFp32>(_mm512_abs_ps(y));
        const __mmask16 neg = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ);
        return _mm512_mask_or_epi32(mag, neg, mag, s.sign[kHigh]);
    }
}

HWY_INLINE __m512 load16_as_float(const float* p) { return _mm512_loadu_ps(p); }
HWY_INLINE __m512 load16_as_float(const kbit_half* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The packed bytes of 32 elements at x scaled by r: byte k (elements 2k, 2k + 1) in the low byte of
// dword lane k.
template <class T, QuantType Q>
HWY_INLINE __m512i codes32(const T* x, __m512 r, const Buckets512& s) {
    __m512 even, odd;
    if constexpr (std::is_same_v<T, kbit_bf16>) {
        // 32 bf16 in one vector: as 16 dwords, element 2k is the low half of dword k and 2k + 1 the
        // high half, so a shift and a mask give both halves as fp32 (exact), in order, without the
        // widening loads and the two permutes.
        const __m512i w = _mm512_loadu_si512(x);
        even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
        odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    } else {
        // Lanes 0-15 of the concatenation (v0, v1): even elements, then odd ones.
        const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        const __m512 v0 = load16_as_float(x), v1 = load16_as_float(x + 16);
        even = _mm512_permutex2var_ps(v0, even_lanes, v1);
        odd = _mm512_permutex2var_ps(v0, odd_lanes, v1);
    }
    constexpr bool kFp32 = std::is_same_v<T, float>;
    return _mm512_or_si512(indices512<Q, true, kFp32>(_mm512_mul_ps(even, r), s),
                           indices512<Q, false, kFp32>(_mm512_mul_ps(odd, r), s));
}

// The bytes of four codes32 results (64 bytes, in order): two dword and one word saturating packs
// (values are 0-255) leave 128-bit lane l holding c0's bytes 4l..4l+3, then c1's, c2's, c3's; one
// dword permutation transposes that. 4 shuffle uops where four vpmovdb take 8.
HWY_INLINE __m512i pack4(__m512i c0, __m512i c1, __m512i c2, __m512i c3) {
    const __m512i bytes = _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), bytes);
}

// The codes of `vectors` runs of 32 elements from x to o (16 bytes each); run j scaled by r_of(j),
// a broadcast 1 / absmax of its block.
template <class T, QuantType Q, class ROf>
HWY_INLINE void codes512(const T* x, uint8_t* o, int64_t vectors, const Buckets512& s, ROf r_of) {
    int64_t j = 0;
    for (; j + 4 <= vectors; j += 4) {
        const __m512i c0 = codes32<T, Q>(x + 32 * j, r_of(j), s);
        const __m512i c1 = codes32<T, Q>(x + 32 * j + 32, r_of(j + 1), s);
        const __m512i c2 = codes32<T, Q>(x + 32 * j + 64, r_of(j + 2), s);
        const __m512i c3 = codes32<T, Q>(x + 32 * j + 96, r_of(j + 3), s);
        _mm512_storeu_si512(o + 16 * j, pack4(c0, c1, c2, c3));
    }
    for (; j < vectors; ++j)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * j), _mm512_cvtepi32_epi8(codes32<T, Q>(x + 32 * j, r_of(j), s)));
}
#endif  // HWY_TARGET == HWY_AVX3

// How far ahead of each block its input is prefetched. The hardware prefetchers alone kept a cold
// 4096x4096 NF4 quantize at 7.0 ms for bf16 inputs (31% of its limit, one Sapphire Rapids core);
// with it 4.6-5.0 ms (1, 2, 4 and 8 KB ahead measured alike). Prefetches never fault.
constexpr int64_t kQuantizePrefetchBytes = 2048;

#if HWY_TARGET == HWY_AVX3
// The absmax of 16 consecutive small blocks of 16-bit values at once (AVX-512). Per block a few
// 512-bit max steps on the magnitude bits (BlockAbsmax's rule: no conversion, exact), then one
// transposing tree of unpacks and maxima folds the 16 blocks' vectors into 16 words (~3 uops per
// block, against ~12 for a horizontal max of each block on its own), and one division gives all 16
// 1/absmax. Only for blocks of 32 and 64 elements (64 is bitsandbytes' and `kbit quantize`'s
// default): bf16 NF4 on one Sapphire Rapids core, ns per element, blocksize 32: 0.247 -> 0.185,
// 64: 0.198 -> 0.166, 128: 0.174 -> 0.178, 256: 0.154 -> 0.178 (the group's 16 blocks are then
// read twice from further away than one block's).
constexpr int64_t kGroupedAbsmaxMaxBlocksize = 64;

// 16 vectors of 32 words (block j's partial maxima in v[j]) -> 16 words, block j's max in word j:
// 16-bit unpacks pair the blocks, then 32-bit and 64-bit unpacks, then the 128-bit lanes (the
// unpacks' interleaving leaves the blocks in order; a wrong order fails every absmax test).
HWY_INLINE __m256i fold_16_blocks(__m512i v[16]) {
    __m512i t[8], u[4], w[2];
    for (int j = 0; j < 8; ++j)
        t[j] = _mm512_max_epu16(_mm512_unpacklo_epi16(v[2 * j], v[2 * j + 1]), _mm512_unpackhi_epi16(v[2 * j], v[2 * j + 1]));
    for (int j = 0; j < 4; ++j)
        u[j] = _mm512_max_epu16(_mm512_unpacklo_epi32(t[2 * j], t[2 * j + 1]), _mm512_unpackhi_epi32(t[2 * j], t[2 * j + 1]));
    for (int j = 0; j < 2; ++j)
        w[j] = _mm512_max_epu16(_mm512_unpacklo_epi64(u[2 * j], u[2 * j + 1]), _mm512_unpackhi_epi64(u[2 * j], u[2 * j + 1]));
    // w[j]'s four 128-bit lanes each hold 8 blocks' words: fold the lanes (0 with 1, 2 with 3, then pairs).
    const __m512i x = _mm512_max_epu16(_mm512_shuffle_i32x4(w[0], w[1], 0x88), _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
    const __m512i y = _mm512_max_epu16(x, _mm512_shuffle_i32x4(x, x, 0xB1));
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(y, y, 0x08));  // lanes 0 and 2: blocks 0-7, 8-15
}

// absmax[j] and rs[j] = 1 / absmax[j] of the 16 blocks from x; false if a block holds a NaN (its
// absmax then takes the fp32 fold, which skips NaN: the caller's per-block path).
template <class T>
HWY_INLINE bool absmax_16_blocks(const T* x, int64_t blocksize, float* absmax, float* rs) {
    const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(x);
    __m512i v[16];
    for (int j = 0; j < 16; ++j) {
        const uint16_t* p = bits + j * blocksize;
        __m512i m = _mm512_and_si512(_mm512_loadu_si512(p), magnitude);
        for (int64_t i = 32; i < blocksize; i += 32) m = _mm512_max_epu16(m, _mm512_and_si512(_mm512_loadu_si512(p + i), magnitude));
        v[j] = m;
    }
    const __m256i words = fold_16_blocks(v);
    if (_mm256_cmpgt_epu16_mask(words, _mm256_set1_epi16(static_cast<short>(kInfinityBits<T>))) != 0) return false;
    const __m512 amax = std::is_same_v<T, kbit_half>
                            ? _mm512_cvtph_ps(words)
                            : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), 16));
    _mm512_storeu_ps(absmax, amax);
    _mm512_storeu_ps(rs, _mm512_div_ps(_mm512_set1_ps(1.0f), amax));
    return true;
}
#endif

// Blocks [b0, b1), all complete. The search tables are locals of this loop so that they stay in
// registers: the code and absmax stores may alias a table in memory (the static AVX-512 ones when
// used through a reference), which made GCC reload the tables after every store.
template <class T, QuantType Q>
void quantize_full_blocks(const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t b0, int64_t b1) {
    const DF df;
    const SearchTables st;
#if HWY_TARGET == HWY_AVX3
    const Buckets512 s = Q == QuantType::NF4 ? nf4_buckets() : fp4_buckets();
    const bool vectors512 = blocksize % 32 == 0 && s.valid;
#endif
    // Block b's codes from its 1 / absmax.
    auto codes = [&](int64_t b, float rs) {
        const T* x = A + b * blocksize;
        uint8_t* o = out + b * blocksize / 2;
#if HWY_TARGET == HWY_AVX3
        if (vectors512 && !std::isinf(rs)) {
            const __m512 r = _mm512_set1_ps(rs);
            codes512<T, Q>(x, o, blocksize / 32, s, [&](int64_t) { return r; });
            return;
        }
#endif
        const auto r = hn::Set(df, rs);
        for (int64_t i = 0; i < blocksize; i += 16) {
            VF even, odd;  // e0, e2, ..., e14 and e1, e3, ..., e15
            if constexpr (std::is_same_v<T, kbit_bf16>) {
                // As in the 512-bit loop: 16 bf16 are 8 dwords, split by a shift and a mask (exact),
                // where the two widening loads and the two cross-lane concatenations cost 4 shuffles.
                const DU32 du;
                const auto w = hn::BitCast(du, hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(x + i)));
                even = hn::BitCast(df, hn::ShiftLeft<16>(w));
                odd = hn::BitCast(df, hn::And(w, hn::Set(du, 0xFFFF0000u)));
            } else {
                const auto v0 = LoadAsFloat(df, x + i), v1 = LoadAsFloat(df, x + i + 8);
                even = hn::ConcatEven(df, v1, v0);
                odd = hn::ConcatOdd(df, v1, v0);
            }
            even = hn::Mul(even, r);
            odd = hn::Mul(odd, r);
            const auto bytes = hn::Or(hn::ShiftLeft<4>(indices<Q>(even, st)), indices<Q>(odd, st));
            hn::StoreU(hn::U8FromU32(bytes), hn::Full64<uint8_t>(), o + i / 2);
        }
    };
    auto prefetch = [&](int64_t b, int64_t count) {
        const char* x = reinterpret_cast<const char*>(A + b * blocksize);
        for (int64_t off = 0; off < count * blocksize * static_cast<int64_t>(sizeof(T)); off += 64)
            hwy::Prefetch(x + kQuantizePrefetchBytes + off);
    };
    auto block_absmax = [&](int64_t b) {
        return absmax[b] = BlockAbsmax(df, A + b * blocksize, blocksize, absmax_start(blocksize, blocksize));
    };
    auto one_block = [&](int64_t b) { codes(b, 1.0f / block_absmax(b)); };
    int64_t b = b0;
#if HWY_TARGET == HWY_AVX3
    // Blocks of 32 or 64 elements 16 at a time: their codes in one run, so that the packing of four
    // vectors' codes (pack4) spans blocks.
    if (vectors512 && blocksize <= kGroupedAbsmaxMaxBlocksize) {
        alignas(64) float rs[16];
        const int per_block = blocksize == 64 ? 1 : 0;  // log2 of the 32-element runs per block
        for (; b + 16 <= b1; b += 16) {
            prefetch(b, 16);
            if constexpr (sizeof(T) == 2) {
                if (!absmax_16_blocks(A + b * blocksize, blocksize, absmax + b, rs)) {  // a NaN among them
                    for (int j = 0; j < 16; ++j) one_block(b + j);
                    continue;
                }
            } else {
                for (int j = 0; j < 16; ++j) rs[j] = 1.0f / block_absmax(b + j);
            }
            if (_mm512_cmp_ps_mask(_mm512_load_ps(rs), _mm512_set1_ps(INFINITY), _CMP_EQ_OQ) == 0) {
                codes512<T, Q>(A + b * blocksize, out + b * blocksize / 2, 16 << per_block, s,
                               [&](int64_t j) { return _mm512_set1_ps(rs[j >> per_block]); });
            } else {  // a zero block among them: block by block (codes takes the search for it)
                for (int j = 0; j < 16; ++j) codes(b + j, rs[j]);
            }
        }
    }
#endif
    for (; b < b1; ++b) {
        prefetch(b, 1);
        one_block(b);
    }
}

template <class T>
void quantize_blocks(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                     int64_t b0, int64_t b1) {
    const int64_t full = std::min(b1, n / blocksize);  // blocks [b0, full) are complete
    if (qt == QuantType::NF4) quantize_full_blocks<T, QuantType::NF4>(A, absmax, out, blocksize, b0, full);
    else quantize_full_blocks<T, QuantType::FP4>(A, absmax, out, blocksize, b0, full);
    if (std::max(b0, full) < b1) ref::quantize_4bit_blocks(qt, A, absmax, out, blocksize, n, std::max(b0, full), b1);
}

// ------------------------------------------------------------------------------------------------
// 4-bit dot products (GEMV / GEMM). A group is 64 elements = 32 packed bytes; its high nibbles
// (even elements) and low nibbles (odd elements) are looked up separately without rearranging, so
// the activations are permuted once instead (prepare).
// ------------------------------------------------------------------------------------------------

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
            float sum = hn::GetLane(hn::SumOfLanes(df, sum_v));
            // Elements past the last whole group (k % 64), in order, one scale per block run.
            const float* a = prepared + t * k;
            int64_t kk = body;
            while (kk < k) {
                const int64_t b = (base + kk) / blocksize;
                const int64_t run_end = std::min(k, (b + 1) * blocksize - base);
                float partial = 0.0f;
                for (; kk < run_end; ++kk) partial += a[kk] * lut[nibble_at(B, base + kk)];
                sum += partial * scales[b];
            }
            sums[t * ldo + r] = sum;
        }
    }
}

void dot_rows(const float* prepared, int M, int64_t k, const uint8_t* B, int64_t row_elems, const float* scales,
              int64_t blocksize, const float* lut, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    int t = 0;
    for (; t + 4 <= M; t += 4)
        dot_rows_tile<4>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
    for (; t + 2 <= M; t += 2)
        dot_rows_tile<2>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
    for (; t < M; ++t)
        dot_rows_tile<1>(prepared + t * k, k, B, row_elems, scales, blocksize, lut, r0, r1, sums + t * ldo, ldo);
}

// ------------------------------------------------------------------------------------------------
// Overrides of the kernel tables (kernels_4bit.h)
// ------------------------------------------------------------------------------------------------

template <class T>
void OverrideQuant(Quant4bitKernels<T>& t) {
    t.quantize_blocks = &quantize_blocks<T>;
    t.dequantize_range = &dequantize_range<T>;
}
template void OverrideQuant<float>(Quant4bitKernels<float>&);
template void OverrideQuant<kbit_half>(Quant4bitKernels<kbit_half>&);
template void OverrideQuant<kbit_bf16>(Quant4bitKernels<kbit_bf16>&);

void OverrideDot(Dot4bitKernels& t) {
    t.group = kDotGroup;
    t.supports = &dot_4bit_simd_supports;
    t.prepare = &prepare;
    t.dot_rows = &dot_rows;
}

#endif  // KBIT_HWY_KERNEL_TARGET
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
