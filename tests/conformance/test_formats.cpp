// The shared format rules of src/common against the values bitsandbytes documents.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "kbit_code8.h"
#include "kbit_formats.h"
#include "kbit_half_array.h"
#include "testutil.h"

using kbit_test::bits_of;
using kbit_test::dynamic_map;

TEST_CASE("formats: dynamic maps equal bitsandbytes' create_dynamic_map", "[formats]") {
    const auto s = dynamic_map(true);
    REQUIRE(s.size() == 256);
    CHECK(std::is_sorted(s.begin(), s.end()));
    CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());  // 256 distinct values
    CHECK(bits_of(s[127]) == 0u);
    CHECK(s[255] == 1.0f);
    CHECK(s[0] == -0.99296874f);
    const float s128[] = {5.5000004e-07f, 3.2500002e-06f, 7.7499999e-06f, 2.1249998e-05f,
                          4.3749998e-05f, 6.6250002e-05f, 8.8749999e-05f, 1.5625001e-04f};
    for (int i = 0; i < 8; ++i) CHECK(s[128 + i] == s128[i]);
    const float s250[] = {0.93671876f, 0.95078123f, 0.96484375f, 0.97890627f, 0.99296874f};
    for (int i = 0; i < 5; ++i) CHECK(s[250 + i] == s250[i]);
    for (int i = 0; i <= 254; ++i) CHECK(s[i] == -s[254 - i]);

    const auto u = dynamic_map(false);
    REQUIRE(u.size() == 256);
    CHECK(std::is_sorted(u.begin(), u.end()));
    CHECK(u[0] == 0.0f);
    CHECK(u[255] == 1.0f);
    const float u1[] = {3.2500003e-07f, 7.7499999e-07f, 2.1249998e-06f, 4.3749997e-06f, 6.6250000e-06f};
    for (int i = 0; i < 5; ++i) CHECK(u[1 + i] == u1[i]);
    const float u250[] = {0.96835935f, 0.97539067f, 0.98242188f, 0.98945308f, 0.9964844f};
    for (int i = 0; i < 5; ++i) CHECK(u[250 + i] == u250[i]);
}

// Nearest code with fp32 midpoints, midpoint ties to the even index (the closed form of the search).
static int nearest_even_tie(const std::vector<float>& c, float y) {
    if (std::isnan(y)) return 0;
    int j = static_cast<int>(std::upper_bound(c.begin(), c.end(), y) - c.begin()) - 1;  // c[j] <= y
    if (j < 0) return 0;
    if (j >= 255) return 255;
    const float mid = (c[j] + c[j + 1]) * 0.5f;
    if (y < mid) return j;
    if (y > mid) return j + 1;
    return (j % 2 == 0) ? j : j + 1;
}

TEST_CASE("formats: 8-bit search equals nearest code, ties to even, on both dynamic maps", "[formats]") {
    for (bool is_signed : {true, false}) {
        const auto c = dynamic_map(is_signed);
        std::vector<float> probes{-2.0f, -1.0f, 1.0f, 2.0f, 0.0f, -0.0f, NAN, INFINITY, -INFINITY};
        for (int j = 0; j < 255; ++j) {
            const float mid = (c[j] + c[j + 1]) * 0.5f;
            probes.insert(probes.end(), {c[j], mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)});
        }
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        for (int i = 0; i < 100000; ++i) probes.push_back(uni(rng));
        for (int i = 0; i < 20000; ++i) probes.push_back(uni(rng) * 1e-4f);
        for (float y : probes) {
            INFO("signed " << is_signed << " y " << y);
            REQUIRE(static_cast<int>(kbit::code8_index(c.data(), y)) == nearest_even_tie(c, y));
        }
    }
}

TEST_CASE("formats: NF4 thresholds and index rule", "[formats]") {
    const uint32_t thr_bits[15] = {0xbf591cd9, 0xbf1c5270, 0xbeeb8480, 0xbeadea76, 0xbe703cec,
                                   0xbe0d38bc, 0xbd3a7871, 0x3d22faff, 0x3df64863, 0x3e5067e0,
                                   0x3e9582d4, 0x3ec753f9, 0x3f006d03, 0x3f248daf, 0x3f5c89d9};
    const uint32_t val_bits[16] = {0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f,
                                   0xbdba7871, 0x00000000, 0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a,
                                   0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000};
    for (int k = 0; k < 16; ++k) CHECK(bits_of(kbit::kNf4Values[k]) == val_bits[k]);
    for (int k = 0; k < 15; ++k) {
        const float t = kbit::kNf4Thresholds[k];
        CHECK(bits_of(t) == thr_bits[k]);
        CHECK(kbit::nf4_index(t) == k);                           // a tie goes to the lower index
        CHECK(kbit::nf4_index(std::nextafter(t, 2.0f)) == k + 1);
        CHECK(kbit::nf4_index(std::nextafter(t, -2.0f)) == k);
    }
    CHECK(kbit::nf4_index(NAN) == 0);
    CHECK(kbit::nf4_index(-INFINITY) == 0);
    CHECK(kbit::nf4_index(INFINITY) == 15);
    CHECK(kbit::nf4_index(0.0f) == 7);
    CHECK(kbit::nf4_index(-0.0f) == 7);
}

TEST_CASE("formats: FP4 table and threshold tree", "[formats]") {
    const uint32_t mag_bits[8] = {0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000,
                                  0x3eaaaaab, 0x3f000000, 0x3e2aaaab, 0x3e800000};
    for (int k = 0; k < 8; ++k) {
        CHECK(bits_of(kbit::kFp4Values[k]) == mag_bits[k]);
        CHECK(bits_of(kbit::kFp4Values[8 + k]) == (mag_bits[k] | 0x80000000u));  // entry 8 is -0.0
    }
    // Threshold literals (bitsandbytes' decimal constants as fp32) and the code on each side.
    const struct {
        uint32_t bits;
        int below_or_at, above;
    } thresholds[] = {{0x3b2aaab9, 0, 1}, {0x3db00000, 1, 6}, {0x3e555555, 6, 7}, {0x3e955555, 7, 4},
                      {0x3ed55556, 4, 5}, {0x3f155550, 5, 2}, {0x3f555555, 2, 3}};
    for (const auto& t : thresholds) {
        const float v = kbit::bits_float(t.bits);
        CHECK(kbit::fp4_index(v) == t.below_or_at);
        CHECK(kbit::fp4_index(std::nextafter(v, 2.0f)) == t.above);
        CHECK(kbit::fp4_index(-v) == (8 | t.below_or_at));
        CHECK(kbit::fp4_index(-std::nextafter(v, 2.0f)) == (8 | t.above));
    }
    CHECK(kbit::fp4_index(-0.0f) == 0);
    CHECK(kbit::fp4_index(NAN) == 0);
    CHECK(kbit::fp4_index(1.0f) == 3);
    CHECK(kbit::fp4_index(-1.0f) == 11);
    CHECK(kbit::fp4_index(INFINITY) == 3);
}

TEST_CASE("formats: fp16 and bf16 conversions round to nearest even", "[formats]") {
    using namespace kbit;
    CHECK(float_to_half(65504.0f) == 0x7BFF);
    CHECK(float_to_half(65519.996f) == 0x7BFF);
    CHECK(float_to_half(65520.0f) == 0x7C00);
    CHECK(float_to_half(0x1.0p-24f) == 0x0001);
    CHECK(float_to_half(0x1.0p-25f) == 0x0000);                  // tie to even (zero)
    CHECK(float_to_half(0x1.8p-24f) == 0x0002);                  // 1.5 ulp: tie to even (2)
    CHECK(float_to_half(1.0f + 0x1.0p-11f) == 0x3C00);           // tie to even
    CHECK(float_to_half(1.0f + 0x1.8p-10f) == 0x3C02);           // tie to even (up)
    CHECK(float_to_half(-2.0f) == 0xC000);
    CHECK((float_to_half(NAN) & 0x7E00) == 0x7E00);
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaN
        REQUIRE(float_to_half(half_to_float(static_cast<uint16_t>(h))) == h);
    }
    CHECK(float_to_bf16(1.0f + 0x1.0p-8f) == 0x3F80);            // tie to even (down)
    CHECK(float_to_bf16(1.0f + 0x1.8p-7f) == 0x3F82);            // tie to even (up)
    CHECK(float_to_bf16(0x1.fffffep127f) == 0x7F80);             // rounds to infinity
    CHECK(float_to_bf16(-0.0f) == 0x8000);
    CHECK((float_to_bf16(NAN) & 0x7FC0) == 0x7FC0);
    CHECK(bf16_to_float(0x3F80) == 1.0f);
}

// The array conversions of the `kbit` command (F16C where the CPU has it) against float_to_half:
// every bf16 value, and fp32 values at and around every fp16 rounding boundary of every exponent
// (ties, one ulp either side, the largest and smallest mantissas), both signs, NaN payloads,
// infinities, fp32 subnormals; lengths that leave a scalar tail.
TEST_CASE("formats: fp16 array conversions equal float_to_half", "[formats]") {
    using namespace kbit;
    std::vector<uint16_t> bf(0x10001), out(bf.size());
    for (uint32_t h = 0; h < 0x10000; ++h) bf[h] = static_cast<uint16_t>(h);
    bf[0x10000] = 0x3F80;
    bf16_to_half_array(bf.data(), out.data(), static_cast<int64_t>(bf.size()));
    for (size_t i = 0; i < bf.size(); ++i) {
        INFO("bf16 bits 0x" << std::hex << bf[i]);
        REQUIRE(out[i] == float_to_half(bf16_to_float(bf[i])));
    }
    std::vector<float> f;
    for (uint32_t sign : {0u, 0x80000000u})
        for (uint32_t exp = 0; exp < 256; ++exp)
            for (uint32_t m13 = 0; m13 < 0x400; m13 += 7)  // the fp16 mantissa bits (above bit 13)
                for (uint32_t low : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x0800u, 0x17FFu}) {
                    const uint32_t man = ((m13 << 13) | low) & 0x7FFFFFu;
                    f.push_back(bits_float(sign | (exp << 23) | man));
                }
    for (uint32_t u : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFBFE000u, 0x7FFFFFFFu, 0x00000001u,
                       0x807FFFFFu, 0x477FEFFFu, 0x477FF000u, 0x33000000u, 0x33000001u, 0x387FFFFFu, 0x38800000u})
        f.push_back(bits_float(u));
    f.push_back(1.0f);  // a length that is not a multiple of 8
    std::vector<uint16_t> h(f.size());
    float_to_half_array(f.data(), h.data(), static_cast<int64_t>(f.size()));
    for (size_t i = 0; i < f.size(); ++i) {
        INFO("fp32 bits 0x" << std::hex << float_bits(f[i]));
        REQUIRE(h[i] == float_to_half(f[i]));
    }
}
