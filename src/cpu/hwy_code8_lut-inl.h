// hwy_code8_lut-inl.h — the 8-bit code search through a Code8Lut (kbit_code8_lut.h) on Highway
// lanes, shared by the blockwise quantizer and the optimizers. A caller stores the bucket keys of a
// run of values (StoreCode8Keys), then Code8Codes looks the buckets up and writes the codes; lanes
// whose bucket is irregular are left to the caller's search.
//
// The look-ups are a pass of plain loads between vector passes over L1 buffers, not vpgatherdd:
// gathers cost 0.8 ns per element on the Zen 3 we measured, and GCC turns the plain loop into
// scalar loads inserted into vectors (25% faster than scalar stores; the optimizers' step got 15%
// faster than with gathers). Included after <hwy/highway.h>, once per target.
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
namespace kbit::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// codes[j] = the table's answer for keys j < count (a multiple of Lanes(df)); entries[j] keeps each
// bucket's entry. Returns whether any of them is irregular (entries[j] & Code8Lut::kIrregular): those
// codes are for the caller to overwrite with the search.
template <class DF>
HWY_INLINE bool Code8Codes(DF, const Code8Lut& lut, const uint32_t* buckets, const uint32_t* ranks,
                           uint32_t* entries, uint8_t* codes, size_t count) {
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint8_t, DF> d8;
    const uint32_t* table = lut.entries();
    // Buckets read in pairs (one load fewer per two values); eight at a time so that GCC assembles
    // the entries in a vector and stores them once (count is a multiple of 8 on every target).
    for (size_t j = 0; j < count; j += 8) {
        uint64_t pairs[4];
        std::memcpy(pairs, buckets + j, sizeof pairs);
        for (int k = 0; k < 4; ++k) {
            entries[j + 2 * k] = table[static_cast<uint32_t>(pairs[k])];
            entries[j + 2 * k + 1] = table[pairs[k] >> 32];
        }
    }
    auto any = hn::Zero(du);  // bit 31: an irregular bucket
    for (size_t j = 0; j < count; j += hn::Lanes(du)) {
        const auto sum = hn::Add(hn::Load(du, entries + j), hn::Load(du, ranks + j));
        any = hn::Or(any, sum);
        hn::StoreU(hn::U8FromU32(hn::ShiftRight<16>(sum)), d8, codes + j);
    }
    return !hn::AllFalse(di, hn::Lt(hn::BitCast(di, any), hn::Zero(di)));
}

}  // namespace HWY_NAMESPACE
}  // namespace kbit::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
