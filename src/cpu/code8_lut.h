// code8_lut.h — a per-table lookup structure that gives kbit::code8_index (the exact 8-bit code
// search of kbit_code8.h) for one 256-entry table with one table load per element instead of eight
// dependent comparisons.
//
// Values are keyed by the monotone integer image of their fp32 bits, K(y) (order-preserving, -0.0 just
// below +0.0). Bucket t holds the keys whose top 16 bits are t, i.e. sign, exponent and 7 mantissa
// bits; all y <= -1 share the first bucket and all y >= 1 the last (a normalised value never leaves
// [-1, 1] unless absmax is 0, subnormal or infinite). Within a bucket the search result, as a
// function of the key, is almost always constant or steps once from a to a + 1; the entry stores a and
// the step position so that
//     index = (entry + (K & 0xFFFF)) >> 16.
// Buckets with anything else (two steps in one bucket, a step of another size, a non-constant merged
// bucket) are flagged with bit 31 and those elements fall back to the scalar search. The search
// compares y only with table entries and fp32 midpoints of neighbours, whatever the table's order,
// so this is exact for any 256 floats (flagged buckets are rare: none for bitsandbytes' maps, under
// 0.2% for random and extreme tables). Built in about 0.1 ms and cached by table content.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace kbit::cpu {

// Order-preserving integer key of a non-NaN float (the same map the lookup kernels evaluate).
inline int32_t code8_key(float y) {
    uint32_t u;
    std::memcpy(&u, &y, sizeof u);
    return static_cast<int32_t>(u ^ ((static_cast<uint32_t>(static_cast<int32_t>(u) >> 31)) >> 1));
}

// Inverse of code8_key.
inline float code8_key_value(int32_t k) {
    const uint32_t u = static_cast<uint32_t>(k) ^ (static_cast<uint32_t>(k >> 31) >> 1);
    float y;
    std::memcpy(&y, &u, sizeof y);
    return y;
}

class Code8Lut {
public:
    static constexpr int32_t kFirstBucket = -0x3F81;  // code8_key(-1.0f) >> 16
    static constexpr int32_t kLastBucket = 0x3F80;    // code8_key(+1.0f) >> 16
    static constexpr int32_t kBuckets = kLastBucket - kFirstBucket + 1;
    static constexpr uint32_t kScalarFlag = 0x80000000u;

    explicit Code8Lut(const float* code);

    // Entries indexed by clamp(K >> 16, kFirstBucket, kLastBucket) - kFirstBucket.
    const uint32_t* entries() const { return entries_.data(); }
    const float* code() const { return code_; }
    bool same_table(const float* code) const { return std::memcmp(code, code_, sizeof code_) == 0; }
    // Share of buckets that take the scalar search (diagnostics and tests).
    double scalar_bucket_fraction() const;

private:
    float code_[256];
    std::vector<uint32_t> entries_;
};

// The lookup structure for `code` (256 floats): from a small process-wide cache keyed by the table's
// full content, or built now (about 0.1 ms) unless build_if_missing is false (then nullptr).
// Thread-safe.
std::shared_ptr<const Code8Lut> code8_lut(const float* code, bool build_if_missing = true);

}  // namespace kbit::cpu
