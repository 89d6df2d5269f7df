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
#include "elem_vectors.h"
#include "fn_tags.h"
#include "functions.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"
#include "random_floats.h"

namespace kbit_test {

// n uniformly random bytes (deterministic for a seed), e.g. packed 4-bit codes.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

// CHECKs that `status` is KBIT_STATUS_INVALID_ARGUMENT and the backend's message is `message`.
inline void check_invalid(kbit_status status, const std::string& message) {
    Plumbing plumbing;  // the call under test returned `status` before
    const auto& c = backend().fns_core;
    INFO("expected: " << message);
    CHECK(std::string(c.kbit_status_string(status)) == "KBIT_STATUS_INVALID_ARGUMENT");
    CHECK(std::string(c.kbit_last_error_message()) == message);
}

// bitsandbytes' create_dynamic_map tables (src/common/kbit_dynamic_map.h).
using kbit::dynamic_map;

}  // namespace kbit_test
