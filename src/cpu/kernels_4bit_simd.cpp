// kernels_4bit_simd.cpp — the 4-bit quantizer and dequantizer for Highway's AVX2 and AVX3 (AVX-512)
// targets, one 256-bit source for both (AVX3 gains EVEX encodings and 32 registers; one source keeps
// the AVX-512 path right by construction). The dequantizer looks nibbles up with byte shuffles
// (pshufb) on 16-entry tables held in registers; the quantizer finds each code by a binary search over
// the format's thresholds. On AVX-512 the quantizer has a 512-bit form (kernels_4bit_quantize_avx512.cpp),
// which leaves this one the blocks it does not take.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "hwy_elem-inl.h"
#include "hwy_nibble_planes-inl.h"

#include <algorithm>
#include <type_traits>

#include "cpu_isa.h"
#include "kbit_dtype.h"
#include "kernels_4bit.h"
#include "ref_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if KBIT_HWY_KERNEL_TARGET

using DU32 = hn::Full256<uint32_t>;  // beside the vectors of hwy_nibble_planes-inl.h

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

// count + step in the lanes where v > threshold: one step of the binary searches below (NaN compares
// false and adds nothing).
HWY_INLINE hn::Vec<DU32> add_if_above(hn::Vec<DU32> count, VF v, VF threshold, uint32_t step) {
    const DU32 du;
    return hn::Add(count, hn::IfThenElseZero(hn::RebindMask(du, v > threshold), hn::Set(du, step)));
}

// NF4 index (number of thresholds exceeded) by a 4-step binary search; NaN compares false -> 0.
HWY_INLINE hn::Vec<DU32> nf4_indices(VF y, const SearchTables& st) {
    const DF df;
    const float* T = kNf4Thresholds;
    const auto m8 = (y > hn::Set(df, T[7]));
    auto idx = add_if_above(hn::Zero(DU32()), y, hn::Set(df, T[7]), 8);
    idx = add_if_above(idx, y, hn::IfThenElse(m8, hn::Set(df, T[11]), hn::Set(df, T[3])), 4);
    idx = add_if_above(idx, y, lookup4(st.nf4_t3, hn::ShiftRight<2>(idx)), 2);
    const auto half = hn::ShiftRight<1>(idx);
    return add_if_above(idx, y, hn::IfThenElse(m8, lookup4(st.nf4_t4_hi, half), lookup4(st.nf4_t4_lo, half)), 1);
}

// FP4: sign 8 for y < 0; magnitude code from the count c of sorted thresholds |y| exceeds.
HWY_INLINE hn::Vec<DU32> fp4_indices(VF y, const SearchTables& st) {
    const DF df;
    const DU32 du;
    const auto a = hn::Abs(y);
    const float* M = kFp4MagnitudeThresholds;
    const auto m4 = (a > hn::Set(df, M[3]));
    auto c = add_if_above(hn::Zero(du), a, hn::Set(df, M[3]), 4);
    c = add_if_above(c, a, hn::IfThenElse(m4, hn::Set(df, M[5]), hn::Set(df, M[1])), 2);
    c = add_if_above(c, a, lookup4(st.fp4_t3, hn::ShiftRight<1>(c)), 1);
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

// Blocks [b0, b1), all complete. The search tables are locals of this loop so that they stay in
// registers: GCC reloaded tables it could not prove unaliased by the code and absmax stores after
// every store.
template <class T, QuantType Q>
void quantize_full_blocks(const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t b0, int64_t b1) {
    const DF df;
    const SearchTables st;
    for (int64_t b = b0; b < b1; ++b) {
        prefetch_quantize_4bit_input(A, blocksize, b, 1);
        const T* x = A + b * blocksize;
        uint8_t* o = out + b * blocksize / 2;
        const float amax = BlockAbsmax(df, x, blocksize, absmax_start(blocksize, blocksize));
        absmax[b] = amax;
        const auto r = hn::Set(df, 1.0f / amax);
        for (int64_t i = 0; i < blocksize; i += 16) {
            VF even, odd;  // e0, e2, ..., e14 and e1, e3, ..., e15
            if constexpr (std::is_same_v<T, kbit_bf16>) {
                // As in the 512-bit quantizer: 16 bf16 are 8 dwords, split by a shift and a mask
                // (exact), where the two widening loads and the two cross-lane concatenations cost 4
                // shuffles.
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
// Overrides of the kernel table (kernels_4bit.h)
// ------------------------------------------------------------------------------------------------

template <class T>
void OverrideQuant(Quant4bitKernels<T>& t) {
    t.quantize_blocks = &quantize_blocks<T>;
    t.dequantize_range = &dequantize_range<T>;
}
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(OverrideQuant);

#endif  // KBIT_HWY_KERNEL_TARGET
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
