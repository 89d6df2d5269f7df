// Host checks of the host/device helpers the CUDA kernels are built on (src/cuda/*.h), so that the
// logic is verified on machines without a GPU: the shared-memory layout of the 8-bit code search,
// the x86 NaN rule the kernels reproduce, and torchao's NF4 table rounding.
#define CATCH_CONFIG_MAIN
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "code8_search.h"
#include "kbit_code8.h"
#include "nan_x86.h"
#include "torchao_math.h"

namespace {

std::vector<float> signed_dynamic_map() {  // bitsandbytes' create_dynamic_map(signed=True), fp32
    std::vector<float> v;
    for (int d = 0; d <= 6; ++d) {
        const int f = (1 << d) + 1;
        const float h = (1.0f - 0.1f) / static_cast<float>(f - 1);
        std::vector<float> b(f);
        for (int i = 0; i < f; ++i) b[i] = i < f / 2 ? 0.1f + h * static_cast<float>(i) : 1.0f - h * static_cast<float>(f - 1 - i);
        const float s = static_cast<float>(std::pow(10.0, d - 6));
        for (int i = 0; i + 1 < f; ++i) {
            const float m = (b[i] + b[i + 1]) / 2.0f;
            v.push_back(s * m);
            v.push_back(-(s * m));
        }
    }
    v.push_back(0.0f);
    v.push_back(1.0f);
    std::sort(v.begin(), v.end());
    return v;
}

std::vector<std::vector<float>> tables() {
    std::vector<std::vector<float>> t;
    t.push_back(signed_dynamic_map());
    std::vector<float> lin(256);  // linear map with a duplicated zero
    for (int i = 0; i < 256; ++i) lin[i] = -1.0f + 2.0f * static_cast<float>(i < 128 ? i : i - 1) / 254.0f;
    t.push_back(lin);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    std::vector<float> sorted(256), runs(256), unsorted(256), special(256);
    for (auto& x : sorted) x = nd(rng);
    std::sort(sorted.begin(), sorted.end());
    t.push_back(sorted);
    for (int i = 0; i < 256; ++i) runs[i] = static_cast<float>(i / 16) - 8.0f;  // long runs of equal entries
    t.push_back(runs);
    for (auto& x : unsorted) x = nd(rng);  // not a valid table, but the two searches must still agree
    t.push_back(unsorted);
    special = sorted;
    special[0] = -std::numeric_limits<float>::infinity();
    special[255] = std::numeric_limits<float>::infinity();
    special[100] = std::numeric_limits<float>::quiet_NaN();
    special[127] = -0.0f;
    t.push_back(special);
    return t;
}

std::vector<float> probe_values(const std::vector<float>& table) {
    std::vector<float> v;
    const float inf = std::numeric_limits<float>::infinity();
    for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f})
        v.push_back(x);
    for (int i = 0; i < 256; ++i) {
        const float c = table[i];
        v.push_back(c);
        v.push_back(std::nextafter(c, inf));
        v.push_back(std::nextafter(c, -inf));
        if (i < 255) {
            const float mid = (table[i] + table[i + 1]) * 0.5f;
            v.push_back(mid);
            v.push_back(std::nextafter(mid, inf));
            v.push_back(std::nextafter(mid, -inf));
        }
    }
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> ud(-1.2f, 1.2f);
    for (int i = 0; i < 20000; ++i) v.push_back(ud(rng));
    std::uniform_int_distribution<uint32_t> bits;
    for (int i = 0; i < 20000; ++i) v.push_back(kbit::bits_float(bits(rng)));
    return v;
}

uint32_t bits(float x) { return kbit::float_bits(x); }

}  // namespace

TEST_CASE("code8 breadth-first layout: every odd entry 1..253 has its own node", "[cuda][code8]") {
    std::vector<int> seen(128, 0);
    for (int t = 0; t < 256; ++t) {
        const int e = kbit::code8_node_of(t);
        if (t % 2 == 1 && t <= 253) {
            REQUIRE(e >= 1);
            REQUIRE(e <= 127);
            ++seen[e];
            // node e at level L holds entry ((e - 2^L) * 2 + 1) * 2^(7 - L) - 1
            int level = 0;
            while ((2 << level) <= e) ++level;
            CHECK((((e - (1 << level)) * 2 + 1) << (7 - level)) - 1 == t);
        } else {
            CHECK(e == 0);
        }
    }
    for (int e = 1; e < 128; ++e) CHECK(seen[e] == 1);
}

TEST_CASE("code8 breadth-first search equals kbit::code8_index for every table and value", "[cuda][code8]") {
    int table_no = 0;
    for (const auto& table : tables()) {
        float node[128];
        kbit::code8_build_nodes(table.data(), node);
        long mismatches = 0;
        float first_bad = 0.0f;
        for (float y : probe_values(table)) {
            if (kbit::code8_index_bfs(node, table.data(), y) != kbit::code8_index(table.data(), y)) {
                if (mismatches++ == 0) first_bad = y;
            }
        }
        INFO("table " << table_no << ", first mismatch at y = " << first_bad);
        CHECK(mismatches == 0);
        ++table_no;
    }
}

TEST_CASE("x86 NaN rule equals the host's SSE results", "[cuda][nan]") {
    const float gpu_nan = kbit::bits_float(0x7FFFFFFFu);  // what the GPU returns for any NaN result
    const float inf = std::numeric_limits<float>::infinity();
    const float nan_a = kbit::bits_float(0x7FA12345u);    // signalling payload, quietened by x86
    const float nan_b = kbit::bits_float(0xFFC0BEEFu);
    volatile float vals[] = {1.5f, -2.0f, 0.0f, -0.0f, inf, -inf, nan_a, nan_b};
    int checked = 0;
    for (float a : vals)
        for (float b : vals) {
            const bool na = std::isnan(a), nb = std::isnan(b);
            if (na && nb) continue;  // which operand x86 picks then depends on the instruction's operand order
            const volatile float prod = a * b, sum = a + b, diff = a - b, quot = a / b;
            for (float r : {static_cast<float>(prod), static_cast<float>(sum), static_cast<float>(diff),
                            static_cast<float>(quot)}) {
                if (!std::isnan(r)) continue;
                INFO("a = " << a << ", b = " << b);
                CHECK(bits(kbit::x86_nan2(gpu_nan, a, b)) == bits(r));
                ++checked;
            }
        }
    CHECK(checked > 20);
    CHECK(bits(kbit::x86_nan2(3.0f, 1.0f, 2.0f)) == bits(3.0f));  // non-NaN results pass through
}

TEST_CASE("torchao NF4 table rounded to fp16/bf16 through fp32 equals direct rounding", "[cuda][torchao]") {
    // Hex from rounding torchao's decimal literals directly from double (numpy/ml_dtypes).
    const uint16_t want_bf16[16] = {0xbf80, 0xbf32, 0xbf06, 0xbeca, 0xbe92, 0xbe3d, 0xbdbb, 0x0000,
                                    0x3da3, 0x3e25, 0x3e7c, 0x3ead, 0x3ee2, 0x3f10, 0x3f39, 0x3f80};
    const uint16_t want_fp16[16] = {0xbc00, 0xb992, 0xb833, 0xb652, 0xb48d, 0xb1ea, 0xadd5, 0x0000,
                                    0x2d18, 0x3126, 0x33e0, 0x3568, 0x370d, 0x3880, 0x39c9, 0x3c00};
    const float table[16] = {KBIT_TORCHAO_NF4_VALUES};
    for (int j = 0; j < 16; ++j) {
        CHECK(kbit::float_to_bf16(table[j]) == want_bf16[j]);
        CHECK(kbit::float_to_half(table[j]) == want_fp16[j]);
    }
}

TEST_CASE("torchao NF4 index: nearest table entry in the dtype, first minimum wins, NaN gives 0", "[cuda][torchao]") {
    float nf4[16];
    const float table[16] = {KBIT_TORCHAO_NF4_VALUES};
    for (int j = 0; j < 16; ++j) nf4[j] = kbit::round_to<float>(table[j]);
    CHECK(kbit::torchao_nf4_index<float>(1.0f, 1.0f, nf4) == 15);
    CHECK(kbit::torchao_nf4_index<float>(-1.0f, 1.0f, nf4) == 0);
    CHECK(kbit::torchao_nf4_index<float>(0.0f, 2.0f, nf4) == 7);
    CHECK(kbit::torchao_nf4_index<float>(0.5f, 1.0f, nf4) == 12);  // |0.5-0.4407| < |0.5-0.5626|
    CHECK(kbit::torchao_nf4_index<float>(std::numeric_limits<float>::quiet_NaN(), 1.0f, nf4) == 0);
    CHECK(kbit::torchao_nf4_index<float>(0.0f, 0.0f, nf4) == 0);  // 0/0 = NaN
    // exact tie between entries 7 (0.0) and 8 (0.0796) at 0.0398 in bf16 arithmetic goes to the lower
    float nf4_bf16[16];
    for (int j = 0; j < 16; ++j) nf4_bf16[j] = kbit::round_to<kbit_bf16>(table[j]);
    const float half_way = kbit::round_to<kbit_bf16>(nf4_bf16[8] * 0.5f);
    if (kbit::t_sub<kbit_bf16>(nf4_bf16[8], half_way) == kbit::t_sub<kbit_bf16>(half_way, 0.0f))
        CHECK(kbit::torchao_nf4_index<kbit_bf16>(half_way, 1.0f, nf4_bf16) == 7);
}

TEST_CASE("torchao scaler code: round half to even, clamp, NaN to 0", "[cuda][torchao]") {
    CHECK(kbit::torchao_scaler_code<float>(0.5f, 5.0f) == 2);   // 2.5 -> 2
    CHECK(kbit::torchao_scaler_code<float>(0.7f, 5.0f) == 4);   // 3.5 -> 4 (3.5000002 in fp32 rounds up anyway)
    CHECK(kbit::torchao_scaler_code<float>(-1.0f, 200.0f) == -128);
    CHECK(kbit::torchao_scaler_code<float>(1.0f, 200.0f) == 127);
    CHECK(kbit::torchao_scaler_code<float>(std::numeric_limits<float>::quiet_NaN(), 1.0f) == 0);
    CHECK(kbit::torchao_factor<float>(64.0f) == 2.0f);  // 256 / 128
}
