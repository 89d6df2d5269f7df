// kbit_code8_lut.h — a bucket table that answers kbit::code8_index (the exact 8-bit code search of
// kbit_code8.h) for one 256-entry table with one table load per value instead of eight dependent
// comparisons; optionally with the 8-bit optimizers' sign fix folded in. Host side: the CPU
// backend's blockwise quantizer and optimizer kernels use it.
//
// Layout. The bits u of a float split into a bucket, u >> 16 (sign, exponent, 7 mantissa bits), and
// a rank, the low 16 bits reversed for negative values, so that within a bucket the rank increases
// with the value. A bucket's entry e gives the answer as
//     index = (e + rank) >> 16
// with e = a << 16 for a bucket whose answer is a throughout, e = (a << 16) + 0x10000 - r for one
// that steps from a to a + 1 at rank r, and e = kIrregular (bit 31) for any other bucket: then
// e + rank has bit 31 set and the caller runs the search for that value.
//
// Why it is exact. Whatever the table (unsorted, infinite or NaN entries included), the search
// compares y only with table entries and with fp32 midpoints of neighbours, (c[p] + c[p +- 1]) * 0.5f,
// and returns 0 for NaN, so its answer is constant on every run of floats that crosses none of those
// values, ±0 or ±inf. The builder evaluates the rule at the start of every such run and encodes each
// bucket from those answers, so every regular entry is the rule's answer for every float of its
// bucket. Irregular buckets are rare: none within [-1, 1] for bitsandbytes' dynamic maps, a fraction
// of a percent for random and extreme tables.
//
// Sign fix. The optimizers store a state s under absmax as optim::quantize8(code, s, absmax, true):
// code8_index(code, s / absmax), then optim::sign_fix8, which depends on s's sign bit and on s > 0.
// For 0 < absmax <= FLT_MAX (keeps_sign), y = s / absmax has s's sign bit (x86 passes a NaN operand's
// sign through) and y > 0 exactly when s > 0, except y = +0.0 from a positive s that underflowed; so a
// sign-fixed table evaluates the rule with y in place of s and makes the bucket of +0.0 irregular
// where that exception would change the fix.
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <memory>

namespace kbit {

class Code8Lut {
public:
    static constexpr int kBuckets = 1 << 16;
    static constexpr uint32_t kIrregular = 0x80000000u;

    // With sign_fix, entries answer optim::quantize8(code, s, absmax, true) for y = s / absmax.
    Code8Lut(const float* code, bool sign_fix);

    static uint32_t bucket(uint32_t bits) { return bits >> 16; }
    static uint32_t rank(uint32_t bits) {
        return (bits ^ static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31)) & 0xFFFFu;
    }
    // Whether a sign-fixed table applies to y = s / absmax.
    static bool keeps_sign(float absmax) { return absmax > 0.0f && absmax <= FLT_MAX; }

    const uint32_t* entries() const { return entries_.get(); }
    const float* code() const { return code_; }
    bool sign_fix() const { return sign_fix_; }
    bool same(const float* code, bool sign_fix) const {
        return sign_fix == sign_fix_ && std::memcmp(code, code_, sizeof code_) == 0;
    }

    // The table's answer for y, as the kernels evaluate it; -1 where the bucket is irregular.
    int find(float y) const {
        uint32_t u;
        std::memcpy(&u, &y, sizeof u);
        const uint32_t sum = entries_[bucket(u)] + rank(u);
        return (sum & kIrregular) != 0 ? -1 : static_cast<int>(sum >> 16);
    }

    // Share of irregular buckets (diagnostics and tests).
    double irregular_fraction() const;

private:
    float code_[256];
    bool sign_fix_;
    std::unique_ptr<uint32_t[]> entries_;  // kBuckets, each written once by the constructor
};

// The table for (code, sign_fix): from a small process-wide cache keyed by the table's content (a
// caller may rewrite its buffer in place), or built now (about 0.1 ms) unless build_if_missing is
// false (then nullptr). Thread-safe.
std::shared_ptr<const Code8Lut> code8_lut(const float* code, bool sign_fix, bool build_if_missing = true);

}  // namespace kbit
