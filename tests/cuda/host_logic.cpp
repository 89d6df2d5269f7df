// Host checks of the host/device code the CUDA kernels are built on, so that the logic is verified on
// machines without a GPU: the shared-memory layout and breadth-first form of the 8-bit code search
// (code8_search.h, against kbit::code8_index), and the x86 NaN rule the kernels reproduce
// (kbit_nan_x86.h, against the host's SSE results). The quantizer and optimizer decompositions have
// their own files (host_*.cpp). torchao's steps and the int8 rules need no replay: the kernels and
// the reference call the same functions (kbit_torchao_math.h, kbit_int8_rules.h).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "catch_run.h"
#include "code8_search.h"
#include "gemm_4bit_choice.h"
#include "host_util.h"
#include "kbit_code8.h"
#include "kbit_nan_x86.h"

namespace {

std::vector<std::vector<float>> tables() {
    std::vector<std::vector<float>> t;
    t.push_back(hostcheck::dynamic_map(true));
    t.push_back(hostcheck::dynamic_map(false));
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

// The grouped GEMM (gemm_4bit_grouped.cu) decides once per call, for expert 0, whether experts with at most
// kSkinnyMaxM rows take the skinny body; gemm_4bit decides per call on the expert's slice and the gathered
// rows. The claim that the two agree for every expert and row count, replayed over alignments and sizes.
TEST_CASE("grouped GEMM picks gemm_4bit's kernel body for every expert", "[cuda][grouped]") {
    alignas(256) static unsigned char arena[1 << 16];
    int checked = 0, skinny = 0;
    for (int64_t elem : {2, 4})
        for (int64_t K : {0, 2, 30, 32, 48, 64, 96, 160, 4128})
            for (int64_t N : {1, 3, 7, 64})
                for (int64_t b_shift : {0, 1, 8, 16, 48}) {
                    const unsigned char* B = arena + b_shift;
                    const unsigned char* xs = arena;  // cudaMallocAsync's 256-byte alignment, as the scratch's
                    const bool call_fits = kbit::cuda::skinny_fits(1, K, K, xs, B);
                    for (int64_t e = 0; e < 6; ++e)
                        for (int64_t first = 0; first < 5; ++first)
                            for (int64_t rows = 1; rows <= 6; ++rows) {
                                const void* slice = B + e * N * K / 2;
                                const void* A = xs + first * K * elem;
                                const bool loop = kbit::cuda::skinny_fits(rows, K, K, A, slice);
                                const bool grouped = call_fits && rows <= kbit::cuda::kSkinnyMaxM;
                                INFO("elem " << elem << " K " << K << " N " << N << " B+" << b_shift << " e " << e
                                             << " first " << first << " rows " << rows);
                                CHECK(loop == grouped);
                                ++checked;
                                skinny += loop;
                            }
                }
    CHECK(checked == 2 * 9 * 4 * 5 * 6 * 5 * 6);
    CHECK(skinny > 0);
}

int main(int argc, char** argv) { return run_catch(argc, argv); }
