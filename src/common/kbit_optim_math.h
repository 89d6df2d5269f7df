// kbit_optim_math.h — the numerics of every kbit optimizer, shared by all backends (C++ and CUDA).
//
// This file is the definition of what kbit's optimizers compute, to the bit. A backend that follows
// it produces the same bytes as every other backend, for any thread count or launch geometry:
//
//  * Every step is one IEEE-754 binary32 operation (+ - * / and sqrt, all correctly rounded, round to
//    nearest even), evaluated left to right exactly as written here. No contraction into FMA: host
//    code is built with -ffp-contract=off; CUDA code must be built with --fmad=false and without
//    --use_fast_math (so '/' and sqrtf are the IEEE operations, denormals are kept).
//  * beta^t is computed by binary powering in IEEE binary64 (pow_step below), because powf is not
//    correctly rounded on either side (glibc) or is approximated (CUDA __powf); binary64
//    multiplication, subtraction and sqrt are correctly rounded everywhere.
//  * Where bitsandbytes' CUDA kernels use fast-math (__fdividef, __powf, approximate sqrtf), kbit uses
//    the IEEE operation in the same place; the association of each expression is bitsandbytes'.
//  * NaN payloads are not specified (x86 propagates an operand's payload, CUDA returns its canonical
//    NaN); every other bit is.
//
// The per-element expressions are macros (below) that SIMD backends expand on vector types, so the
// scalar reference, CUDA and every SIMD level evaluate the very same expression tree.
//
// Order of one 32-bit call: c = make_consts(hyper); if max_unorm > 0 (not AdEMAMix, which has no
// clipping): except for Lion, *unorm = the reduction (kNormChunk) of norm_term32 over all elements,
// then set_clip(c, *unorm, ...); step32 on every element; Lion instead clips with the *unorm it was
// given and afterwards stores the reduction of its norm_term32 over the updated states. Order of one
// 8-bit call: the block procedure below, blocks independent. (src/ref/ref_optim8.h: run32, run8.)
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kbit_code8.h"
#include "kbit_formats.h"  // KBIT_HD
#include "kbit_half.h"

namespace kbit::optim {

enum class Kind : int32_t { Adam = 0, Momentum = 1, RMSprop = 2, Lion = 3, Adagrad = 4, AdEMAMix = 5 };
constexpr int kKinds = 6;

KBIT_HD constexpr bool two_state(Kind k) { return k == Kind::Adam || k == Kind::AdEMAMix; }

// 8-bit state: elements per absmax block (KBIT_OPTIM8_BLOCKSIZE).
constexpr int64_t kBlock = 256;
// Padding lanes of a partial last 8-bit block: gradient 0, parameter 0, these codes (bitsandbytes).
constexpr uint8_t kPadCode1 = 128, kPadCode2 = 0;

// Update-norm reduction (32-bit optimizers with max_unorm > 0). The elements are cut into chunks of
// kNormChunk; chunk c's sum is built in kNormLanes interleaved fp32 accumulators (accumulator l adds
// elements c*kNormChunk + kNormLanes*j + l for j = 0, 1, ... in order, starting from +0.0f), which
// are then folded as acc[l] += acc[l + w] for w = 8, 4, 2, 1; the chunk sums are combined by
// tree_sum. Nothing depends on the number of threads or the vector width.
constexpr int64_t kNormChunk = 4096;
constexpr int kNormLanes = 16;

// The scalar arguments of a call, as passed.
struct Hyper {
    float beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale;
    int step;
    bool skip_zeros;
};

// Per-call constants, each computed once in the way stated.
struct Consts {
    float beta1, beta2, beta3, alpha, eps, lr, wd, gnorm_scale;
    float omb1, omb2, omb3;  // 1.0f - beta (fp32)
    float c1;                // (float)(1 - beta1^t)            bias correction 1
    float c2;                // (float)sqrt(1 - beta2^t)        (binary64 sqrt, one rounding)
    float step_size;         // (-lr * c2) / c1                 Adam
    float eps_c2;            // eps * c2                        Adam
    float neg_lr;            // -lr                             Momentum
    float decay;             // 1.0f - lr * wd                  decoupled weight decay
    float rc1, rc2;          // 1.0f / c1, 1.0f / (float)(1 - beta2^t)   Adam update norm
    float u;                 // update-norm clip factor (1 unless clipping), set by the caller
    float su;                // u * step_size                   Adam
    bool has_wd;             // wd > 0
    bool first_step;         // step == 1                       Momentum
    bool skip_zeros;
};

// beta^t, t >= 1: right-to-left binary powering in binary64 (square the base after each bit).
KBIT_HD double pow_step(float beta, int t) {
    double result = 1.0, base = static_cast<double>(beta);
    for (unsigned e = static_cast<unsigned>(t); e != 0; e >>= 1) {
        if (e & 1u) result *= base;
        base *= base;
    }
    return result;
}

KBIT_HD Consts make_consts(const Hyper& h) {
    Consts c{};
    c.beta1 = h.beta1;
    c.beta2 = h.beta2;
    c.beta3 = h.beta3;
    c.alpha = h.alpha;
    c.eps = h.eps;
    c.lr = h.lr;
    c.wd = h.weight_decay;
    c.gnorm_scale = h.gnorm_scale;
    c.omb1 = 1.0f - h.beta1;
    c.omb2 = 1.0f - h.beta2;
    c.omb3 = 1.0f - h.beta3;
    const double one_minus_p1 = 1.0 - pow_step(h.beta1, h.step);
    const double one_minus_p2 = 1.0 - pow_step(h.beta2, h.step);
    c.c1 = static_cast<float>(one_minus_p1);
    c.c2 = static_cast<float>(sqrt(one_minus_p2));
    c.step_size = (-h.lr * c.c2) / c.c1;
    c.eps_c2 = h.eps * c.c2;
    c.neg_lr = -h.lr;
    c.decay = 1.0f - h.lr * h.weight_decay;
    c.rc1 = 1.0f / c.c1;
    c.rc2 = 1.0f / static_cast<float>(one_minus_p2);
    c.u = 1.0f;
    c.su = c.step_size;
    c.has_wd = h.weight_decay > 0.0f;
    c.first_step = h.step == 1;
    c.skip_zeros = h.skip_zeros;
    return c;
}

// Sets the clip factor. 2-state: lim = max_unorm * param_norm; 1-state: lim = max_unorm *
// param_norm + eps; u = (U > lim) ? lim / U : 1 with U = sqrtf(sum); u = 1 unless max_unorm > 0.
KBIT_HD void set_clip(Consts& c, float sum, float max_unorm, float param_norm, bool one_state) {
    c.u = 1.0f;
    if (max_unorm > 0.0f) {
        const float norm = sqrtf(sum);
        float lim = max_unorm * param_norm;
        if (one_state) lim = lim + c.eps;
        if (norm > lim) c.u = lim / norm;
    }
    c.su = c.u * c.step_size;
}

KBIT_HD float Sqrt(float x) { return sqrtf(x); }

// Bit tests (the same on host and device, whatever the math library).
KBIT_HD bool is_finite(float x) { return (float_bits(x) & 0x7F800000u) != 0x7F800000u; }
KBIT_HD bool sign_bit(float x) { return (float_bits(x) >> 31) != 0; }

// sgn with sgn(0) = sgn(NaN) = 0.
KBIT_HD float sgn(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }

// ------------------------------------------------------------------------------------------------
// Expressions. Macros rather than templates so that SIMD code can expand them on vector types inside
// its own target region (a template instantiated with a vector type would be compiled without the
// SIMD target attributes); the use site must see a Sqrt overload for its type (Highway's, or
// optim::Sqrt for float). Every operand is a value of that type (constants broadcast).
// ------------------------------------------------------------------------------------------------

// x*beta + (1-beta)*y: every first moment, Lion's direction and state.
#define KBIT_OPT_EMA(x, beta, omb, y) ((x) * (beta) + (omb) * (y))
// x*beta + (1-beta)*(y*y): 32-bit Adam v, 8-bit RMSprop.
#define KBIT_OPT_EMA_SQ(x, beta, omb, y) ((x) * (beta) + (omb) * ((y) * (y)))
// x*beta + ((1-beta)*y)*y: 32-bit AdEMAMix nu and RMSprop, 8-bit Adam/AdEMAMix v.
#define KBIT_OPT_EMA_SQ_LEFT(x, beta, omb, y) ((x) * (beta) + (omb) * (y) * (y))
// Momentum state after the first step: x*beta + y.
#define KBIT_OPT_MOMENTUM(x, beta, y) ((x) * (beta) + (y))
// Adagrad state: x + y*y.
#define KBIT_OPT_ACCUMULATE_SQ(x, y) ((x) + (y) * (y))
// Adam parameter step: p + su * (m / (sqrt(v) + eps*c2)), su = u * step_size (8-bit: step_size); in
// two parts for code that computes the denominator in an earlier pass.
#define KBIT_OPT_ADAM_DENOMINATOR(v, eps_c2) (Sqrt(v) + (eps_c2))
#define KBIT_OPT_ADAM_STEP(p, m, den, su) ((p) + (su) * ((m) / (den)))
#define KBIT_OPT_ADAM_PARAM(p, m, v, su, eps_c2) KBIT_OPT_ADAM_STEP(p, m, KBIT_OPT_ADAM_DENOMINATOR(v, eps_c2), su)
// AdEMAMix parameter step: p - lr * ((m1/c1 + alpha*m2) / (sqrt(nu)/c2 + eps)).
#define KBIT_OPT_ADEMAMIX_PARAM(p, m1, m2, nu, lr, c1, alpha, c2, eps) \
    ((p) - (lr) * (((m1) / (c1) + (alpha) * (m2)) / (Sqrt(nu) / (c2) + (eps))))
// Momentum parameter step: p + u * (neg_lr * s).
#define KBIT_OPT_MOMENTUM_PARAM(p, s, u, neg_lr) ((p) + (u) * ((neg_lr) * (s)))
// RMSprop / Adagrad parameter step: p - u * (lr * (g / (sqrt(s) + eps))) (Adagrad and 8-bit: u = 1,
// which multiplies exactly).
#define KBIT_OPT_RMS_PARAM(p, g, s, u, lr, eps) ((p) - (u) * ((lr) * ((g) / (Sqrt(s) + (eps)))))
// Lion parameter step: p - u * (lr * sign), sign = sgn(direction) as +-1.0f or 0.0f.
#define KBIT_OPT_LION_PARAM(p, u, lr, sign) ((p) - (u) * ((lr) * (sign)))
// Update-norm terms before squaring: Adam (m*rc1) / (sqrt(v*rc2) + eps); RMSprop/Adagrad
// g / (sqrt(s) + eps).
#define KBIT_OPT_ADAM_NORM_TERM(m, v, rc1, rc2, eps) (((m) * (rc1)) / (Sqrt((v) * (rc2)) + (eps)))
#define KBIT_OPT_RMS_NORM_TERM(g, s, eps) ((g) / (Sqrt(s) + (eps)))

// ------------------------------------------------------------------------------------------------
// 32-bit optimizers: one element. g is the stored gradient, p the stored parameter (both as fp32);
// s3 is AdEMAMix's slow moment (state1[n + i]).
// ------------------------------------------------------------------------------------------------

template <class T>
KBIT_HD float gradient32(const Consts& c, float g) {
    return round_to<T>(g * c.gnorm_scale);
}

// Momentum, RMSprop, Adagrad: coupled weight decay, g = RN_T(g + p*wd), before the skip test.
template <class T>
KBIT_HD float coupled_decay(const Consts& c, float g, float p) {
    return c.has_wd ? round_to<T>(g + p * c.wd) : g;
}

template <class T, Kind K>
KBIT_HD void step32(const Consts& c, float graw, float& p, float& s1, float& s2, float& s3) {
    float g = gradient32<T>(c, graw);
    if (K == Kind::Momentum || K == Kind::RMSprop || K == Kind::Adagrad) g = coupled_decay<T>(c, g, p);
    const bool active = !c.skip_zeros || g != 0.0f;
    if (K == Kind::AdEMAMix) {  // no skip_zeros, no clipping
        s1 = KBIT_OPT_EMA(s1, c.beta1, c.omb1, g);
        s3 = KBIT_OPT_EMA(s3, c.beta3, c.omb3, g);
        s2 = KBIT_OPT_EMA_SQ_LEFT(s2, c.beta2, c.omb2, g);
        p = round_to<T>(KBIT_OPT_ADEMAMIX_PARAM(p, s1, s3, s2, c.lr, c.c1, c.alpha, c.c2, c.eps));
        if (c.has_wd) p = round_to<T>(p * c.decay);
        return;
    }
    if (!active) return;
    switch (K) {
        case Kind::Adam:
            s1 = KBIT_OPT_EMA(s1, c.beta1, c.omb1, g);
            s2 = KBIT_OPT_EMA_SQ(s2, c.beta2, c.omb2, g);
            p = round_to<T>(KBIT_OPT_ADAM_PARAM(p, s1, s2, c.su, c.eps_c2));
            if (c.has_wd) p = round_to<T>(p * c.decay);
            break;
        case Kind::Momentum:
            s1 = c.first_step ? g : KBIT_OPT_MOMENTUM(s1, c.beta1, g);
            p = round_to<T>(KBIT_OPT_MOMENTUM_PARAM(p, s1, c.u, c.neg_lr));
            break;
        case Kind::RMSprop:
            s1 = KBIT_OPT_EMA_SQ_LEFT(s1, c.beta1, c.omb1, g);
            p = round_to<T>(KBIT_OPT_RMS_PARAM(p, g, s1, c.u, c.lr, c.eps));
            break;
        case Kind::Adagrad:
            s1 = KBIT_OPT_ACCUMULATE_SQ(s1, g);
            p = round_to<T>(KBIT_OPT_RMS_PARAM(p, g, s1, 1.0f, c.lr, c.eps));
            break;
        case Kind::Lion:
            if (c.has_wd) p = round_to<T>(p * c.decay);
            p = round_to<T>(KBIT_OPT_LION_PARAM(p, c.u, c.lr, sgn(KBIT_OPT_EMA(s1, c.beta1, c.omb1, g))));
            s1 = KBIT_OPT_EMA(s1, c.beta2, c.omb2, g);
            break;
        default: break;
    }
}

// One element's update-norm contribution, from the states before the step (Lion: after it).
// Every element contributes (skip_zeros and weight decay do not apply); AdEMAMix has none.
template <class T, Kind K>
KBIT_HD float norm_term32(const Consts& c, float graw, float s1, float s2) {
    const float g = gradient32<T>(c, graw);
    float x = 0.0f;
    switch (K) {
        case Kind::Adam:
            x = KBIT_OPT_ADAM_NORM_TERM(KBIT_OPT_EMA(s1, c.beta1, c.omb1, g),
                                        KBIT_OPT_EMA_SQ(s2, c.beta2, c.omb2, g), c.rc1, c.rc2, c.eps);
            return x * x;
        case Kind::Momentum:
            x = c.first_step ? g : KBIT_OPT_MOMENTUM(s1, c.beta1, g);
            return x * x;
        case Kind::RMSprop:
            x = KBIT_OPT_RMS_NORM_TERM(g, KBIT_OPT_EMA_SQ_LEFT(s1, c.beta1, c.omb1, g), c.eps);
            return x * x;
        case Kind::Adagrad:
            x = KBIT_OPT_RMS_NORM_TERM(g, KBIT_OPT_ACCUMULATE_SQ(s1, g), c.eps);
            return x * x;
        case Kind::Lion:  // bitsandbytes: the next state, not squared
            return KBIT_OPT_EMA(s1, c.beta2, c.omb2, g);
        default: return 0.0f;
    }
}

// Folds one chunk's kNormLanes accumulators (see kNormChunk).
KBIT_HD float fold_lanes(float* acc) {
    for (int w = kNormLanes / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] = acc[l] + acc[l + w];
    return acc[0];
}

// Pairwise tree over the chunk sums, in place: each level sets s[i] = s[2i] + s[2i+1] and carries an
// odd last element up unchanged, until one value is left. count >= 1.
KBIT_HD float tree_sum(float* s, int64_t count) {
    while (count > 1) {
        const int64_t half = count / 2;
        for (int64_t i = 0; i < half; ++i) s[i] = s[2 * i] + s[2 * i + 1];
        if (count & 1) s[half] = s[count - 1];
        count = half + (count & 1);
    }
    return s[0];
}

// ------------------------------------------------------------------------------------------------
// 8-bit blockwise optimizers. One block of kBlock lanes (a partial last block is padded with lanes
// g = 0, p = 0, state1 (and m2) code kPadCode1, state2 code kPadCode2, which take part in the absmax
// but are never stored):
//   1. every lane: dequantize (code value * the block's old absmax) and update its states
//      (update8_two_state / update8_one_state);
//   2. new absmax of each state = absmax_fold over all kBlock lanes, from -FLT_MAX;
//   3. every valid lane: parameter step (apply8_*), then each state re-quantized with quantize8.
// AdEMAMix: m2 codes are state1[n + i], its absmax absmax1[ceil(n/256) + b].
// ------------------------------------------------------------------------------------------------

KBIT_HD float dequant8(const float* code, uint8_t c, float absmax) { return code[c] * absmax; }

// The code of state s under the new block absmax: code8_index(s / absmax); for signed states
// (state1, m2) a code whose value has the other sign bit than s moves one code towards s's sign
// (uint8 wrap-around: an all-zero block, 0/0 = NaN -> code 0, becomes code 255).
KBIT_HD uint8_t sign_fix8(const float* code, uint8_t c, float s) {
    if (sign_bit(code[c]) != sign_bit(s)) c = static_cast<uint8_t>(s > 0.0f ? c + 1 : c - 1);
    return c;
}
KBIT_HD uint8_t quantize8(const float* code, float s, float absmax, bool is_signed) {
    const uint8_t c = code8_index(code, s / absmax);
    return is_signed ? sign_fix8(code, c, s) : c;
}

// 2-state (Adam, AdEMAMix) step 1 with m, v, m2 dequantized on entry. A non-finite gradient zeroes
// the states and skips the parameter (returns false). skip_zeros does not apply.
template <Kind K>
KBIT_HD bool update8_two_state(const Consts& c, float graw, float& m, float& v, float& m2) {
    if (!is_finite(graw)) {
        m = v = m2 = 0.0f;
        return false;
    }
    const float g = graw * c.gnorm_scale;
    v = KBIT_OPT_EMA_SQ_LEFT(v, c.beta2, c.omb2, g);
    m = KBIT_OPT_EMA(m, c.beta1, c.omb1, g);
    if (K == Kind::AdEMAMix) m2 = KBIT_OPT_EMA(m2, c.beta3, c.omb3, g);
    return true;
}

// 2-state step 3, parameter part (only when update8_two_state returned true).
template <class T, Kind K>
KBIT_HD float apply8_two_state(const Consts& c, float p, float m, float v, float m2) {
    if (K == Kind::AdEMAMix)
        p = round_to<T>(KBIT_OPT_ADEMAMIX_PARAM(p, m, m2, v, c.lr, c.c1, c.alpha, c.c2, c.eps));
    else
        p = round_to<T>(KBIT_OPT_ADAM_PARAM(p, m, v, c.step_size, c.eps_c2));
    if (c.has_wd) p = round_to<T>(p * c.decay);
    return p;
}

// 1-state step 1 with s dequantized on entry; an element is active unless skip_zeros and g == 0
// (a skipped element keeps its dequantized state, which is re-quantized under the new absmax).
// Lion's weight decay shrinks p here, before its step; d receives Lion's step RN_T(lr * sgn(...)).
// Returns whether step 3 updates p (Lion: active and d != 0 when skip_zeros).
template <class T, Kind K>
KBIT_HD bool update8_one_state(const Consts& c, float graw, float& p, float& s, float& d) {
    if (c.skip_zeros && graw == 0.0f) return false;
    float g = graw * c.gnorm_scale;
    if (c.has_wd) {
        if (K == Kind::Lion) p = round_to<T>(p * c.decay);
        else g = g + p * c.wd;
    }
    switch (K) {
        case Kind::Momentum: s = c.first_step ? g : KBIT_OPT_MOMENTUM(s, c.beta1, g); break;
        case Kind::RMSprop: s = KBIT_OPT_EMA_SQ(s, c.beta1, c.omb1, g); break;
        case Kind::Adagrad: s = KBIT_OPT_ACCUMULATE_SQ(s, g); break;
        case Kind::Lion:
            d = round_to<T>(c.lr * sgn(KBIT_OPT_EMA(s, c.beta1, c.omb1, g)));
            s = KBIT_OPT_EMA(s, c.beta2, c.omb2, g);
            return !c.skip_zeros || d != 0.0f;
        default: break;
    }
    return true;
}

// 1-state step 3, parameter part. RMSprop and Adagrad use the stored gradient (no gnorm_scale, no
// weight decay), as bitsandbytes.
template <class T, Kind K>
KBIT_HD float apply8_one_state(const Consts& c, float graw, float p, float s, float d) {
    switch (K) {
        case Kind::Momentum: return round_to<T>(p - c.lr * s);
        case Kind::Lion: return round_to<T>(p - d);
        default: return round_to<T>(KBIT_OPT_RMS_PARAM(p, graw, s, 1.0f, c.lr, c.eps));
    }
}

}  // namespace kbit::optim
