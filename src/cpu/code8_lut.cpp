#include "code8_lut.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "kbit_code8.h"

namespace kbit::cpu {
namespace {

// The search compares y only with table entries and with fp32 midpoints of neighbours (for any
// table, the final step compares with (c[p] + c[p +- 1]) * 0.5f), so its result is constant on every
// run of keys that contains none of those values. Returns their keys, sorted; zero occupies two keys
// (-0.0 and +0.0).
std::vector<int64_t> event_keys(const float* c) {
    std::vector<int64_t> keys;
    auto add = [&](float v) {
        if (std::isnan(v)) return;  // comparisons with NaN are constant
        if (v == 0.0f) {
            keys.push_back(code8_key(-0.0f));
            keys.push_back(code8_key(0.0f));
        } else {
            keys.push_back(code8_key(v));
        }
    };
    for (int j = 0; j < 256; ++j) add(c[j]);
    for (int j = 0; j < 255; ++j) add((c[j] + c[j + 1]) * 0.5f);
    add((c[0] + c[0]) * 0.5f);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

}  // namespace

Code8Lut::Code8Lut(const float* code) {
    std::memcpy(code_, code, sizeof code_);
    entries_.assign(kBuckets, 0);
    const std::vector<int64_t> events = event_keys(code_);
    auto index_at = [&](int64_t key) {
        return static_cast<uint32_t>(code8_index(code_, code8_key_value(static_cast<int32_t>(key))));
    };
    const int64_t key_neg_inf = code8_key(-std::numeric_limits<float>::infinity());
    const int64_t key_pos_inf = code8_key(std::numeric_limits<float>::infinity());

    size_t next_event = 0;
    uint32_t current = index_at(key_neg_inf);  // the search result on the run being swept
    std::vector<int64_t> starts;
    std::vector<uint32_t> values;
    auto bucket_of = [](int64_t key) {
        return static_cast<int32_t>(std::clamp<int64_t>(key >> 16, kFirstBucket, kLastBucket) - kFirstBucket);
    };
    for (int32_t i = 0; i < kBuckets; ++i) {
        const int64_t t = kFirstBucket + i;
        const bool merged = (i == 0 || i == kBuckets - 1);
        const int64_t lo = i == 0 ? key_neg_inf : t * 65536;
        const int64_t hi = i == kBuckets - 1 ? key_pos_inf : t * 65536 + 0xFFFF;
        while (next_event < events.size() && events[next_event] < lo - 1) ++next_event;
        if (i > 0 && (next_event == events.size() || events[next_event] > hi)) {
            // No run starts in the buckets up to the next event's: all constant.
            const int32_t stop = next_event == events.size() ? kBuckets : bucket_of(events[next_event]);
            std::fill(entries_.begin() + i, entries_.begin() + stop, current << 16);
            i = stop - 1;
            continue;
        }
        // Runs start at lo, at each event key and just after it.
        starts.assign(1, lo);
        for (size_t e = next_event; e < events.size() && events[e] <= hi; ++e) {
            if (events[e] > lo) starts.push_back(events[e]);
            if (events[e] + 1 > lo && events[e] + 1 <= hi) starts.push_back(events[e] + 1);
        }
        std::sort(starts.begin(), starts.end());
        starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
        values.clear();
        for (int64_t s : starts) values.push_back(index_at(s));
        current = values.back();

        int changes = 0;
        size_t step_at = 0;
        for (size_t j = 1; j < values.size(); ++j)
            if (values[j] != values[j - 1]) {
                ++changes;
                step_at = j;
            }
        if (changes == 0) {
            entries_[i] = values[0] << 16;
        } else if (changes == 1 && !merged && values[step_at] == values[0] + 1) {
            const uint32_t step_low = static_cast<uint32_t>(starts[step_at] - lo);  // in 1 ... 0xFFFF
            entries_[i] = (values[0] << 16) + (0xFFFFu - (step_low - 1u));
        } else {
            entries_[i] = kScalarFlag;
        }
    }
}

double Code8Lut::scalar_bucket_fraction() const {
    const auto flagged = std::count_if(entries_.begin(), entries_.end(),
                                       [](uint32_t e) { return (e & kScalarFlag) != 0; });
    return static_cast<double>(flagged) / static_cast<double>(entries_.size());
}

std::shared_ptr<const Code8Lut> code8_lut(const float* code, bool build_if_missing) {
    // Callers use one or two tables (the signed and unsigned dynamic maps); a few slots, most
    // recently used first, keyed by content so that a table rewritten in place is never mistaken.
    constexpr size_t kSlots = 4;
    static std::mutex mutex;
    static std::vector<std::shared_ptr<const Code8Lut>> cache;
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (size_t i = 0; i < cache.size(); ++i)
            if (cache[i]->same_table(code)) {
                std::rotate(cache.begin(), cache.begin() + static_cast<long>(i), cache.begin() + static_cast<long>(i) + 1);
                return cache.front();
            }
    }
    if (!build_if_missing) return nullptr;
    auto lut = std::make_shared<const Code8Lut>(code);  // built outside the lock
    std::lock_guard<std::mutex> lock(mutex);
    cache.insert(cache.begin(), lut);
    if (cache.size() > kSlots) cache.pop_back();
    return lut;
}

}  // namespace kbit::cpu
