// hwy_nibble_planes-inl.h — 16-entry fp32 tables looked up by 4-bit index bytes on 256-bit vectors,
// shared by the 4-bit dequantizer (kernels_4bit_simd.cpp) and the AVX2 dot kernels
// (kernels_4bit_dot_avx2.cpp): the table as four byte planes in registers, one byte shuffle (pshufb)
// per plane for 32 indices, and byte / word interleaves that reassemble the fp32 values. Included
// after <hwy/highway.h>, once per target (the guard toggles with HWY_TARGET); defined for the kernel
// targets only (KBIT_HWY_KERNEL_TARGET).
#if defined(KBIT_CPU_HWY_NIBBLE_PLANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KBIT_CPU_HWY_NIBBLE_PLANES_INL_H_
#undef KBIT_CPU_HWY_NIBBLE_PLANES_INL_H_
#else
#define KBIT_CPU_HWY_NIBBLE_PLANES_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "cpu_isa.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if KBIT_HWY_KERNEL_TARGET
namespace hn = hwy::HWY_NAMESPACE;

// The 256-bit vectors of these lookups, and of the kernels that use them.
using DF = hn::Full256<float>;
using DU16 = hn::Full256<uint16_t>;
using DU8 = hn::Full256<uint8_t>;
using VF = hn::Vec<DF>;
using VU8 = hn::Vec<DU8>;

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

// Looks up 32 fp32 values through byte planes; f[m] receives 8 values: lane l of f[m] comes from index
// byte 16 * (l / 4) + 4 * m + l % 4 (the dequantizer arranges its index bytes so that f[m] holds
// elements 8m..8m+7 in order).
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

#endif  // KBIT_HWY_KERNEL_TARGET
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
