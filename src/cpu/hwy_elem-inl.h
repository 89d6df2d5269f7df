// hwy_elem-inl.h — kbit's element types on Highway lanes: fp32 / fp16 / bf16 loaded as fp32 lanes and
// stored from them with one round-to-nearest-even step, NaN quietened exactly as the scalar
// Elem<T> / float_to_half / float_to_bf16 of kbit_half.h, so SIMD and scalar paths agree bit for bit.
// Also the quantizers' NaN-ignoring block absmax. Included by each Highway kernel file after
// <hwy/highway.h>, once per target (the guard below
// toggles with HWY_TARGET, Highway's convention for per-target headers).
#if defined(KBIT_CPU_HWY_ELEM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KBIT_CPU_HWY_ELEM_INL_H_
#undef KBIT_CPU_HWY_ELEM_INL_H_
#else
#define KBIT_CPU_HWY_ELEM_INL_H_
#endif

#include <hwy/highway.h>

#include <type_traits>

#include "kbit/kbit_core.h"
#include "kbit_formats.h"
#include "kbit_half.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(df) elements at p as fp32 lanes (exact).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadAsFloat(DF df, const float* p) {
    return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadAsFloat(DF df, const kbit_half* p) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadAsFloat(DF df, const kbit_bf16* p) {
    const hn::Rebind<hwy::bfloat16_t, DF> db;
    return hn::PromoteTo(df, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(p)));
}

// float_to_bf16 per lane, the bits in the low half of each 32-bit lane. Highway 1.0.3's bf16
// DemoteTo truncates, so round here: + 0x7FFF + lsb, NaN kept and quietened.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Bf16BitsWide(DF, hn::Vec<DF> v) {
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::BitCast(du, v);
    const auto hi = hn::ShiftRight<16>(u);
    const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::And(hi, hn::Set(du, 1u)), hn::Set(du, 0x7FFFu))));
    return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(hi, hn::Set(du, 0x40u)), rounded);
}

// fp32 lanes rounded to T (kbit_half or kbit_bf16), as T's 16-bit patterns.
template <class T, class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> DemoteToBits(DF df, hn::Vec<DF> v) {
    const hn::Rebind<uint16_t, DF> d16;
    if constexpr (std::is_same_v<T, kbit_half>) {
        // F16C / AVX-512 conversion: round to nearest even, NaN quietened like float_to_half.
        return hn::BitCast(d16, hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
    } else {
        static_assert(std::is_same_v<T, kbit_bf16>, "16-bit element types only");
        return hn::DemoteTo(d16, hn::BitCast(hn::RebindToSigned<DF>(), Bf16BitsWide(df, v)));
    }
}

// v rounded to T and back: the value a store to T and a load give.
template <class T, class DF>
HWY_INLINE hn::Vec<DF> RoundTo(DF df, hn::Vec<DF> v) {
    if constexpr (std::is_same_v<T, float>) {
        return v;
    } else if constexpr (std::is_same_v<T, kbit_half>) {
        const hn::Rebind<hwy::float16_t, DF> dh;
        return hn::PromoteTo(df, hn::DemoteTo(dh, v));
    } else {
        return hn::BitCast(df, hn::ShiftLeft<16>(Bf16BitsWide(df, v)));
    }
}

// StoreU, or a non-temporal store (p aligned to the vector) when `stream`.
template <class D>
HWY_INLINE void StoreOrStream(hn::Vec<D> v, D d, hn::TFromD<D>* p, bool stream) {
    if (stream) hn::Stream(v, d, p);
    else hn::StoreU(v, d, p);
}

// fp32 lanes stored as T with one round-to-nearest-even step.
template <class DF>
HWY_INLINE void StoreFromFloat(DF df, hn::Vec<DF> v, float* p, bool stream = false) {
    StoreOrStream(v, df, p, stream);
}
template <class DF>
HWY_INLINE void StoreFromFloat(DF df, hn::Vec<DF> v, kbit_half* p, bool stream = false) {
    StoreOrStream(DemoteToBits<kbit_half>(df, v), hn::Rebind<uint16_t, DF>(), reinterpret_cast<uint16_t*>(p), stream);
}
template <class DF>
HWY_INLINE void StoreFromFloat(DF df, hn::Vec<DF> v, kbit_bf16* p, bool stream = false) {
    StoreOrStream(DemoteToBits<kbit_bf16>(df, v), hn::Rebind<uint16_t, DF>(), reinterpret_cast<uint16_t*>(p), stream);
}

// (v > m) ? v : m, so a NaN v leaves m: ref::absmax_fold's rule. x86 (v)maxps returns its second
// operand unless the first is greater, and Highway's Max on its x86 targets is exactly that.
// AArch64's FMAX returns NaN when either is NaN, so there the rule is spelled out (compare, select).
template <class V>
HWY_INLINE V MaxIgnoringNaN(V v, V m) {
#if HWY_ARCH_X86
    return hn::Max(v, m);
#else
    return hn::IfThenElse(hn::Gt(v, m), v, m);
#endif
}

// Products with x86's NaN bits (behaviour §1.1; per lane what kbit_nan_x86.h's mul_rn and fma_rn
// give): a NaN result is the first NaN operand made quiet, else 0xFFC00000 (an invalid operation).
// On x86 targets the instructions give exactly that; AArch64 returns its default NaN 0x7FC00000 for
// an invalid operation, so there NaN lanes are rebuilt.
template <class D>
HWY_INLINE hn::Vec<D> FirstNanX86(D d, hn::Vec<D> r, hn::Vec<D> a, hn::Vec<D> b) {
#if HWY_ARCH_X86
    (void)d, (void)a, (void)b;
    return r;
#else
    const hn::RebindToUnsigned<D> du;
    const auto quiet = hn::Set(du, 0x00400000u);
    const auto quiet_b = hn::BitCast(d, hn::Or(hn::BitCast(du, b), quiet));
    const auto nan = hn::IfThenElse(hn::IsNaN(a), hn::BitCast(d, hn::Or(hn::BitCast(du, a), quiet)),
                                    hn::IfThenElse(hn::IsNaN(b), quiet_b, hn::BitCast(d, hn::Set(du, 0xFFC00000u))));
    return hn::IfThenElse(hn::IsNaN(r), nan, r);
#endif
}
template <class D>
HWY_INLINE hn::Vec<D> MulX86Nan(D d, hn::Vec<D> a, hn::Vec<D> b) {
    return FirstNanX86(d, hn::Mul(a, b), a, b);
}
// a * b + c, one rounding: c's NaN when only c is NaN, else as FirstNanX86 of a and b.
template <class D>
HWY_INLINE hn::Vec<D> MulAddX86Nan(D d, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> c) {
    const auto r = hn::MulAdd(a, b, c);
#if HWY_ARCH_X86
    return r;
#else
    const hn::RebindToUnsigned<D> du;
    const auto only_c = hn::AndNot(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::IsNaN(c));
    const auto quiet_c = hn::BitCast(d, hn::Or(hn::BitCast(du, c), hn::Set(du, 0x00400000u)));
    return hn::IfThenElse(hn::And(only_c, hn::IsNaN(r)), quiet_c, FirstNanX86(d, r, a, b));
#endif
}

// absmax_fold (kbit_formats.h) over x[0, len) from `start` (absmax_start), on fp32 lanes: the block
// absmax of the quantizers, in four independent chains (a single chain waits on the max's latency).
template <class DF, class T>
HWY_INLINE float BlockAbsmaxOfFloats(DF df, const T* x, int64_t len, float start) {
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    auto a0 = hn::Set(df, start), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 * N <= len; i += 4 * N) {
        a0 = MaxIgnoringNaN(hn::Abs(LoadAsFloat(df, x + i)), a0);
        a1 = MaxIgnoringNaN(hn::Abs(LoadAsFloat(df, x + i + N)), a1);
        a2 = MaxIgnoringNaN(hn::Abs(LoadAsFloat(df, x + i + 2 * N)), a2);
        a3 = MaxIgnoringNaN(hn::Abs(LoadAsFloat(df, x + i + 3 * N)), a3);
    }
    for (; i + N <= len; i += N) a0 = MaxIgnoringNaN(hn::Abs(LoadAsFloat(df, x + i)), a0);
    float amax = hn::GetLane(hn::MaxOfLanes(df, hn::Max(hn::Max(a0, a1), hn::Max(a2, a3))));  // no NaN lanes
    for (; i < len; ++i) amax = absmax_fold(amax, Elem<T>::load(x[i]));
    return amax;
}

// The bits of +infinity in T (fp16 / bf16): magnitude bits (sign cleared) above them are a NaN.
template <class T>
constexpr uint16_t kInfinityBits = std::is_same_v<T, kbit_half> ? 0x7C00 : 0x7F80;

// The same fold. fp16 / bf16 inputs are folded on their bits: without the sign bit, the unsigned
// order of the bits of non-NaN values is the order of their magnitudes, so the max needs no
// conversion to fp32 (3 instead of 8 instructions per 32 elements), and its value is exactly the
// fp32 fold's. Any non-NaN element makes the start irrelevant (|x| >= 0 > -FLT_MAX); a block holding
// a NaN takes the fp32 fold, whose rule skips it.
template <class DF, class T>
HWY_INLINE float BlockAbsmax(DF df, const T* x, int64_t len, float start) {
    if constexpr (std::is_same_v<T, float>) {
        return BlockAbsmaxOfFloats(df, x, len, start);
    } else {
        static_assert(std::is_same_v<T, kbit_half> || std::is_same_v<T, kbit_bf16>, "fp32, fp16 or bf16");
        const hn::Repartition<uint16_t, DF> d16;
        const int64_t N = static_cast<int64_t>(hn::Lanes(d16));
        const uint16_t* bits = reinterpret_cast<const uint16_t*>(x);
        const auto magnitude = hn::Set(d16, uint16_t{0x7FFF});
        auto a0 = hn::Zero(d16), a1 = a0;
        int64_t i = 0;
        for (; i + 2 * N <= len; i += 2 * N) {
            a0 = hn::Max(a0, hn::And(hn::LoadU(d16, bits + i), magnitude));
            a1 = hn::Max(a1, hn::And(hn::LoadU(d16, bits + i + N), magnitude));
        }
        for (; i + N <= len; i += N) a0 = hn::Max(a0, hn::And(hn::LoadU(d16, bits + i), magnitude));
        uint16_t m = hn::GetLane(hn::MaxOfLanes(d16, hn::Max(a0, a1)));
        for (; i < len; ++i) m = static_cast<uint16_t>(m > (bits[i] & 0x7FFF) ? m : bits[i] & 0x7FFF);
        if (len == 0 || m > kInfinityBits<T>) return BlockAbsmaxOfFloats(df, x, len, start);
        T largest;
        largest.bits = m;
        return Elem<T>::load(largest);
    }
}

}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
