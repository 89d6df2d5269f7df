// host_util.h — data generators and comparisons of the GPU-less host checks (kbit_cuda_host_logic).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "elem_vectors.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"
#include "random_floats.h"

namespace hostcheck {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Floats that reach every branch of a rounding or comparison rule: signed zeros, infinities, NaNs of
// both signs, subnormals, the limits, halfway values, then normal and uniform random values and
// random bit patterns.
inline std::vector<float> probe_floats(size_t random_count, uint32_t seed) {
    std::vector<float> v = {0.0f,  -0.0f, kInf,   -kInf,   kNaN,   -kNaN,  kbit::bits_float(0x7FA00001u),
                            1e-45f, -1e-45f, 1e-40f, FLT_MIN, FLT_MAX, -FLT_MAX, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f,
                            126.5f, 127.5f, -128.5f, 128.0f, -129.0f, 2147483520.0f, 2147483648.0f, -2147483648.0f,
                            -2147483904.0f, 1e10f, -1e10f};
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 100.0f);
    std::uniform_int_distribution<uint32_t> bits;
    for (size_t i = 0; i < random_count; ++i) {
        v.push_back(nd(rng));
        v.push_back(std::nearbyint(nd(rng)) + 0.5f);
        v.push_back(kbit::bits_float(bits(rng)));
    }
    return v;
}

inline std::vector<float> normal(size_t n, uint32_t seed, float stddev) {
    return kbit_test::normal_floats(n, seed, stddev);
}

// Shared with the conformance suite (tests/common, src/common).
using kbit::dynamic_map;
using kbit_test::bits_of;
using kbit_test::first_bit_difference;
using kbit_test::to_elems;

}  // namespace hostcheck
