// Optimizers, state quantization: the bucket table of kbit_code8_lut.h (used by SIMD kernels) gives
// exactly optim::quantize8 (code8_index of s / absmax plus the sign fix) for every table it accepts,
// on table entries, midpoints and their neighbours, special values and random values.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "kbit_code8_lut.h"
#include "testutil.h"

using kbit::Code8Lut;
using kbit_test::dynamic_map;

namespace {

struct Table {
    const char* label;
    std::vector<float> code;
};

std::vector<Table> tables() {
    std::vector<Table> t;
    t.push_back({"signed dynamic map", dynamic_map(true)});
    t.push_back({"unsigned dynamic map", dynamic_map(false)});
    std::vector<float> lin;  // create_linear_map(signed): 0.0 twice
    for (int i = 0; i < 255; ++i) lin.push_back(-1.0f + 2.0f * static_cast<float>(i) / 254.0f);
    lin.insert(lin.begin() + 127, 0.0f);
    t.push_back({"linear map with a repeated zero", lin});
    std::vector<float> fp8;  // E4M3-like values, both zeros, normalised to 1
    for (int sign : {-1, 1})
        for (int e = 0; e < 16; ++e)
            for (int m = 0; m < 8; ++m) {
                const float v = e == 0 ? m / 8.0f * std::ldexp(1.0f, -6) : (1.0f + m / 8.0f) * std::ldexp(1.0f, e - 7);
                fp8.push_back(sign * v / 480.0f);
            }
    std::sort(fp8.begin(), fp8.end());
    t.push_back({"fp8 map with -0 and +0", fp8});
    auto crowd = dynamic_map(true);  // several midpoints per 16-bit prefix
    for (int i = 200; i < 240; ++i) crowd[i] = std::nextafter(crowd[199], 2.0f) + static_cast<float>(i - 200) * 6e-8f;
    std::sort(crowd.begin(), crowd.end());
    t.push_back({"crowded entries one ulp apart", crowd});
    auto shifted = dynamic_map(true);  // zero state maps to a negative code: the +0.0 run is ambiguous
    for (auto& x : shifted) x -= 1e-9f;
    std::sort(shifted.begin(), shifted.end());
    t.push_back({"signed map shifted below zero", shifted});
    auto top = dynamic_map(false);
    top[255] = 0.9f;
    std::sort(top.begin(), top.end());
    t.push_back({"unsigned map with top 0.9", top});
    std::mt19937 rng(11);
    for (int r = 0; r < 4; ++r) {
        std::vector<float> c(256);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (auto& x : c) x = u(rng) * (r % 2 ? 1.0f : 1e-3f);
        for (int i = 0; i < 40; ++i) c[rng() % 256] = c[rng() % 256];  // duplicates
        std::sort(c.begin(), c.end());
        t.push_back({"random table with duplicates", c});
    }
    return t;
}

std::vector<float> probes(const std::vector<float>& c, float absmax) {
    std::vector<float> s{0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, absmax, -absmax, 1e-45f, -1e-45f};
    for (int j = 0; j < 256; ++j) {
        const float mid = j < 255 ? (c[j] + c[j + 1]) * 0.5f : c[j];
        for (float y : {c[j], mid}) {
            for (float z : {y, std::nextafter(y, -2.0f), std::nextafter(y, 2.0f)}) {
                s.push_back(z * absmax);
                s.push_back(-z * absmax);
            }
        }
    }
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < 20000; ++i) s.push_back(u(rng) * absmax);
    for (int i = 0; i < 5000; ++i) s.push_back(u(rng) * 1e-5f * absmax);
    return s;
}

}  // namespace

TEST_CASE("optim8 code8 lut: bucket table equals quantize8 for every accepted table, signed and unsigned", "[optim8][code8]") {
    for (const auto& t : tables()) {
        for (bool is_signed : {true, false}) {
            const Code8Lut lut(t.code.data(), is_signed);
            INFO(t.label << (is_signed ? " (signed)" : " (unsigned)"));
            REQUIRE(lut.ok());
            for (float absmax : {1.0f, 0.37f, 3e-5f, 1e30f, 1e-40f, FLT_MAX}) {
                long mismatches = 0;
                float first = 0.0f;
                for (float s : probes(t.code, absmax)) {
                    if (lut.lookup(s, absmax) != kbit::optim::quantize8(t.code.data(), s, absmax, is_signed)) {
                        if (mismatches++ == 0) first = s;
                    }
                }
                INFO("absmax " << absmax << ", first mismatching s " << first);
                CHECK(mismatches == 0);
            }
            for (float absmax : {0.0f, INFINITY, -FLT_MAX, NAN})  // blocks the table leaves to the rule
                for (float s : {0.0f, -0.0f, 0.5f, -0.5f, NAN, INFINITY})
                    REQUIRE(lut.lookup(s, absmax) == kbit::optim::quantize8(t.code.data(), s, absmax, is_signed));
        }
    }
}

TEST_CASE("optim8 code8 lut: dynamic maps never take the slow runs; unusable tables get no bucket table", "[optim8][code8]") {
    for (bool is_signed : {true, false}) {
        const auto code = dynamic_map(is_signed);
        const Code8Lut lut(code.data(), is_signed);
        REQUIRE(lut.ok());
        // Runs a normalised state can reach: |y| <= 1.
        int slow = 0;
        for (uint32_t k = 0; k < 0x10000u; ++k)
            if ((k & 0x7FFFu) <= 0x3F80u && lut.entries()[k] == Code8Lut::kSlow) ++slow;
        CHECK(slow == 0);
    }
    auto bad = dynamic_map(true);
    bad[255] = INFINITY;
    CHECK_FALSE(Code8Lut(bad.data(), true).ok());
    bad = dynamic_map(true);
    std::swap(bad[10], bad[11]);  // decreasing pair
    CHECK_FALSE(Code8Lut(bad.data(), true).ok());
    bad = dynamic_map(true);
    bad[0] = NAN;
    CHECK_FALSE(Code8Lut(bad.data(), false).ok());
    // A table without a bucket table still answers through the rule.
    CHECK(Code8Lut(bad.data(), false).lookup(0.25f, 1.0f) == kbit::optim::quantize8(bad.data(), 0.25f, 1.0f, false));
}
