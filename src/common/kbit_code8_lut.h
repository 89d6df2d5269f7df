// kbit_code8_lut.h — a host-side bucket table that gives the 8-bit optimizers' state quantization,
// optim::quantize8(code, s, absmax, is_signed) = code8_index(code, s / absmax) plus the sign fix,
// in one table load, for SIMD kernels that must reproduce the search exactly but cannot afford its
// seven dependent gathers per value.
//
// Why it is exact. For a non-decreasing table c with finite entries and finite pairwise sums, the
// midpoints m[j] = (c[j] + c[j+1]) * 0.5f (j < 255) are non-decreasing with c[j] <= m[j] <= c[j+1],
// and the search's brackets (it ends with c[p-1] < y <= c[p+1] around an even p) give the closed form
//     code8_index(c, y) = L + (L odd && y == m[L] && y > c[L]),   L = #{ j : m[j] < y }
// (NaN: L = 0). L is a step function of y, so it is constant on every run of floats that holds no
// midpoint. The table has one entry per 16-bit prefix of y's bits (sign, exponent, 7 mantissa bits);
// the floats of one prefix form a run ordered by rank_key (the low 16 bits, reversed for negative
// values). An entry holds the code below and above the run's one midpoint (if any) and the rank at
// which it switches, the tie rule folded in. For signed states the sign fix is folded in too: when
// 0 < absmax < inf, y = s / absmax has s's sign bit and, except at +0.0, its sign, so the fix depends
// on the run only (the run of +0.0 is marked slow where the fix would apply). Runs with several
// midpoints are marked slow and answered by the search itself; so are calls whose absmax is not
// finite and positive (lookup() shows the rule). Tables that do not qualify get no bucket table.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "kbit_optim_math.h"

namespace kbit {

class Code8Lut {
public:
    // Entry (uint32): bits 0-7 the code when rank_key(y) <= bits 16-31, bits 8-15 the code above.
    // kSlow (never a regular entry: those with threshold 0xFFFF have equal codes) marks runs that
    // take the search.
    static constexpr uint32_t kSlow = 0xFFFF0001u;
    static constexpr int kBuckets = 1 << 16;

    Code8Lut(const float* code, bool is_signed) : is_signed_(is_signed) {
        std::memcpy(code_, code, sizeof code_);
        if (!qualifies()) return;
        for (int j = 0; j < 255; ++j) mid_[j] = (code_[j] + code_[j + 1]) * 0.5f;
        entries_.resize(kBuckets);
        build();
    }

    bool ok() const { return !entries_.empty(); }
    bool is_signed() const { return is_signed_; }
    const float* code() const { return code_; }
    const uint32_t* entries() const { return entries_.data(); }
    bool same(const float* code, bool is_signed) const {
        return is_signed == is_signed_ && std::memcmp(code, code_, sizeof code_) == 0;
    }

    // Position of a float within its 16-bit-prefix run, increasing with its value.
    static uint32_t rank_key(uint32_t bits) { return (bits ^ (bits >> 31 ? 0xFFFFFFFFu : 0u)) & 0xFFFFu; }

    // Whether the bucket table applies to a block with this absmax.
    static bool fast_absmax(float absmax) { return absmax > 0.0f && absmax <= FLT_MAX; }

    // optim::quantize8(code(), s, absmax, is_signed()), the way the SIMD kernels evaluate it.
    uint8_t lookup(float s, float absmax) const {
        if (!ok() || !fast_absmax(absmax)) return optim::quantize8(code_, s, absmax, is_signed_);
        const float y = s / absmax;
        const uint32_t u = to_bits(y);
        const uint32_t e = entries_[u >> 16];
        if (e == kSlow) return optim::quantize8(code_, s, absmax, is_signed_);
        return static_cast<uint8_t>(rank_key(u) > (e >> 16) ? e >> 8 : e);
    }

private:
    // Non-decreasing, finite entries and finite pairwise sums (so every midpoint lies between its
    // neighbours, which the closed form needs).
    bool qualifies() const {
        for (int j = 0; j < 256; ++j)
            if (!std::isfinite(code_[j])) return false;
        for (int j = 0; j < 255; ++j)
            if (!(code_[j] <= code_[j + 1]) || !std::isfinite(code_[j] + code_[j + 1])) return false;
        return true;
    }

    static float from_bits(uint32_t u) {
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
    static uint32_t to_bits(float f) {
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        return u;
    }

    // The sign fix of optim::sign_fix8 for a state with sign bit `neg` that is > 0 when `positive`.
    uint32_t fixed(uint32_t r, bool neg, bool positive) const {
        if (!is_signed_ || std::signbit(code_[r]) == neg) return r;
        return (r + (positive ? 1u : 255u)) & 0xFFu;
    }

    static uint32_t entry(uint32_t below, uint32_t above, uint32_t threshold) {
        return below | (above << 8) | (threshold << 16);
    }

    // Walks the runs in increasing value order (negative prefixes from 0xFFFF down to 0x8000, then
    // 0x0000 up to 0x7FFF) with two cursors over the midpoints: a = #{m < bottom}, b = #{m <= top}.
    void build() {
        int a = 0, b = 0;
        for (int step = 0; step < kBuckets; ++step) {
            const uint32_t k = step < 0x8000 ? 0xFFFFu - static_cast<uint32_t>(step)
                                             : static_cast<uint32_t>(step - 0x8000);
            const bool neg = (k & 0x8000u) != 0;
            if ((k & 0x7F80u) == 0x7F80u && (k & 0x7Fu) != 0) {  // NaN: code 0, s > 0 is false
                entries_[k] = entry(fixed(0, neg, false), fixed(0, neg, false), 0xFFFFu);
                continue;
            }
            float lo, hi;
            if ((k & 0x7F80u) == 0x7F80u) {
                lo = hi = neg ? -INFINITY : INFINITY;
            } else {
                lo = from_bits((k << 16) | (neg ? 0xFFFFu : 0u));
                hi = from_bits((k << 16) | (neg ? 0u : 0xFFFFu));
            }
            while (a < 255 && mid_[a] < lo) ++a;
            if (b < a) b = a;
            while (b < 255 && mid_[b] <= hi) ++b;
            // Codes below and above the run's midpoint (equal without one) and the switch rank.
            uint32_t below = static_cast<uint32_t>(a), above = below, threshold = 0xFFFFu;
            if (b == a + 1 && (to_bits(mid_[a]) >> 16) == k) {
                above = below + 1;
                threshold = rank_key(to_bits(mid_[a]));
                if ((a & 1) && mid_[a] > code_[a]) {  // tie rule: y == m[a] goes up
                    if (threshold == 0) below = above, threshold = 0xFFFFu;
                    else --threshold;
                }
            } else if (b != a) {
                entries_[k] = kSlow;
                continue;
            }
            // The run of +0.0: +0.0 is not > 0 but the rest of the run is, so a sign fix there
            // would go both ways.
            if (k == 0 && is_signed_ && (std::signbit(code_[below]) || std::signbit(code_[above]))) {
                entries_[k] = kSlow;
                continue;
            }
            if (threshold == 0xFFFFu) above = below;  // never reached: keeps kSlow unique
            entries_[k] = entry(fixed(below, neg, !neg), fixed(above, neg, !neg), threshold);
        }
    }

    float code_[256];
    float mid_[255];
    bool is_signed_;
    std::vector<uint32_t> entries_;
};

// The bucket table of (code, is_signed), built once per distinct table content and shared (a small
// cache guarded by a mutex; tables are compared by value, so a caller may reuse its buffer).
inline std::shared_ptr<const Code8Lut> code8_lut(const float* code, bool is_signed) {
    static std::mutex mutex;
    static std::shared_ptr<const Code8Lut> cache[8];
    static unsigned next = 0;
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& entry : cache)
            if (entry && entry->same(code, is_signed)) return entry;
    }
    auto lut = std::make_shared<const Code8Lut>(code, is_signed);
    std::lock_guard<std::mutex> lock(mutex);
    cache[next++ % 8] = lut;
    return lut;
}

}  // namespace kbit
