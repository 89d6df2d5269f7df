// random_floats.h — deterministic random data shared by the conformance suite and the CUDA tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kbit_test {

// n normally distributed floats (deterministic for a seed).
inline std::vector<float> normal_floats(size_t n, uint32_t seed, float stddev = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

}  // namespace kbit_test
