// testutil.h — data generators and assertion helpers shared by the conformance tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "backend.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"

namespace kbit_test {

// n normally distributed floats (deterministic for a seed).
inline std::vector<float> normal_floats(size_t n, uint32_t seed, float stddev = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// n uniformly random bytes (deterministic for a seed), e.g. packed 4-bit codes.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

// Converts fp32 values to an element type with one round-to-nearest-even step.
template <class T>
std::vector<T> to_elems(const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kbit::Elem<T>::store(v[i]);
    return out;
}

template <class T>
std::vector<float> to_floats(const std::vector<T>& v) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kbit::Elem<T>::load(v[i]);
    return out;
}

// Bit pattern of any 1/2/4-byte element (for exact comparisons that treat NaN payloads and signed
// zeros as data).
template <class T>
uint32_t bits_of(const T& x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof(T));
    return u;
}

// Index of the first element whose bits differ, or -1.
template <class T>
long first_bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
    return -1;
}

// CHECKs that `status` is KBIT_STATUS_INVALID_ARGUMENT and the backend's message is `message`.
inline void check_invalid(kbit_status status, const std::string& message) {
    const auto& c = backend().core;
    INFO("expected: " << message);
    CHECK(std::string(c.kbit_status_string(status)) == "KBIT_STATUS_INVALID_ARGUMENT");
    CHECK(std::string(c.kbit_last_error_message()) == message);
}

// bitsandbytes' create_dynamic_map tables (src/common/kbit_dynamic_map.h).
using kbit::dynamic_map;

}  // namespace kbit_test
