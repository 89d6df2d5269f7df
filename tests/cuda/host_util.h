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

#include "kbit_half.h"

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
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

template <class T>
std::vector<T> to_elems(const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kbit::Elem<T>::store(v[i]);
    return out;
}

template <class T>
uint32_t bits_of(const T& x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof(T));
    return u;
}

// Index of the first element whose bits differ, or -1.
template <class T>
long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
    return -1;
}

// bitsandbytes' create_dynamic_map(signed), fp32 (as the conformance suite builds it).
inline std::vector<float> dynamic_map(bool is_signed) {
    std::vector<float> data;
    for (int d = 0; d <= 6; ++d) {
        const int f = is_signed ? (1 << d) + 1 : (1 << (d + 1)) + 1;
        const float h = (1.0f - 0.1f) / static_cast<float>(f - 1);
        std::vector<float> b(f);
        for (int i = 0; i < f; ++i)
            b[i] = i < f / 2 ? 0.1f + h * static_cast<float>(i) : 1.0f - h * static_cast<float>(f - 1 - i);
        const float scale = static_cast<float>(std::pow(10.0, d - 6));
        for (int i = 0; i + 1 < f; ++i) {
            const float mean = (b[i] + b[i + 1]) / 2.0f;
            data.push_back(scale * mean);
            if (is_signed) data.push_back(-(scale * mean));
        }
    }
    data.push_back(0.0f);
    data.push_back(1.0f);
    std::sort(data.begin(), data.end());
    return data;
}

}  // namespace hostcheck
