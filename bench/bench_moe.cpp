// Benchmarks of the grouped (mixture-of-experts) 4-bit GEMM, kbit_gemm_4bit_grouped (issue 41): decode
// (T = 1, 8, 64 tokens) and prefill (T = 512) on Qwen3-30B-A3B-like experts (E = 128, top_k = 8, hidden
// 2048, expert intermediate 768: gate/up [1536, 2048] with one row per token, down [2048, 768] with one
// row per choice) and Mixtral-like ones (E = 8, top_k = 2, [14336, 4096] and [4096, 14336]), beside the
// loop a caller writes without it (gather each expert's rows, one cgemm_4bit per chosen expert, scatter),
// both with fp32 and with bf16 activations, and beside ggml's ggml_mul_mat_id (llama.cpp's MoE product,
// peer_ggml.h) on Q4_0, IQ4_NL and Q4_K experts in its CPU_REPACK buffer, llama.cpp's default, with fp32
// activations, where kbit_bench was built with ggml. The fp32 rows of one (shape, T, threads) are timed
// in alternation, round by round, with the dense GEMV of the same bytes (one cgemm_4bit at M = 1 over as
// many experts: the yardstick of the decode rows), then the bf16 ones.
//
// Cold weights: the experts' weights are held in copies spanning cold_bytes(), and calls rotate over
// (copy, routing) pairs, the routings being one router's choices relabelled by 16 permutations of the
// experts (the same number of experts touched by each). The traffic is the touched experts' weights and
// scales (read once) plus activations and outputs. The experts repeat D distinct ones (as many of 8 as
// 256 MB of fp32 holds): the time does not depend on the values, and quantizing every expert to each
// format would take minutes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kbit/kbit_4bit.h"
#include "kbit_half.h"
#include "peer_ggml.h"

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

constexpr int64_t kBlocksize = 64;
constexpr int kRoutings = 16;

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

// Routing 0 and kRoutings - 1 relabellings of it by permutations of the experts.
std::vector<std::vector<int32_t>> routings(int64_t tokens, int64_t top_k, int64_t experts) {
    std::vector<std::vector<int32_t>> out{route(tokens, top_k, experts, 7)};
    std::mt19937 rng(11);
    std::vector<int32_t> perm(static_cast<size_t>(experts));
    for (int r = 1; r < kRoutings; ++r) {
        for (int64_t e = 0; e < experts; ++e) perm[e] = static_cast<int32_t>(e);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<int32_t> ids = out.front();
        for (int32_t& id : ids) id = perm[id];
        out.push_back(std::move(ids));
    }
    return out;
}

// Every expert's NF4 codes and absmax, in copies, expert e quantized from distinct expert e % D.
struct Nf4Experts {
    std::vector<uint8_t*> packed;
    std::vector<float*> absmax;
    Nf4Experts(const std::vector<std::vector<float>>& distinct, int64_t E, int64_t per_expert, int64_t copies) {
        const int64_t n = E * per_expert;
        for (int64_t c = 0; c < copies; ++c) {
            packed.push_back(static_cast<uint8_t*>(aligned_bytes(n / 2)));
            absmax.push_back(static_cast<float*>(aligned_bytes(4 * (n / kBlocksize))));
        }
        const auto D = static_cast<int64_t>(distinct.size());
        for (int64_t d = 0; d < D; ++d)
            check(kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, distinct[d].data(), absmax[0] + d * per_expert / kBlocksize,
                                     packed[0] + d * per_expert / 2, kBlocksize, per_expert, nullptr),
                  "quantize");
        for (int64_t e = D; e < E; ++e) {
            const int64_t d = e % D;
            std::copy(packed[0] + d * per_expert / 2, packed[0] + (d + 1) * per_expert / 2, packed[0] + e * per_expert / 2);
            std::copy(absmax[0] + d * per_expert / kBlocksize, absmax[0] + (d + 1) * per_expert / kBlocksize,
                      absmax[0] + e * per_expert / kBlocksize);
        }
        for (int64_t c = 1; c < copies; ++c) {
            std::copy(packed[0], packed[0] + n / 2, packed[c]);
            std::copy(absmax[0], absmax[0] + n / kBlocksize, absmax[c]);
        }
    }
    ~Nf4Experts() {
        for (auto* p : packed) std::free(p);
        for (auto* p : absmax) std::free(p);
    }
};

// Relative RMS difference of out from ref over the first `pairs` (token, choice) outputs of N each.
double relative_error(const float* out, const std::vector<double>& ref) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        diff += (out[i] - ref[i]) * (out[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-300));
}

constexpr double kWorstError = 0.3;  // 4-bit weights leave ~10%; a wrong layout or routing ~140%

bool checked(const std::string& what, const std::string& shape, double error) {
    std::fprintf(stderr, "moe check: %s %s: relative RMS error %.3f against the fp32 product%s\n", what.c_str(),
                 shape.c_str(), error, error > kWorstError ? " (too large: not timed)" : "");
    return error <= kWorstError;
}

// kbit's rows at activation type T (fp32 or bf16): the grouped call and the per-expert loop, as Cases.
template <class T>
struct KbitRows {
    const MoeShape& s;
    int64_t tokens, rows, pairs;
    const Nf4Experts& w;
    const std::vector<std::vector<int32_t>>& ids;
    Buffer<T> a, out;
    std::vector<T> x, y;
    size_t next = 0;

    KbitRows(const MoeShape& shape, int64_t t, const Nf4Experts& weights, const std::vector<std::vector<int32_t>>& routes,
             const std::vector<float>& af)
        : s(shape), tokens(t), rows(shape.per_choice ? shape.top_k : 1), pairs(t * shape.top_k), w(weights), ids(routes),
          a(af.size()), out(static_cast<size_t>(pairs * shape.N)), x(static_cast<size_t>(pairs * shape.K)),
          y(static_cast<size_t>(pairs * shape.N)) {
        for (size_t i = 0; i < af.size(); ++i) a.p[i] = kbit::Elem<T>::store(af[i]);
    }

    static int32_t dtype() { return std::is_same_v<T, float> ? KBIT_DTYPE_FP32 : KBIT_DTYPE_BF16; }

    void grouped(size_t v) {
        const size_t c = v % w.packed.size();
        check(kbit_gemm_4bit_grouped(dtype(), a.p, rows, w.packed[c], w.absmax[c], nullptr, nullptr, nullptr,
                                     s.experts, s.N, s.K, kBlocksize, KBIT_QUANT_NF4, ids[v % ids.size()].data(),
                                     tokens, s.top_k, nullptr, out.p, nullptr),
              "kbit_gemm_4bit_grouped");
    }

    // The loop without the grouped call: per chosen expert, gather its rows, one cgemm_4bit, scatter.
    void loop(size_t v) {
        const size_t c = v % w.packed.size();
        const std::vector<int32_t>& route = ids[v % ids.size()];
        const int64_t N = s.N, K = s.K;
        for (int64_t e = 0; e < s.experts; ++e) {
            int64_t m = 0;
            std::vector<int64_t> members;
            for (int64_t p = 0; p < pairs; ++p)
                if (route[p] == e) members.push_back(p);
            for (int64_t p : members) {
                const int64_t r = s.per_choice ? p : p / s.top_k;
                std::copy(a.p + r * K, a.p + (r + 1) * K, x.begin() + m++ * K);
            }
            if (m == 0) continue;
            const int64_t first = e * N * K;
            kbit_status st;
            if constexpr (std::is_same_v<T, float>)
                st = cgemm_4bit_fp32(x.data(), w.packed[c] + first / 2, w.absmax[c] + first / kBlocksize, nullptr,
                                     nullptr, nullptr, y.data(), nullptr, static_cast<int>(m), static_cast<int>(N),
                                     static_cast<int>(K), static_cast<int>(kBlocksize), KBIT_QUANT_NF4, nullptr);
            else
                st = cgemm_4bit_bf16(x.data(), w.packed[c] + first / 2, w.absmax[c] + first / kBlocksize, nullptr,
                                     nullptr, nullptr, y.data(), nullptr, static_cast<int>(m), static_cast<int>(N),
                                     static_cast<int>(K), static_cast<int>(kBlocksize), KBIT_QUANT_NF4, nullptr);
            check(st, "cgemm_4bit");
            for (int64_t i = 0; i < m; ++i)
                std::copy(y.begin() + i * N, y.begin() + (i + 1) * N, out.p + members[i] * N);
        }
    }

    Traffic traffic(double weight_bytes) const {
        return Traffic{weight_bytes + sizeof(T) * double(tokens * rows * s.K), sizeof(T) * double(pairs * s.N), 2};
    }
    void add_grouped(std::vector<Case>& cases, const std::string& shape, int threads, double weight_bytes) {
        const char* dt = kbit::Elem<T>::name;
        if (selected("moe_grouped_nf4", dt, shape))
            cases.push_back(Case{"moe_grouped_nf4", dt, shape, threads, traffic(weight_bytes), [this] { grouped(next++); },
                                 "kbit kbit_gemm_4bit_grouped NF4 blocksize 64"});
    }
    void add_loop(std::vector<Case>& cases, const std::string& shape, int threads, double weight_bytes) {
        const char* dt = kbit::Elem<T>::name;
        if (selected("moe_loop_nf4", dt, shape))
            cases.push_back(Case{"moe_loop_nf4", dt, shape, threads, traffic(weight_bytes), [this] { loop(next++); },
                                 "per-expert loop of kbit cgemm_4bit"});
    }
};

void moe_cases(const MoeShape& s, const std::vector<int64_t>& token_counts) {
    const int64_t E = s.experts, N = s.N, K = s.K, per = N * K;
    const int64_t rows = s.per_choice ? s.top_k : 1;
    bool any = false;
    for (int64_t t : token_counts) {
        const std::string shape = s.name + "_T" + std::to_string(t);
        for (const char* k : {"moe_grouped_nf4", "moe_loop_nf4", "moe_dense_gemv_nf4", "moe_ggml_"})
            for (const char* dt : {"fp32", "bf16"}) any = any || selected(k, dt, shape);
    }
    if (!any) return;
    const int64_t D = std::clamp<int64_t>((int64_t{256} << 20) / (4 * per), 1, std::min<int64_t>(E, 8));
    std::vector<std::vector<float>> distinct(static_cast<size_t>(D), std::vector<float>(static_cast<size_t>(per)));
    for (int64_t d = 0; d < D; ++d) fill_normal(distinct[d].data(), distinct[d].size(), static_cast<unsigned>(5 + d), 0.02f);
    const double nf4_expert = per / 2.0 + 4.0 * per / kBlocksize;
    const int64_t copies = std::max<int64_t>(2, static_cast<int64_t>(double(cold_bytes()) / (E * nf4_expert)) + 1);
    const Nf4Experts nf4(distinct, E, per, copies);

    std::vector<std::vector<std::vector<int32_t>>> all_ids;
    for (int64_t tokens : token_counts) all_ids.push_back(routings(tokens, s.top_k, E));

#ifdef KBIT_BENCH_HAVE_GGML
    // One ggml product per format for every token count: the weights quantized and uploaded once.
    using ggml_peer::Format;
    struct Peer {
        Format format;
        std::string kernel, note;
        std::unique_ptr<ggml_peer::MatMulId> mm;
    };
    std::vector<Peer> peers;
    for (Format f : {Format::q4_0, Format::iq4_nl, Format::q4_k}) {
        const std::string kernel = std::string("moe_ggml_") + ggml_peer::format_name(f) + "_repack";
        bool wanted = false;
        for (int64_t t : token_counts) wanted = wanted || selected(kernel, "fp32", s.name + "_T" + std::to_string(t));
        if (!wanted) continue;
        const double expert_bytes = per * ggml_peer::bytes_per_weight(f);
        const int64_t ggml_copies = std::max<int64_t>(2, static_cast<int64_t>(double(cold_bytes()) / (E * expert_bytes)) + 1);
        auto mm = std::make_unique<ggml_peer::MatMulId>(f, true, distinct, E, N, K, rows, s.top_k, ggml_copies,
                                                        token_counts, all_ids);
        if (!mm->ok()) {
            std::fprintf(stderr, "note: %s %s not timed: %s\n", kernel.c_str(), s.name.c_str(), mm->why_not().c_str());
            continue;
        }
        const std::string note = ggml_peer::version() + " mul_mat_id " + ggml_peer::format_name(f) +
                                 " in CPU_REPACK as " + mm->layout();
        peers.push_back({f, kernel, note, std::move(mm)});
    }
#else
    std::fprintf(stderr, "note: moe %s: ggml was not built (configure with -DKBIT_BENCH_GGML=<prefix>, see "
                         "bench/fetch-ggml); kbit's rows only\n", s.name.c_str());
#endif

    for (size_t ti = 0; ti < token_counts.size(); ++ti) {
        const int64_t tokens = token_counts[ti];
        const std::string shape = s.name + "_T" + std::to_string(tokens);
        const int64_t pairs = tokens * s.top_k;
        const std::vector<std::vector<int32_t>>& ids = all_ids[ti];
        std::vector<int64_t> touched(ids.front().begin(), ids.front().end());
        std::sort(touched.begin(), touched.end());
        const double experts_read = double(std::unique(touched.begin(), touched.end()) - touched.begin());
        std::vector<float> af(static_cast<size_t>(tokens * rows * K));
        fill_normal(af.data(), af.size(), 6, 1.0f);
        // The fp32 product of routing 0 for the first few (token, choice) pairs, to check each row.
        const int64_t checked_pairs = std::min<int64_t>(pairs, 16);
        std::vector<double> ref(static_cast<size_t>(checked_pairs * N));
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < checked_pairs * N; ++i) {
            const int64_t p = i / N, n = i % N, r = s.per_choice ? p : p / s.top_k;
            const float* wrow = distinct[ids.front()[p] % D].data() + n * K;
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += double(wrow[k]) * af[r * K + k];
            ref[i] = acc;
        }

        std::vector<float> dense_out(static_cast<size_t>(experts_read * N));
        size_t dense_next = 0;
        KbitRows<float> kbit32(s, tokens, nf4, ids, af);
        KbitRows<kbit_bf16> kbit16(s, tokens, nf4, ids, af);
        kbit32.grouped(0);
        const bool kbit_ok = checked("kbit_gemm_4bit_grouped fp32", shape, relative_error(kbit32.out.p, ref));
        kbit16.grouped(0);
        std::vector<float> widened(ref.size());
        for (size_t i = 0; i < ref.size(); ++i) widened[i] = kbit::Elem<kbit_bf16>::load(kbit16.out.p[i]);
        const bool kbit16_ok = checked("kbit_gemm_4bit_grouped bf16", shape, relative_error(widened.data(), ref));
#ifdef KBIT_BENCH_HAVE_GGML
        std::vector<Peer*> timed;
        for (Peer& p : peers) {
            if (!selected(p.kernel, "fp32", shape)) continue;
            std::copy(af.begin(), af.end(), p.mm->input(tokens));
            p.mm->run_first(tokens, 1);
            if (checked(p.kernel, shape, relative_error(p.mm->output(), ref))) timed.push_back(&p);
        }
#endif

        for (int t : options().threads) {
            const double nf4_bytes = experts_read * nf4_expert;
            std::vector<Case> fp32;  // kbit's grouped row, the ggml rows, kbit's loop
            if (kbit_ok) kbit32.add_grouped(fp32, shape, t, nf4_bytes);
#ifdef KBIT_BENCH_HAVE_GGML
            for (Peer* p : timed) {
                const double bytes = experts_read * per * ggml_peer::bytes_per_weight(p->format);
                const Traffic traffic{bytes + 4.0 * double(tokens * rows * K), 4.0 * double(pairs * N), 1};
                ggml_peer::MatMulId* mm = p->mm.get();
                fp32.push_back(Case{p->kernel, "fp32", shape, t, traffic, [mm, tokens, t] { mm->run(tokens, t); }, p->note});
            }
#endif
            if (kbit_ok) kbit32.add_loop(fp32, shape, t, nf4_bytes);
            // The dense GEMV of the same bytes (issue 41's yardstick): one cgemm_4bit at M = 1 over the first
            // experts_read experts as one [experts_read * N, K] weight, so the grouped rows can be read as a
            // fraction of what a plain GEMV reaches on that traffic.
            const int64_t dense_rows = static_cast<int64_t>(experts_read) * N;
            if (selected("moe_dense_gemv_nf4", "fp32", shape)) {
                const Traffic traffic{nf4_bytes + 4.0 * double(K), 4.0 * double(dense_rows), 2};
                fp32.push_back(Case{"moe_dense_gemv_nf4", "fp32", shape, t, traffic, [&, dense_rows] {
                                        const size_t c = dense_next++ % nf4.packed.size();
                                        check(cgemm_4bit_fp32(af.data(), nf4.packed[c], nf4.absmax[c], nullptr, nullptr,
                                                              nullptr, dense_out.data(), nullptr, 1,
                                                              static_cast<int>(dense_rows), static_cast<int>(K),
                                                              static_cast<int>(kBlocksize), KBIT_QUANT_NF4, nullptr),
                                              "cgemm_4bit_fp32 dense");
                                    },
                                    "dense GEMV of the touched experts' bytes (cgemm_4bit_fp32, M = 1)"});
            }
            if (!fp32.empty()) measure_alternating(fp32);
            std::vector<Case> bf16;
            if (kbit16_ok) {
                kbit16.add_grouped(bf16, shape, t, nf4_bytes);
                kbit16.add_loop(bf16, shape, t, nf4_bytes);
            }
            if (!bf16.empty()) measure_alternating(bf16);
        }
    }
}

}  // namespace

KBIT_BENCH_SUITE(moe) {
    const std::vector<int64_t> tokens = options().quick ? std::vector<int64_t>{1, 8}
                                                        : std::vector<int64_t>{1, 8, 64, 512};
    for (const auto& s : moe_shapes()) moe_cases(s, tokens);
}

}  // namespace kbit_bench
