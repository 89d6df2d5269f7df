// optim_configs.h — the optimizer steps that the bit-exact optimizer checks run against kbit::ref (the
// conformance suite's test_optim8_exact.cpp and the CUDA host checks' host_optim.cpp), and their
// gradients.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "random_floats.h"

namespace kbit_test {

struct OptimConfig {
    const char* label;
    int step;
    float wd;
    bool skip_zeros;
    float gnorm_scale;
    float max_unorm;  // 32-bit only
    float zero_fraction, special_fraction;  // gradients set to 0, to NaN/Inf
};

inline const OptimConfig kOptimConfigs[] = {
    {"step 1", 1, 0.0f, false, 1.0f, 0.0f, 0.0f, 0.0f},
    {"step 7, wd 0.01, skip_zeros, gnorm 0.7", 7, 0.01f, true, 0.7f, 0.0f, 0.1f, 0.0f},
    {"step 3, clipped (max_unorm 0.5)", 3, 0.0f, false, 1.0f, 0.5f, 0.05f, 0.0f},
    {"step 1000, wd 0.1, clipped hard (max_unorm 0.02), zero gradients", 1000, 0.1f, false, 1.0f, 0.02f, 0.2f, 0.0f},
    {"step 2, NaN/Inf gradients", 2, 0.0f, false, 1.0f, 0.0f, 0.0f, 0.01f},
};

// Gradients of a step: n normal values (stddev 0.01, from `seed`), a fraction of them signed zeros and
// a fraction NaN, +Inf or -Inf, as `cfg` says.
inline std::vector<float> optim_gradients(size_t n, uint32_t seed, const OptimConfig& cfg) {
    auto g = normal_floats(n, seed, 0.01f);
    std::mt19937 rng(seed + 1);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    constexpr float kInf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf};
    for (size_t i = 0; i < n; ++i) {
        const float r = u(rng);
        if (r < cfg.zero_fraction) g[i] = (i % 2) ? 0.0f : -0.0f;
        else if (r < cfg.zero_fraction + cfg.special_fraction) g[i] = specials[i % 3];
    }
    return g;
}

}  // namespace kbit_test
