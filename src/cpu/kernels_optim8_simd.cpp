// Highway kernels of the optimizer interface (AVX2 and AVX-512 from this one source): the expressions
// of kbit_optim_math.h on vectors, with per-lane selects where the scalar code branches. They must
// equal the scalar reference (ref_optim8.cpp) bit for bit; the conformance suite checks that.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_optim8_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "hwy_code8_lut-inl.h"
#include "hwy_elem-inl.h"

#include <algorithm>
#include <cstring>

#include "cpu_isa.h"
#include "kbit_code8_lut.h"
#include "kbit_half.h"
#include "kbit_optim_math.h"
#include "kernels_optim8.h"
#include "ref_optim8.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if KBIT_HWY_SIZED_KERNEL_TARGET  // VConsts holds vectors: not SVE's sizeless ones (cpu_isa.h)
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using namespace kbit::optim;
using hn::Sqrt;
using ref::Mem32;
using ref::Mem8;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D8 = hn::Rebind<uint8_t, DI>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using MF = hn::Mask<DF>;
using MI = hn::Mask<DI>;

// ---- broadcast constants ---------------------------------------------------------------------

struct VConsts {
    VF beta1, beta2, beta3, omb1, omb2, omb3, alpha, eps, lr, neg_lr, wd, gnorm, decay, c1, c2;
    VF step_size, su, eps_c2, rc1, rc2, u, zero, one, minus_one, lowest;
    explicit VConsts(const Consts& c) {
        const DF d;
        beta1 = hn::Set(d, c.beta1), beta2 = hn::Set(d, c.beta2), beta3 = hn::Set(d, c.beta3);
        omb1 = hn::Set(d, c.omb1), omb2 = hn::Set(d, c.omb2), omb3 = hn::Set(d, c.omb3);
        alpha = hn::Set(d, c.alpha), eps = hn::Set(d, c.eps), lr = hn::Set(d, c.lr), neg_lr = hn::Set(d, c.neg_lr);
        wd = hn::Set(d, c.wd), gnorm = hn::Set(d, c.gnorm_scale), decay = hn::Set(d, c.decay);
        c1 = hn::Set(d, c.c1), c2 = hn::Set(d, c.c2), step_size = hn::Set(d, c.step_size), su = hn::Set(d, c.su);
        eps_c2 = hn::Set(d, c.eps_c2), rc1 = hn::Set(d, c.rc1), rc2 = hn::Set(d, c.rc2), u = hn::Set(d, c.u);
        zero = hn::Zero(d), one = hn::Set(d, 1.0f), minus_one = hn::Set(d, -1.0f), lowest = hn::Set(d, -FLT_MAX);
    }
};

// sgn as +-1.0f / 0.0f (0 for zero and NaN), like optim::sgn.
HWY_INLINE VF sign_of(const VConsts& k, VF x) {
    return hn::IfThenElse(x > k.zero, k.one, hn::IfThenElse(x < k.zero, k.minus_one, k.zero));
}

// absmax_fold on lanes: a NaN state does not count.
HWY_INLINE VF fold_absmax(VF acc, VF s) { return MaxIgnoringNaN(hn::Abs(s), acc); }

// ---- 8-bit codes -------------------------------------------------------------------------------

// optim::quantize8 of a block of states under their new absmax: one bucket entry per state from the
// sign-fixed (state1) or plain (state2) table. An absmax of 0 (an all-zero block: y = NaN, code 0,
// then the sign fix) has its own vector path; any other absmax the sign fix does not hold for takes
// the scalar rule.
HWY_INLINE void quantize_block(const Code8Lut& lut, const float* s, float absmax, uint8_t* out) {
    const DF df;
    const DI di;
    const size_t N = hn::Lanes(df);
    if (!Code8Lut::keeps_sign(absmax)) {
        if (absmax == 0.0f) {
            const bool code0_neg = std::signbit(lut.code()[0]) && lut.sign_fix();
            for (size_t j = 0; j < kBlock; j += N) {
                const VF sv = hn::Load(df, s + j);
                const MI s_neg = hn::BitCast(di, sv) < hn::Zero(di);
                const MI fix = lut.sign_fix() ? (code0_neg ? hn::Not(s_neg) : s_neg) : hn::FirstN(di, 0);
                const VI step = hn::IfThenElse(hn::RebindMask(di, sv > hn::Zero(df)), hn::Set(di, 1), hn::Set(di, 255));
                hn::StoreU(hn::DemoteTo(D8(), hn::IfThenElseZero(fix, step)), D8(), out + j);
            }
        } else {
            for (size_t j = 0; j < kBlock; ++j) out[j] = quantize8(lut.code(), s[j], absmax, lut.sign_fix());
        }
        return;
    }
    const VF vmax = hn::Set(df, absmax);
    static_assert(kBlock <= kCode8MaxRun, "one Code8CodesOf run per block");
    if (Code8CodesOf(df, lut, kBlock, [&](size_t j) { return hn::Load(df, s + j) / vmax; }, out)) {
        // irregular buckets: the search
        for (size_t j = 0; j < kBlock; ++j)
            if (lut.find(s[j] / absmax) < 0) out[j] = quantize8(lut.code(), s[j], absmax, lut.sign_fix());
    }
}

// ---- 8-bit blocks ------------------------------------------------------------------------------

// One block's memory (or a padded staging copy of a partial last block).
template <class T>
struct Block {
    T* p;
    const T* g;
    uint8_t* c1;
    uint8_t* c2;
    uint8_t* c3;
    float* a1;
    float* a2;
    float* a3;
};

// The parameter step needs the updated states but not their new absmax, so it happens in the same
// pass as the state update; the second pass only re-quantizes. The states are dequantized inside
// the update loop (LookupCode8), where their loads overlap the step's arithmetic (5% faster than a
// look-up pass of their own). With 16-bit parameters Adam's step has a loop of its own after the
// state update, which leaves only the square roots there: in one loop, the division and the
// rounding to 16 bits that wait on each square root held the AVX-512 step of 1M bf16 parameters at
// 1.54 ms, against 1.10 split (Sapphire Rapids, one core; neutral on AVX2). fp32 parameters keep
// one loop (5% faster than split there). Weight decay is a template parameter, not `if (c.has_wd)`
// in the loop: GCC 12 at -O3 turned that branch into a multiply masked by the bool itself (kmovw of
// 0/1, so lane 0 only) in the AVX-512 instance; scripts/check-avx512-masks guards against the pattern.
template <class T, Kind K, bool kDecay>
void block_two_state(const VConsts& k, const Block<T>& b, const Code8Lut& l1, const Code8Lut& l2) {
    constexpr bool kStepPass = K == Kind::Adam && !std::is_same_v<T, float>;
    const DF df;
    const size_t N = hn::Lanes(df);
    HWY_ALIGN float m[kBlock], v[kBlock], m2[kBlock], den[kStepPass ? kBlock : 1];
    const VF a1 = hn::Set(df, *b.a1), a2 = hn::Set(df, *b.a2);
    const VF a3 = K == Kind::AdEMAMix ? hn::Set(df, *b.a3) : k.zero;
    VF max1 = k.lowest, max2 = k.lowest, max3 = k.lowest;
    for (size_t j = 0; j < kBlock; j += N) {
        const VF graw = LoadAsFloat(df, b.g + j);
        const MF finite = hn::IsFinite(graw);
        const VF g = graw * k.gnorm;
        VF vj = LookupCode8(df, l2.code(), b.c2 + j) * a2;
        vj = hn::IfThenElseZero(finite, KBIT_OPT_EMA_SQ_LEFT(vj, k.beta2, k.omb2, g));
        VF mj = LookupCode8(df, l1.code(), b.c1 + j) * a1;
        mj = hn::IfThenElseZero(finite, KBIT_OPT_EMA(mj, k.beta1, k.omb1, g));
        hn::Store(mj, df, m + j);
        hn::Store(vj, df, v + j);
        max1 = fold_absmax(max1, mj);
        max2 = fold_absmax(max2, vj);
        if constexpr (kStepPass) {
            hn::Store(KBIT_OPT_ADAM_DENOMINATOR(vj, k.eps_c2), df, den + j);
            continue;
        }
        const VF p = LoadAsFloat(df, b.p + j);
        VF pn;
        if (K == Kind::AdEMAMix) {
            VF m2j = LookupCode8(df, l1.code(), b.c3 + j) * a3;
            m2j = hn::IfThenElseZero(finite, KBIT_OPT_EMA(m2j, k.beta3, k.omb3, g));
            hn::Store(m2j, df, m2 + j);
            max3 = fold_absmax(max3, m2j);
            pn = KBIT_OPT_ADEMAMIX_PARAM(p, mj, m2j, vj, k.lr, k.c1, k.alpha, k.c2, k.eps);
        } else {
            pn = KBIT_OPT_ADAM_PARAM(p, mj, vj, k.step_size, k.eps_c2);
        }
        if constexpr (kDecay) pn = RoundTo<T>(df, pn) * k.decay;
        StoreFromFloat(df, hn::IfThenElse(finite, pn, p), b.p + j);  // the store rounds pn
    }
    if constexpr (kStepPass) {
        for (size_t j = 0; j < kBlock; j += N) {
            const VF p = LoadAsFloat(df, b.p + j);
            VF pn = KBIT_OPT_ADAM_STEP(p, hn::Load(df, m + j), hn::Load(df, den + j), k.step_size);
            if constexpr (kDecay) pn = RoundTo<T>(df, pn) * k.decay;
            StoreFromFloat(df, hn::IfThenElse(hn::IsFinite(LoadAsFloat(df, b.g + j)), pn, p), b.p + j);
        }
    }
    const float new1 = hn::GetLane(hn::MaxOfLanes(df, max1)), new2 = hn::GetLane(hn::MaxOfLanes(df, max2));
    *b.a1 = new1;
    *b.a2 = new2;
    quantize_block(l1, m, new1, b.c1);
    quantize_block(l2, v, new2, b.c2);
    if (K == Kind::AdEMAMix) {
        const float new3 = hn::GetLane(hn::MaxOfLanes(df, max3));
        *b.a3 = new3;
        quantize_block(l1, m2, new3, b.c3);
    }
}

template <class T, Kind K>
void block_one_state(const Consts& c, const VConsts& k, const Block<T>& b, const Code8Lut& l1) {
    const DF df;
    const size_t N = hn::Lanes(df);
    HWY_ALIGN float s[kBlock];
    const VF a1 = hn::Set(df, *b.a1);
    const MF all = hn::FirstN(df, N);
    VF max1 = k.lowest;
    for (size_t j = 0; j < kBlock; j += N) {
        const VF graw = LoadAsFloat(df, b.g + j);
        const MF active = c.skip_zeros ? graw != k.zero : all;
        MF step = active;
        VF p = LoadAsFloat(df, b.p + j);
        VF g = graw * k.gnorm;
        if (c.has_wd) {
            if (K == Kind::Lion) p = hn::IfThenElse(active, RoundTo<T>(df, p * k.decay), p);
            else g = g + p * k.wd;
        }
        const VF sj = LookupCode8(df, l1.code(), b.c1 + j) * a1;
        VF sn, pn;
        if (K == Kind::Momentum) {
            sn = c.first_step ? g : KBIT_OPT_MOMENTUM(sj, k.beta1, g);
            pn = p - k.lr * sn;
        } else if (K == Kind::RMSprop) {
            sn = KBIT_OPT_EMA_SQ(sj, k.beta1, k.omb1, g);
            pn = KBIT_OPT_RMS_PARAM(p, graw, sn, k.one, k.lr, k.eps);
        } else if (K == Kind::Adagrad) {
            sn = KBIT_OPT_ACCUMULATE_SQ(sj, g);
            pn = KBIT_OPT_RMS_PARAM(p, graw, sn, k.one, k.lr, k.eps);
        } else {  // Lion
            const VF d = RoundTo<T>(df, k.lr * sign_of(k, KBIT_OPT_EMA(sj, k.beta1, k.omb1, g)));
            if (c.skip_zeros) step = hn::And(step, d != k.zero);
            sn = KBIT_OPT_EMA(sj, k.beta2, k.omb2, g);
            pn = p - d;
        }
        const VF snew = hn::IfThenElse(active, sn, sj);
        hn::Store(snew, df, s + j);
        max1 = fold_absmax(max1, snew);
        StoreFromFloat(df, hn::IfThenElse(step, pn, p), b.p + j);  // the store rounds pn
    }
    const float new1 = hn::GetLane(hn::MaxOfLanes(df, max1));
    *b.a1 = new1;
    quantize_block(l1, s, new1, b.c1);
}

// ---- 32-bit --------------------------------------------------------------------------------

// norm_term32 on lanes.
template <class T, Kind K>
VF norm_term(const Consts& c, const VConsts& k, VF graw, VF s1, VF s2) {
    const VF g = RoundTo<T>(DF(), graw * k.gnorm);
    VF x;
    if (K == Kind::Adam) {
        x = KBIT_OPT_ADAM_NORM_TERM(KBIT_OPT_EMA(s1, k.beta1, k.omb1, g), KBIT_OPT_EMA_SQ(s2, k.beta2, k.omb2, g),
                                    k.rc1, k.rc2, k.eps);
    } else if (K == Kind::Momentum) {
        x = c.first_step ? g : KBIT_OPT_MOMENTUM(s1, k.beta1, g);
    } else if (K == Kind::RMSprop) {
        x = KBIT_OPT_RMS_NORM_TERM(g, KBIT_OPT_EMA_SQ_LEFT(s1, k.beta1, k.omb1, g), k.eps);
    } else if (K == Kind::Adagrad) {
        x = KBIT_OPT_RMS_NORM_TERM(g, KBIT_OPT_ACCUMULATE_SQ(s1, g), k.eps);
    } else {
        return KBIT_OPT_EMA(s1, k.beta2, k.omb2, g);  // Lion: not squared
    }
    return x * x;
}

// Software prefetch of the block kAhead blocks ahead: with five or six streams per block the hardware
// prefetchers alone left the 64M-element step 10-20% slower on the Zen 3 we measured.
constexpr int64_t kAhead = 8;
template <class T, Kind K>
HWY_INLINE void prefetch_block(const Mem8& m, int64_t at) {
    const auto* p = reinterpret_cast<const char*>(static_cast<const T*>(m.p) + at);
    const auto* g = reinterpret_cast<const char*>(static_cast<const T*>(m.g) + at);
    for (size_t off = 0; off < kBlock * sizeof(T); off += 64) {
        hwy::Prefetch(p + off);
        hwy::Prefetch(g + off);
    }
    for (size_t off = 0; off < kBlock; off += 64) {
        hwy::Prefetch(m.s1 + at + off);
        if (two_state(K)) hwy::Prefetch(m.s2 + at + off);
        if (K == Kind::AdEMAMix) hwy::Prefetch(m.s1 + m.n + at + off);
    }
}

template <class T, Kind K>
struct Simd {
    static float norm_chunk(const Consts& c, const Mem32& m, int64_t chunk) {
        const DF df;
        const int64_t N = static_cast<int64_t>(hn::Lanes(df));
        const VConsts k(c);
        const int64_t vecs = kNormLanes / N;  // vectors per group of kNormLanes elements: 4, 2 or 1
        VF acc[kNormLanes / 4];               // 4: NEON's 128-bit vectors
        for (VF& a : acc) a = k.zero;
        const int64_t begin = chunk * kNormChunk, end = std::min(begin + kNormChunk, m.n);
        const T* grad = static_cast<const T*>(m.g);
        int64_t i = begin;
        for (; i + kNormLanes <= end; i += kNormLanes) {
            for (int64_t v = 0; v < vecs; ++v) {
                const int64_t at = i + v * N;
                const VF s2 = two_state(K) ? hn::LoadU(df, m.s2 + at) : k.zero;
                acc[v] = acc[v] + norm_term<T, K>(c, k, LoadAsFloat(df, grad + at), hn::LoadU(df, m.s1 + at), s2);
            }
        }
        HWY_ALIGN float lanes[kNormLanes];
        for (int64_t v = 0; v < vecs; ++v) hn::Store(acc[v], df, lanes + v * N);
        for (; i < end; ++i) {
            const float s2 = two_state(K) ? m.s2[i] : 0.0f;
            float& a = lanes[(i - begin) % kNormLanes];
            a = a + norm_term32<T, K>(c, Elem<T>::load(grad[i]), m.s1[i], s2);
        }
        return fold_lanes(lanes);
    }

    static void update32(const Consts& c, const Mem32& m, int64_t begin, int64_t end) {
        const DF df;
        const int64_t N = static_cast<int64_t>(hn::Lanes(df));
        const VConsts k(c);
        const MF all = hn::FirstN(df, static_cast<size_t>(N));
        float* s3p = K == Kind::AdEMAMix ? m.s1 + m.n : nullptr;
        T* param = static_cast<T*>(m.p);
        const T* grad = static_cast<const T*>(m.g);
        int64_t i = begin;
        for (; i + N <= end; i += N) {
            VF p = LoadAsFloat(df, param + i);
            VF g = RoundTo<T>(df, LoadAsFloat(df, grad + i) * k.gnorm);
            if ((K == Kind::Momentum || K == Kind::RMSprop || K == Kind::Adagrad) && c.has_wd)
                g = RoundTo<T>(df, g + p * k.wd);
            const MF active = c.skip_zeros && K != Kind::AdEMAMix ? g != k.zero : all;
            VF s1 = hn::LoadU(df, m.s1 + i);
            if (K == Kind::AdEMAMix) {
                VF s2 = hn::LoadU(df, m.s2 + i), s3 = hn::LoadU(df, s3p + i);
                s1 = KBIT_OPT_EMA(s1, k.beta1, k.omb1, g);
                s3 = KBIT_OPT_EMA(s3, k.beta3, k.omb3, g);
                s2 = KBIT_OPT_EMA_SQ_LEFT(s2, k.beta2, k.omb2, g);
                p = KBIT_OPT_ADEMAMIX_PARAM(p, s1, s3, s2, k.lr, k.c1, k.alpha, k.c2, k.eps);
                if (c.has_wd) p = RoundTo<T>(df, p) * k.decay;
                hn::StoreU(s2, df, m.s2 + i);
                hn::StoreU(s3, df, s3p + i);
            } else if (K == Kind::Adam) {
                const VF s2 = hn::LoadU(df, m.s2 + i);
                const VF s1n = KBIT_OPT_EMA(s1, k.beta1, k.omb1, g);
                const VF s2n = KBIT_OPT_EMA_SQ(s2, k.beta2, k.omb2, g);
                VF pn = KBIT_OPT_ADAM_PARAM(p, s1n, s2n, k.su, k.eps_c2);
                if (c.has_wd) pn = RoundTo<T>(df, pn) * k.decay;
                p = hn::IfThenElse(active, pn, p);
                s1 = hn::IfThenElse(active, s1n, s1);
                hn::StoreU(hn::IfThenElse(active, s2n, s2), df, m.s2 + i);
            } else {
                VF s1n, pn;
                if (K == Kind::Momentum) {
                    s1n = c.first_step ? g : KBIT_OPT_MOMENTUM(s1, k.beta1, g);
                    pn = KBIT_OPT_MOMENTUM_PARAM(p, s1n, k.u, k.neg_lr);
                } else if (K == Kind::RMSprop) {
                    s1n = KBIT_OPT_EMA_SQ_LEFT(s1, k.beta1, k.omb1, g);
                    pn = KBIT_OPT_RMS_PARAM(p, g, s1n, k.u, k.lr, k.eps);
                } else if (K == Kind::Adagrad) {
                    s1n = KBIT_OPT_ACCUMULATE_SQ(s1, g);
                    pn = KBIT_OPT_RMS_PARAM(p, g, s1n, k.one, k.lr, k.eps);
                } else {  // Lion
                    const VF pd = c.has_wd ? RoundTo<T>(df, p * k.decay) : p;
                    pn = KBIT_OPT_LION_PARAM(pd, k.u, k.lr, sign_of(k, KBIT_OPT_EMA(s1, k.beta1, k.omb1, g)));
                    s1n = KBIT_OPT_EMA(s1, k.beta2, k.omb2, g);
                }
                p = hn::IfThenElse(active, pn, p);
                s1 = hn::IfThenElse(active, s1n, s1);
            }
            StoreFromFloat(df, p, param + i);  // rounds the new values; unchanged ones are exact
            hn::StoreU(s1, df, m.s1 + i);
        }
        if (i < end) ref::optim_kernels().update32[ref::dtype_index(Elem<T>::dtype)][static_cast<int>(K)](c, m, i, end);
    }

    static void blocks8(const Consts& c, const Mem8& m, int64_t block_begin, int64_t block_end) {
        std::shared_ptr<const Code8Lut> l1, l2;
        try {  // runs inside an OpenMP region: nothing may throw out of it
            l1 = code8_lut(m.q1, true);
            l2 = two_state(K) ? code8_lut(m.q2, false) : l1;
        } catch (...) {
        }
        if (!l1 || !l2) {  // out of memory for the bucket tables: the search itself
            ref::optim_kernels().blocks8[ref::dtype_index(Elem<T>::dtype)][static_cast<int>(K)](c, m, block_begin,
                                                                                                  block_end);
            return;
        }
        const VConsts k(c);
        const int64_t blocks = (m.n + kBlock - 1) / kBlock;
        T* p = static_cast<T*>(m.p);
        const T* g = static_cast<const T*>(m.g);
        for (int64_t bi = block_begin; bi < block_end; ++bi) {
            const int64_t base = bi * kBlock;
            const bool ademamix = K == Kind::AdEMAMix;
            if (bi + kAhead < block_end) prefetch_block<T, K>(m, base + kAhead * kBlock);
            Block<T> b{p + base,
                       g + base,
                       m.s1 + base,
                       two_state(K) ? m.s2 + base : nullptr,
                       ademamix ? m.s1 + m.n + base : nullptr,
                       m.a1 + bi,
                       two_state(K) ? m.a2 + bi : nullptr,
                       ademamix ? m.a1 + blocks + bi : nullptr};
            const int64_t valid = std::min(kBlock, m.n - base);
            T ps[kBlock], gs[kBlock];
            uint8_t c1s[kBlock], c2s[kBlock], c3s[kBlock];
            if (valid < kBlock) {  // padding lanes: g = 0, p = 0, codes kPadCode1 / kPadCode2
                std::fill(ps, ps + kBlock, Elem<T>::store(0.0f));
                std::fill(gs, gs + kBlock, Elem<T>::store(0.0f));
                std::fill(c1s, c1s + kBlock, kPadCode1);
                std::fill(c2s, c2s + kBlock, kPadCode2);
                std::fill(c3s, c3s + kBlock, kPadCode1);
                std::copy(b.p, b.p + valid, ps);
                std::copy(b.g, b.g + valid, gs);
                std::copy(b.c1, b.c1 + valid, c1s);
                if (two_state(K)) std::copy(b.c2, b.c2 + valid, c2s);
                if (K == Kind::AdEMAMix) std::copy(b.c3, b.c3 + valid, c3s);
                Block<T> staged{ps, gs, c1s, c2s, c3s, b.a1, b.a2, b.a3};
                run_block(c, k, staged, *l1, *l2);
                std::copy(ps, ps + valid, b.p);
                std::copy(c1s, c1s + valid, b.c1);
                if (two_state(K)) std::copy(c2s, c2s + valid, b.c2);
                if (K == Kind::AdEMAMix) std::copy(c3s, c3s + valid, b.c3);
            } else {
                run_block(c, k, b, *l1, *l2);
            }
        }
    }

    static void run_block(const Consts& c, const VConsts& k, const Block<T>& b, const Code8Lut& l1,
                          const Code8Lut& l2) {
        if constexpr (two_state(K)) {
            if (c.has_wd) block_two_state<T, K, true>(k, b, l1, l2);
            else block_two_state<T, K, false>(k, b, l1, l2);
        } else {
            block_one_state<T, K>(c, k, b, l1);
        }
    }
};

}  // namespace

void OverrideOptim(ref::OptimKernels& t) { t = ref::make_kernels<Simd>(); }
#endif  // KBIT_HWY_SIZED_KERNEL_TARGET
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
