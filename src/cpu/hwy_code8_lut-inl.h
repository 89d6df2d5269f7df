// hwy_code8_lut-inl.h — the 8-bit code search through a Code8Lut (kbit_code8_lut.h) on Highway
// lanes, shared by the blockwise quantizer and the optimizers: Code8CodesOf writes the codes of a
// run of values; lanes whose bucket is irregular are left to the caller's search.
//
// On AVX2 the look-ups are plain loads that GCC assembles into vectors (LookupCode8,
// LookupCode8Entries), not vpgatherdd: gathers cost 0.8 ns per element on the Zen 3 we measured. The
// bucket keys go through an L1 buffer because a GPR cannot take them from a vector register cheaply
// (vmovq/vpextrq measured slower than the store and reload). On AVX-512 both look-ups are gathers
// (LookupCode8, Code8Sums): 0.15 ns per element on the Sapphire Rapids guest we measured, against
// 0.54 for 16 assembled loads; not yet measured on Zen 4/5. Included after <hwy/highway.h>, once
// per target.
#if defined(KBIT_CPU_HWY_CODE8_LUT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KBIT_CPU_HWY_CODE8_LUT_INL_H_
#undef KBIT_CPU_HWY_CODE8_LUT_INL_H_
#else
#define KBIT_CPU_HWY_CODE8_LUT_INL_H_
#endif

#include <hwy/highway.h>

#include <cstring>

#include "kbit_code8_lut.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// code[c[k]] for the Lanes(df) codes at c. AVX2: GCC assembles the lanes from scalar loads, 1.5x
// faster than a vector gather on the Zen 3 we measured (microcoded there). AVX-512: one gather, which
// made 8-bit Adam 1.2x faster on Sapphire Rapids.
template <class DF>
HWY_INLINE hn::Vec<DF> LookupCode8(DF df, const float* code, const uint8_t* c) {
#if HWY_TARGET <= HWY_AVX3
    const hn::RebindToSigned<DF> di;
    return hn::GatherIndex(df, code, hn::PromoteTo(di, hn::LoadU(hn::Rebind<uint8_t, DF>(), c)));
#else
    HWY_ALIGN float lanes[hn::MaxLanes(df)];
    for (size_t k = 0; k < hn::Lanes(df); ++k) lanes[k] = code[c[k]];
    return hn::Load(df, lanes);
#endif
}

// In-block byte shuffles for Code8Codes: byte 2 of each 32-bit lane of a block to bytes 4k .. 4k + 3
// (vector k of four), every other byte zero (index bit 7).
alignas(16) constexpr uint8_t kCode8Pick[4][16] = {
    {2, 6, 10, 14, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128},
    {128, 128, 128, 128, 2, 6, 10, 14, 128, 128, 128, 128, 128, 128, 128, 128},
    {128, 128, 128, 128, 128, 128, 128, 128, 2, 6, 10, 14, 128, 128, 128, 128},
    {128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 2, 6, 10, 14}};

// Code8Lut::bucket and Code8Lut::rank of each lane of y, at buckets and ranks.
template <class DF>
HWY_INLINE void StoreCode8Keys(DF, hn::Vec<DF> y, uint32_t* buckets, uint32_t* ranks) {
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto u = hn::BitCast(du, y);
    const auto flip = hn::BitCast(du, hn::BroadcastSignBit(hn::BitCast(di, u)));
    hn::Store(hn::ShiftRight<16>(u), du, buckets);
    hn::Store(hn::And(hn::Xor(u, flip), hn::Set(du, 0xFFFFu)), du, ranks);
}

// Code8Lut::entries for the Lanes(du) bucket keys at buckets: plain loads (bucket keys read in pairs,
// one load fewer per two), assembled into a vector by GCC.
template <class DU>
HWY_INLINE hn::Vec<DU> LookupCode8Entries(DU du, const uint32_t* table, const uint32_t* buckets) {
    HWY_ALIGN uint32_t lanes[hn::MaxLanes(du)];
    for (size_t k = 0; k < hn::Lanes(du); k += 2) {
        uint64_t pair;
        std::memcpy(&pair, buckets + k, sizeof pair);
        lanes[k] = table[static_cast<uint32_t>(pair)];
        lanes[k + 1] = table[pair >> 32];
    }
    return hn::Load(du, lanes);
}

// Whether any of the sums OR-ed into `any` came from an irregular bucket (bit 31).
template <class DU>
HWY_INLINE bool AnyIrregular(DU, hn::Vec<DU> any) {
    const hn::RebindToSigned<DU> di;
    return !hn::AllFalse(di, hn::Lt(hn::BitCast(di, any), hn::Zero(di)));
}

// codes[j] = the table's answer for keys j < count (a multiple of Lanes(df)). Returns whether any
// bucket was irregular: those codes are for the caller to overwrite with the search (the lanes whose
// Code8Lut::find is negative).
template <class DF>
HWY_INLINE bool Code8Codes(DF, const Code8Lut& lut, const uint32_t* buckets, const uint32_t* ranks, uint8_t* codes,
                           size_t count) {
    const hn::RebindToUnsigned<DF> du;
    const hn::Rebind<uint8_t, DF> d8;
    const uint32_t* table = lut.entries();
    auto any = hn::Zero(du);  // bit 31: an irregular bucket
    const size_t N = hn::Lanes(du);
    size_t j = 0;
    if (count >= 4 * N) {
        // Four vectors of sums at a time: the code is byte 2 of each sum, so one in-block byte
        // shuffle per vector puts its codes in their own quarter of each 128-bit block, and one lane
        // permutation orders the quarters (instead of a shift and a narrowing per vector).
        const hn::Repartition<uint8_t, decltype(du)> db;
        HWY_ALIGN uint32_t order[hn::MaxLanes(du)];
        const size_t blocks = N / 4;
        for (size_t t = 0; t < N; ++t) order[t] = static_cast<uint32_t>((t % blocks) * 4 + t / blocks);
        const auto indices = hn::SetTableIndices(du, order);
        const auto pick0 = hn::LoadDup128(db, kCode8Pick[0]), pick1 = hn::LoadDup128(db, kCode8Pick[1]);
        const auto pick2 = hn::LoadDup128(db, kCode8Pick[2]), pick3 = hn::LoadDup128(db, kCode8Pick[3]);
        for (; j + 4 * N <= count; j += 4 * N) {
            const auto s0 = hn::Add(LookupCode8Entries(du, table, buckets + j), hn::Load(du, ranks + j));
            const auto s1 = hn::Add(LookupCode8Entries(du, table, buckets + j + N), hn::Load(du, ranks + j + N));
            const auto s2 =
                hn::Add(LookupCode8Entries(du, table, buckets + j + 2 * N), hn::Load(du, ranks + j + 2 * N));
            const auto s3 =
                hn::Add(LookupCode8Entries(du, table, buckets + j + 3 * N), hn::Load(du, ranks + j + 3 * N));
            any = hn::Or(any, hn::Or(hn::Or(s0, s1), hn::Or(s2, s3)));
            const auto b01 = hn::Or(hn::TableLookupBytesOr0(hn::BitCast(db, s0), pick0),
                                    hn::TableLookupBytesOr0(hn::BitCast(db, s1), pick1));
            const auto b23 = hn::Or(hn::TableLookupBytesOr0(hn::BitCast(db, s2), pick2),
                                    hn::TableLookupBytesOr0(hn::BitCast(db, s3), pick3));
            const auto quarters = hn::BitCast(du, hn::Or(b01, b23));
            hn::StoreU(hn::BitCast(db, hn::TableLookupLanes(quarters, indices)), db, codes + j);
        }
    }
    for (; j < count; j += N) {
        const auto sum = hn::Add(LookupCode8Entries(du, table, buckets + j), hn::Load(du, ranks + j));
        any = hn::Or(any, sum);
        hn::StoreU(hn::U8FromU32(hn::ShiftRight<16>(sum)), d8, codes + j);
    }
    return AnyIrregular(du, any);
}

#if HWY_TARGET <= HWY_AVX3
// AVX-512: the bucket entries come from one vpgatherdd per vector instead. On the Sapphire Rapids
// guest we measured, it made the blockwise quantizer 1.5x (fp32) to 1.9x (bf16) faster than the
// stored keys and assembled loads above, whose ~15 shuffle uops per vector compete for port 5.

// Code8Lut's sums for the lanes of y: the code in bits 16-23, bit 31 set where the bucket is
// irregular (see Code8Lut::find).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Code8Sums(DF, const uint32_t* table, hn::Vec<DF> y) {
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto u = hn::BitCast(du, y);
    const auto flip = hn::BitCast(du, hn::BroadcastSignBit(hn::BitCast(di, u)));
    const auto entries = hn::GatherIndex(du, table, hn::BitCast(di, hn::ShiftRight<16>(u)));
    return hn::Add(entries, hn::And(hn::Xor(u, flip), hn::Set(du, 0xFFFFu)));
}

// The codes of Lanes(du) sums at codes; an irregular lane's byte is for the caller to overwrite.
// Byte 2 of each lane straight from the sums: vpshufb collects them per 128-bit block, vpermd the
// four blocks (one shift fewer than TruncateTo of sums >> 16, on the shift port the search loops
// are short of).
template <class DU>
HWY_INLINE void StoreCode8Sums(DU, hn::Vec<DU> sums, uint8_t* codes) {
    static_assert(hn::MaxLanes(DU()) == 16, "512-bit vectors");
    const __m512i byte2 = _mm512_set4_epi32(-1, -1, -1, 0x0E0A0602);  // lanes 2, 6, 10, 14; zero
    const __m512i blocks = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i picked = _mm512_permutexvar_epi32(blocks, _mm512_shuffle_epi8(sums.raw, byte2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm512_castsi512_si128(picked));
}
#endif

// The codes of count values (a multiple of Lanes(df), at most kCode8MaxRun) at codes, from the
// table; y_at(j) gives the vector of values j .. j + Lanes(df) - 1. Returns whether any bucket was
// irregular: those codes are for the caller to overwrite with the search (the lanes whose
// Code8Lut::find is negative). AVX-512 gathers the entries (Code8Sums); AVX2 stores the keys, then
// assembles the entries from plain loads (Code8Codes).
constexpr size_t kCode8MaxRun = 512;  // the AVX2 key buffers: 4 KiB, in L1
template <class DF, class YAt>
HWY_INLINE bool Code8CodesOf(DF df, const Code8Lut& lut, size_t count, YAt y_at, uint8_t* codes) {
    const size_t N = hn::Lanes(df);
#if HWY_TARGET <= HWY_AVX3
    const hn::RebindToUnsigned<DF> du;
    auto any = hn::Zero(du);
    for (size_t j = 0; j < count; j += N) {
        const auto sums = Code8Sums(df, lut.entries(), y_at(j));
        any = hn::Or(any, sums);
        StoreCode8Sums(du, sums, codes + j);
    }
    return AnyIrregular(du, any);
#else
    HWY_ALIGN uint32_t buckets[kCode8MaxRun], ranks[kCode8MaxRun];
    for (size_t j = 0; j < count; j += N) StoreCode8Keys(df, y_at(j), buckets + j, ranks + j);
    return Code8Codes(df, lut, buckets, ranks, codes, count);
#endif
}

}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
