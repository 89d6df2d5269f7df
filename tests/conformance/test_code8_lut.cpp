// The bucket table of kbit_code8_lut.h (the CPU backend's fast path of the 8-bit code search, used by
// the blockwise quantizer and, sign-fixed, by the optimizers): wherever a bucket answers, it answers
// exactly code8_index (plain) or optim::quantize8 (sign-fixed), for every table, on table entries,
// midpoints and their neighbours, dense sweeps around every midpoint, every bucket's edges and step,
// special and random values; irregular buckets (which take the search) stay rare.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include <catch2/catch.hpp>

#include "kbit_code8.h"
#include "kbit_code8_lut.h"
#include "kbit_optim_math.h"
#include "test_8bit_util.h"

using kbit::Code8Lut;
using namespace kbit_test;

namespace {

// The blockwise tests' tables (dynamic maps, linear with a repeated zero, random with duplicates,
// extreme, unsorted) and the optimizer tests' corner cases.
std::vector<CodeTable> lut_tables() {
    std::vector<CodeTable> t = code_tables();
    std::vector<float> fp8;  // E4M3-like values, both zeros, normalised to 1
    for (int sign : {-1, 1})
        for (int e = 0; e < 16; ++e)
            for (int m = 0; m < 8; ++m) {
                const float v = e == 0 ? m / 8.0f * std::ldexp(1.0f, -6) : (1.0f + m / 8.0f) * std::ldexp(1.0f, e - 7);
                fp8.push_back(sign * v / 480.0f);
            }
    std::sort(fp8.begin(), fp8.end());
    t.push_back({"fp8 map with -0 and +0", fp8});
    auto crowd = dynamic_map(true);  // several midpoints per bucket
    for (int i = 200; i < 240; ++i) crowd[i] = std::nextafter(crowd[199], 2.0f) + static_cast<float>(i - 200) * 6e-8f;
    std::sort(crowd.begin(), crowd.end());
    t.push_back({"crowded entries one ulp apart", crowd});
    auto shifted = dynamic_map(true);  // a zero state maps to a negative code: the +0.0 bucket is ambiguous
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
        t.push_back({"random table with duplicates " + std::to_string(r), c});
    }
    auto inf_top = dynamic_map(true);
    inf_top[255] = INFINITY;
    t.push_back({"signed map ending in +inf", inf_top});
    auto swapped = dynamic_map(true);
    std::swap(swapped[10], swapped[11]);
    t.push_back({"signed map with a decreasing pair", swapped});
    auto nan_first = dynamic_map(true);
    nan_first[0] = NAN;
    t.push_back({"signed map starting with NaN", nan_first});
    return t;
}

// Values y that the search distinguishes (adversarial_values), 32 floats on both sides of every
// midpoint, and random values at two scales.
std::vector<float> probe_values(const std::vector<float>& c) {
    std::vector<float> v = adversarial_values(c);
    const auto near = midpoint_neighbours(c, 32);
    v.insert(v.end(), near.begin(), near.end());
    v.push_back(1e-45f);
    v.push_back(-1e-45f);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < 20000; ++i) v.push_back(u(rng));
    for (int i = 0; i < 5000; ++i) v.push_back(u(rng) * 1e-5f);
    return v;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Per bucket: its first and last float, and both sides of its step.
std::vector<float> bucket_edges(const Code8Lut& lut) {
    std::vector<float> v;
    for (uint32_t t = 0; t < Code8Lut::kBuckets; ++t) {
        const uint32_t neg = t >> 15 ? 0xFFFFu : 0u;  // rank -> low bits
        v.push_back(float_of(t << 16));
        v.push_back(float_of((t << 16) | 0xFFFFu));
        const uint32_t e = lut.entries()[t];
        if ((e & Code8Lut::kIrregular) == 0 && (e & 0xFFFFu) != 0) {
            const uint32_t step = 0x10000u - (e & 0xFFFFu);
            v.push_back(float_of((t << 16) | (step ^ neg)));
            v.push_back(float_of((t << 16) | ((step - 1) ^ neg)));
        }
    }
    return v;
}

// Irregular buckets a normalised value (|y| <= 1) can reach.
int irregular_within_one(const Code8Lut& lut) {
    int n = 0;
    for (uint32_t t = 0; t < Code8Lut::kBuckets; ++t)
        if ((t & 0x7FFFu) <= 0x3F80u && (lut.entries()[t] & Code8Lut::kIrregular) != 0) ++n;
    return n;
}

}  // namespace

TEST_CASE("code8 lut: every answering bucket equals code8_index, every table", "[8bit][optim8][code8]") {
    for (const auto& t : lut_tables()) {
        INFO(t.name);
        const Code8Lut lut(t.code.data(), false);
        auto values = probe_values(t.code);
        const auto edges = bucket_edges(lut);
        values.insert(values.end(), edges.begin(), edges.end());
        long mismatches = 0, answered = 0;
        float first = 0.0f;
        for (float y : values) {
            const int got = lut.find(y);
            if (got < 0) continue;
            ++answered;
            if (got != kbit::code8_index(t.code.data(), y) && mismatches++ == 0) first = y;
        }
        INFO("first mismatching y " << first << " of " << values.size());
        CHECK(mismatches == 0);
        CHECK(answered > static_cast<long>(values.size()) * 9 / 10);
        CHECK(lut.irregular_fraction() < 0.01);
    }
}

TEST_CASE("code8 lut: sign-fixed and plain tables equal quantize8 of s / absmax, every table and absmax",
          "[8bit][optim8][code8]") {
    for (const auto& t : lut_tables()) {
        for (bool sign_fix : {true, false}) {
            const Code8Lut lut(t.code.data(), sign_fix);
            INFO(t.name << (sign_fix ? " (sign-fixed)" : " (plain)"));
            for (float absmax : {1.0f, 0.37f, 3e-5f, 1e30f, 1e-40f, FLT_MAX}) {
                REQUIRE(Code8Lut::keeps_sign(absmax));
                std::vector<float> states{0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, absmax, -absmax};
                for (float y : probe_values(t.code)) {
                    states.push_back(y * absmax);
                    states.push_back(-y * absmax);
                }
                long mismatches = 0;
                float first = 0.0f;
                for (float s : states) {
                    const int got = lut.find(s / absmax);
                    if (got >= 0 && got != kbit::optim::quantize8(t.code.data(), s, absmax, sign_fix) &&
                        mismatches++ == 0)
                        first = s;
                }
                INFO("absmax " << absmax << ", first mismatching s " << first);
                CHECK(mismatches == 0);
            }
        }
    }
    // Blocks the sign-fixed table does not apply to take the rule.
    for (float absmax : {0.0f, INFINITY, -FLT_MAX, NAN}) CHECK_FALSE(Code8Lut::keeps_sign(absmax));
}

TEST_CASE("code8 lut: the dynamic maps have no irregular bucket within [-1, 1], plain or sign-fixed",
          "[8bit][optim8][code8]") {
    for (bool is_signed : {true, false})
        for (bool sign_fix : {true, false}) {
            INFO((is_signed ? "signed" : "unsigned") << " map, " << (sign_fix ? "sign-fixed" : "plain"));
            const auto code = dynamic_map(is_signed);
            CHECK(irregular_within_one(Code8Lut(code.data(), sign_fix)) == 0);
        }
    // Where the fix at y = +0.0 depends on whether s underflowed, that bucket takes the search.
    auto shifted = dynamic_map(true);
    for (auto& x : shifted) x -= 1e-9f;
    std::sort(shifted.begin(), shifted.end());
    CHECK((Code8Lut(shifted.data(), true).entries()[0] & Code8Lut::kIrregular) != 0);
}

TEST_CASE("code8 lut: the cache returns one table per content and variant", "[8bit][optim8][code8]") {
    auto code = dynamic_map(true);
    code[3] = std::nextafter(code[3], 0.0f);  // a table no other test has cached
    CHECK(kbit::code8_lut(code.data(), false, false) == nullptr);
    const auto plain = kbit::code8_lut(code.data(), false);
    const auto fixed = kbit::code8_lut(code.data(), true);
    REQUIRE(plain != nullptr);
    REQUIRE(fixed != nullptr);
    CHECK(plain != fixed);
    CHECK(kbit::code8_lut(code.data(), false, false) == plain);
    CHECK(kbit::code8_lut(code.data(), true) == fixed);
    CHECK(plain->same(code.data(), false));
    code[3] = std::nextafter(code[3], 1.0f);  // rewritten in place: a different table
    CHECK_FALSE(plain->same(code.data(), false));
    CHECK(kbit::code8_lut(code.data(), false) != plain);
}
