// Benchmarks of the grouped (mixture-of-experts) 4-bit GEMM, kbit_gemm_4bit_grouped (issue 41): decode
// (T = 1, 8, 64 tokens) and prefill (T = 512) on Qwen3-30B-A3B-like experts (E = 128, top_k = 8, hidden
// 2048, expert intermediate 768: gate/up [1536, 2048] with one row per token, down [2048, 768] with one
// row per choice) and Mixtral-like ones (E = 8, top_k = 2, [14336, 4096] and [4096, 14336]), beside the
// loop a caller writes without it (gather each expert's rows, one cgemm_4bit per chosen expert, scatter).
// The traffic is the touched experts' weights and scales (read once) plus activations and outputs.
// Not yet here: ggml's mul_mat_id beside them, and weights rotated over copies for a cold cache.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kbit/kbit_4bit.h"
#include "kbit_half.h"

namespace kbit_bench {
namespace {

struct MoeShape {
    std::string name;
    int64_t experts, top_k, N, K;
    bool per_choice;  // A has one row per (token, choice): the down projection
};

std::vector<MoeShape> moe_shapes() {
    if (options().quick) return {{"E8_top2_256x512", 8, 2, 256, 512, false}};
    return {{"qwen3moe_gate_up_E128_top8_1536x2048", 128, 8, 1536, 2048, false},
            {"qwen3moe_down_E128_top8_2048x768", 128, 8, 2048, 768, true},
            {"mixtral_w1_E8_top2_14336x4096", 8, 2, 14336, 4096, false},
            {"mixtral_w2_E8_top2_4096x14336", 8, 2, 4096, 14336, true}};
}

void check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) {
        std::fprintf(stderr, "bench_moe: %s failed with status %d\n", what, s);
        std::exit(1);
    }
}

// top_k distinct experts per token, uniformly at random (a router's choices, deterministic per seed).
std::vector<int32_t> route(int64_t tokens, int64_t top_k, int64_t experts, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids, all(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e) all[e] = static_cast<int32_t>(e);
    for (int64_t t = 0; t < tokens; ++t) {
        std::shuffle(all.begin(), all.end(), rng);
        ids.insert(ids.end(), all.begin(), all.begin() + top_k);
    }
    return ids;
}

void moe_cases(const MoeShape& s, int64_t tokens) {
    using T = kbit_bf16;
    const char* dt = kbit::Elem<T>::name;
    const int64_t bs = 64, E = s.experts, N = s.N, K = s.K, pairs = tokens * s.top_k;
    const int64_t rows = s.per_choice ? s.top_k : 1;
    const std::string shape = s.name + "_T" + std::to_string(tokens);
    if (!selected("moe_grouped_nf4", dt, shape) && !selected("moe_loop_nf4", dt, shape)) return;
    // Quantized one expert at a time (N * K is a multiple of the blocksize: the same bytes as the flat
    // quantization of [E, N, K], without an E * N * K fp32 copy).
    const int64_t n = E * N * K, per = N * K;
    Buffer<float> w(static_cast<size_t>(per));
    Buffer<uint8_t> packed(static_cast<size_t>(n / 2));
    Buffer<float> absmax(static_cast<size_t>(n / bs));
    for (int64_t e = 0; e < E; ++e) {
        fill_normal(w.p, static_cast<size_t>(per), static_cast<unsigned>(5 + e), 0.02f);
        check(kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, w.p, absmax.p + e * per / bs, packed.p + e * per / 2,
                                 bs, per, nullptr),
              "quantize");
    }
    Buffer<float> af(static_cast<size_t>(tokens * rows * K));
    fill_normal(af.p, af.n, 6, 1.0f);
    Buffer<T> a(af.n), out(static_cast<size_t>(pairs * N));
    for (size_t i = 0; i < af.n; ++i) a.p[i] = kbit::Elem<T>::store(af.p[i]);
    const std::vector<int32_t> ids = route(tokens, s.top_k, E, 7);
    std::vector<int64_t> touched(ids.begin(), ids.end());
    std::sort(touched.begin(), touched.end());
    const double experts_read = double(std::unique(touched.begin(), touched.end()) - touched.begin());
    const Traffic traffic{experts_read * (N * K / 2.0 + 4.0 * N * K / bs) + sizeof(T) * double(tokens * rows * K),
                          sizeof(T) * double(pairs * N), 2};
    // The loop without the grouped call: per chosen expert, gather its rows, one cgemm_4bit, scatter.
    std::vector<T> x(static_cast<size_t>(pairs * K)), y(static_cast<size_t>(pairs * N));
    auto loop = [&] {
        for (int64_t e = 0; e < E; ++e) {
            int64_t m = 0;
            std::vector<int64_t> members;
            for (int64_t p = 0; p < pairs; ++p)
                if (ids[p] == e) members.push_back(p);
            for (int64_t p : members) {
                const int64_t r = s.per_choice ? p : p / s.top_k;
                std::copy(a.p + r * K, a.p + (r + 1) * K, x.begin() + m++ * K);
            }
            if (m == 0) continue;
            const int64_t first = e * N * K;
            check(cgemm_4bit_bf16(x.data(), packed.p + first / 2, absmax.p + first / bs, nullptr, nullptr, nullptr,
                                  y.data(), nullptr, static_cast<int>(m), static_cast<int>(N), static_cast<int>(K),
                                  static_cast<int>(bs), KBIT_QUANT_NF4, nullptr),
                  "cgemm_4bit");
            for (int64_t i = 0; i < m; ++i)
                std::copy(y.begin() + i * N, y.begin() + (i + 1) * N, out.p + members[i] * N);
        }
    };
    for (int t : options().threads) {
        if (selected("moe_grouped_nf4", dt, shape))
            measure("moe_grouped_nf4", dt, shape, t, traffic, [&] {
                check(kbit_gemm_4bit_grouped(KBIT_DTYPE_BF16, a.p, rows, packed.p, absmax.p, nullptr, nullptr,
                                             nullptr, E, N, K, bs, KBIT_QUANT_NF4, ids.data(), tokens, s.top_k,
                                             nullptr, out.p, nullptr),
                      "kbit_gemm_4bit_grouped");
            });
        if (selected("moe_loop_nf4", dt, shape)) measure("moe_loop_nf4", dt, shape, t, traffic, loop, "per-expert loop");
    }
}

}  // namespace

KBIT_BENCH_SUITE(moe) {
    const std::vector<int64_t> tokens = options().quick ? std::vector<int64_t>{1, 8}
                                                        : std::vector<int64_t>{1, 8, 64, 512};
    for (const auto& s : moe_shapes())
        for (int64_t t : tokens) moe_cases(s, t);
}

}  // namespace kbit_bench
