// kbit_dynamic_map.h — bitsandbytes' default 8-bit code table, for callers that need one (tests,
// benchmarks): the backends take the caller's table and never build it. Host side.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace kbit {

// create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), evaluated in fp32 the way torch 2.15's
// AVX2/AVX-512 CPU linspace evaluates it (each point one fused multiply-add, docs/behaviour.md §1.6):
// 256 ascending values.
inline std::vector<float> dynamic_map(bool is_signed) {
    std::vector<float> data;
    for (int d = 0; d <= 6; ++d) {
        const int F = is_signed ? (1 << d) + 1 : (1 << (d + 1)) + 1;
        const float h = (1.0f - 0.1f) / static_cast<float>(F - 1);
        std::vector<float> b(F);
        for (int i = 0; i < F; ++i) {
            // Written as std::fma: host code is built with -ffp-contract=off, so nothing else fuses.
            b[i] = i < F / 2 ? std::fma(h, static_cast<float>(i), 0.1f)
                             : std::fma(-h, static_cast<float>(F - 1 - i), 1.0f);
        }
        const float scale = static_cast<float>(std::pow(10.0, d - 6));
        for (int i = 0; i + 1 < F; ++i) {
            const float sum = b[i] + b[i + 1];
            const float mean = sum / 2.0f;
            data.push_back(scale * mean);
            if (is_signed) data.push_back(-(scale * mean));
        }
    }
    data.push_back(0.0f);
    data.push_back(1.0f);
    std::sort(data.begin(), data.end());
    return data;
}

}  // namespace kbit
