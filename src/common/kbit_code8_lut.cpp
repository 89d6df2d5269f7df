#include "kbit_code8_lut.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "kbit_code8.h"
#include "kbit_optim_math.h"

namespace kbit {
namespace {

// Order-preserving integer key of a float's bits (-0.0 just below +0.0, NaNs beyond the infinities);
// its low 16 bits are Code8Lut::rank and its high 16 bits number the buckets in value order.
int32_t key_of(float y) {
    uint32_t u;
    std::memcpy(&u, &y, sizeof u);
    return static_cast<int32_t>(u ^ (static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) >> 1));
}

float value_of(int32_t k) {
    const uint32_t u = static_cast<uint32_t>(k) ^ (static_cast<uint32_t>(k >> 31) >> 1);
    float y;
    std::memcpy(&y, &u, sizeof y);
    return y;
}

// Keys where the rule's answer may change (see the header): table entries, the midpoints the search
// compares with (the last step compares with (c[p] + c[p +- 1]) * 0.5f, and with (c[0] + c[0]) * 0.5f
// at the bottom), ±0 (two keys that compare equal) and ±inf (NaNs lie beyond them). Sorted, unique.
std::vector<int64_t> event_keys(const float* c) {
    std::vector<int64_t> keys;
    auto add = [&](float v) {
        if (std::isnan(v)) return;  // comparisons with NaN are constant
        keys.push_back(key_of(v));
        if (v == 0.0f) keys.push_back(key_of(-v));
    };
    for (int j = 0; j < 256; ++j) add(c[j]);
    for (int j = 0; j < 255; ++j) add((c[j] + c[j + 1]) * 0.5f);
    add((c[0] + c[0]) * 0.5f);
    for (float v : {0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) add(v);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

// Buckets are swept in value order: number i holds the keys with key >> 16 == i - 0x8000, that is
// the floats with bits >> 16 == 0xFFFF - i below zero and i - 0x8000 from zero up.
uint32_t bucket_at(int64_t i) { return static_cast<uint32_t>(i < 0x8000 ? 0xFFFF - i : i - 0x8000); }

// Sets the entries of buckets [i0, i1) in value order.
void fill_buckets(uint32_t* entries, int64_t i0, int64_t i1, uint32_t value) {
    if (i0 < 0x8000) {
        const int64_t end = std::min<int64_t>(i1, 0x8000);
        std::fill(entries + bucket_at(end - 1), entries + bucket_at(i0) + 1, value);
    }
    if (i1 > 0x8000) std::fill(entries + bucket_at(std::max<int64_t>(i0, 0x8000)), entries + bucket_at(i1 - 1) + 1, value);
}

}  // namespace

Code8Lut::Code8Lut(const float* code, bool sign_fix) : sign_fix_(sign_fix), entries_(new uint32_t[kBuckets]) {
    std::memcpy(code_, code, sizeof code_);
    auto rule = [&](float y) -> uint32_t {
        const uint8_t c = code8_index(code_, y);
        return sign_fix_ ? optim::sign_fix8(code_, c, y) : c;
    };
    auto rule_at = [&](int64_t key) { return rule(value_of(static_cast<int32_t>(key))); };
    const std::vector<int64_t> events = event_keys(code_);

    // Sweep the buckets in value order; `current` is the answer on the run being swept.
    size_t next_event = 0;
    uint32_t current = rule_at(std::numeric_limits<int32_t>::min());
    std::vector<int64_t> starts;
    std::vector<uint32_t> values;
    for (int64_t i = 0; i < kBuckets; ++i) {
        const int64_t lo = (i - 0x8000) * 65536, hi = lo + 0xFFFF;
        while (next_event < events.size() && events[next_event] < lo - 1) ++next_event;
        if (next_event == events.size() || events[next_event] > hi) {
            // No run starts before the next event's bucket: all constant.
            const int64_t stop = next_event == events.size() ? kBuckets : (events[next_event] >> 16) + 0x8000;
            fill_buckets(entries_.get(), i, stop, current << 16);
            i = stop - 1;
            continue;
        }
        // Runs start at lo, at each event and just after it.
        starts.assign(1, lo);
        for (size_t e = next_event; e < events.size() && events[e] <= hi; ++e) {
            if (events[e] > lo) starts.push_back(events[e]);
            if (events[e] + 1 > lo && events[e] + 1 <= hi) starts.push_back(events[e] + 1);
        }
        std::sort(starts.begin(), starts.end());
        starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
        values.clear();
        for (int64_t s : starts) values.push_back(rule_at(s));
        current = values.back();

        int changes = 0;
        size_t step_at = 0;
        for (size_t j = 1; j < values.size(); ++j)
            if (values[j] != values[j - 1]) {
                ++changes;
                step_at = j;
            }
        uint32_t& entry = entries_[bucket_at(i)];
        if (changes == 0) entry = values[0] << 16;
        else if (changes == 1 && values[step_at] == values[0] + 1)
            entry = (values[0] << 16) + 0x10000u - static_cast<uint32_t>(starts[step_at] - lo);  // rank 1 ... 0xFFFF
        else entry = kIrregular;
    }
    // y = +0.0 also comes from a positive s that underflowed, whose fix may differ from s = +0.0's.
    if (sign_fix_) {
        const uint8_t c0 = code8_index(code_, 0.0f);
        if (optim::sign_fix8(code_, c0, 0.0f) != optim::sign_fix8(code_, c0, std::numeric_limits<float>::denorm_min()))
            entries_[0] = kIrregular;
    }
}

double Code8Lut::irregular_fraction() const {
    const auto n = std::count_if(entries(), entries() + kBuckets, [](uint32_t e) { return (e & kIrregular) != 0; });
    return static_cast<double>(n) / kBuckets;
}

std::shared_ptr<const Code8Lut> code8_lut(const float* code, bool sign_fix, bool build_if_missing) {
    // Callers use a few tables (the signed and unsigned dynamic maps, plain and sign-fixed); a few
    // slots, most recently used first, compared by content.
    constexpr size_t kSlots = 8;
    static std::mutex mutex;
    static std::vector<std::shared_ptr<const Code8Lut>> cache;
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (size_t i = 0; i < cache.size(); ++i)
            if (cache[i]->same(code, sign_fix)) {
                std::rotate(cache.begin(), cache.begin() + static_cast<long>(i), cache.begin() + static_cast<long>(i) + 1);
                return cache.front();
            }
    }
    if (!build_if_missing) return nullptr;
    auto lut = std::make_shared<const Code8Lut>(code, sign_fix);  // built outside the lock
    std::lock_guard<std::mutex> lock(mutex);
    cache.insert(cache.begin(), lut);
    if (cache.size() > kSlots) cache.pop_back();
    return lut;
}

}  // namespace kbit
