// Suite engine: kbit's 4-bit products beside an inference engine's, in the same process, on the same
// shapes and threads. kbit: NF4 at blocksize 64 (fp32 absmax), cgemm_4bit_inference_naive_fp32 at
// M = 1 and cgemm_4bit_fp32 at M = 1 and 8. The engine: ggml's ggml_mul_mat (llama.cpp's kernel
// library, peer_ggml.h), on Q4_0, IQ4_NL and Q4_K weights in its CPU_REPACK buffer (llama.cpp's
// default on a CPU) and, as a second row, in its plain CPU buffer. Activations fp32 in both (ggml
// quantizes them to Q8_0 / Q8_K inside the call). Out x in shapes of the 4-bit suite's GEMV, weights
// cold: each format's weights rotate over copies spanning cold_bytes(), as bench_4bit.cpp's GEMV does.
//
// Each (shape, M, threads) times its rows in alternation, round by round (kbit, ggml ..., kbit, ...),
// each call beside its own probes. Traffic: the weights in each format with their scales, the
// activations read and the output written. Every format here spends 4.5 bits a weight (NF4 4 + 32 /
// 64 for fp32 absmax; Q4_0 and IQ4_NL 18 bytes per 32; Q4_K 144 per 256), so their limits agree
// but for the streams the read probe uses: kbit reads two arrays (codes, absmax), ggml one (its
// blocks hold their scales). ggml's activations in Q8 stay in cache and add no traffic.
//
// Before timing, every row's result is checked against the fp32 product of the unquantized weights
// (relative RMS error, on stderr); a row far off is not timed. A last row per group reads kbit's
// weights with no work (fold_bytes).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "kbit/kbit_4bit.h"
#include "kbit_half.h"
#include "peer_ggml.h"

namespace kbit_bench {
namespace {

struct EngineShape {
    std::string name;
    int64_t N, K;  // out x in features
};

std::vector<EngineShape> engine_shapes() {
    if (options().quick) return {{"1024x1024", 1024, 1024}};
    return {{"4096x4096", 4096, 4096}, {"4096x14336", 4096, 14336}, {"14336x4096", 14336, 4096}};
}

constexpr int64_t kBlocksize = 64;
constexpr int64_t kLargestM = 8;

void check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) {
        std::fprintf(stderr, "bench_engine: %s failed with status %d\n", what, s);
        std::exit(1);
    }
}

int64_t copies_for(double bytes) {
    return std::max<int64_t>(2, static_cast<int64_t>(static_cast<double>(cold_bytes()) / bytes) + 1);
}

// kbit's NF4 copies of W.
struct Nf4Weights {
    std::vector<uint8_t*> packed;
    std::vector<float*> absmax;
    Nf4Weights(const float* w, int64_t N, int64_t K) {
        const int64_t n = N * K;
        const int64_t copies = copies_for(n / 2.0 + 4.0 * n / kBlocksize);
        for (int64_t c = 0; c < copies; ++c) {
            packed.push_back(static_cast<uint8_t*>(aligned_bytes(n / 2)));
            absmax.push_back(static_cast<float*>(aligned_bytes(4 * (n / kBlocksize))));
            if (c == 0)
                check(kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, w, absmax[0], packed[0], kBlocksize, n, nullptr),
                      "quantize");
            else {
                std::copy(packed[0], packed[0] + n / 2, packed[c]);
                std::copy(absmax[0], absmax[0] + n / kBlocksize, absmax[c]);
            }
        }
    }
    ~Nf4Weights() {
        for (auto* p : packed) std::free(p);
        for (auto* p : absmax) std::free(p);
    }
    size_t copies() const { return packed.size(); }
};

// Reads n bytes at p (n a multiple of 64, p 64-byte aligned) over the OpenMP threads, folding them
// into an XOR: the weights' traffic with none of the work. On the Zen 4 guest a short cold read of a
// few MB ran at twice the rate of the probe's sustained 512 MB pass (17 against 8 GB/s, one thread),
// so beside kernels whose calls are that short this row says what memory alone allows.
uint64_t fold_bytes(const uint8_t* p, size_t n) {
    typedef uint64_t Bytes32 __attribute__((vector_size(32), aligned(32), may_alias));
    uint64_t folded = 0;
#pragma omp parallel reduction(^ : folded)
    {
        Bytes32 acc0 = {0, 0, 0, 0}, acc1 = acc0;
#pragma omp for schedule(static) nowait
        for (size_t i = 0; i < n; i += 64) {
            acc0 ^= *reinterpret_cast<const Bytes32*>(p + i);
            acc1 ^= *reinterpret_cast<const Bytes32*>(p + i + 32);
        }
        const Bytes32 acc = acc0 ^ acc1;
        folded ^= acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
    }
    return folded;
}

// Relative RMS difference of out from ref (M * N each).
double relative_error(const float* out, const std::vector<double>& ref, size_t n) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
        diff += (out[i] - ref[i]) * (out[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-300));
}

// 4-bit weights of N(0, 0.02) leave about 10% relative error in a product; a wrong layout leaves
// about 140%.
constexpr double kWorstError = 0.3;

bool checked(const std::string& what, const std::string& shape, double error) {
    std::fprintf(stderr, "engine check: %s %s: relative RMS error %.3f against the fp32 product%s\n", what.c_str(),
                 shape.c_str(), error, error > kWorstError ? " (too large: not timed)" : "");
    return error <= kWorstError;
}

void engine_cases(const EngineShape& s) {
    const int64_t N = s.N, K = s.K;
    std::vector<float> w(static_cast<size_t>(N * K));
    fill_normal(w.data(), w.size(), 7, 0.02f);
    Buffer<float> x(static_cast<size_t>(kLargestM * K)), out(static_cast<size_t>(kLargestM * N));
    fill_normal(x.p, x.n, 3, 1.0f);
    // The fp32 product every row is checked against; M = 1 is its first row.
    std::vector<double> ref(static_cast<size_t>(kLargestM * N));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t m = 0; m < kLargestM; ++m)
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += double(w[n * K + k]) * x.p[m * K + k];
            ref[m * N + n] = acc;
        }

    Nf4Weights nf4(w.data(), N, K);
    const double nf4_bytes = N * K / 2.0 + 4.0 * N * K / kBlocksize;
    size_t next = 0;
    auto gemv = [&](int) {
        const size_t c = next++ % nf4.copies();
        check(cgemm_4bit_inference_naive_fp32(static_cast<int>(N), 1, static_cast<int>(K), x.p, nf4.packed[c],
                                              nf4.absmax[c], const_cast<float*>(kbit::kNf4Values), out.p,
                                              static_cast<int>(N), static_cast<int>(K / 2), static_cast<int>(N),
                                              static_cast<int>(kBlocksize), nullptr),
              "cgemm_4bit_inference_naive_fp32");
    };
    auto gemm = [&](int64_t M) {
        const size_t c = next++ % nf4.copies();
        check(cgemm_4bit_fp32(x.p, nf4.packed[c], nf4.absmax[c], nullptr, nullptr, nullptr, out.p, nullptr,
                              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                              static_cast<int>(kBlocksize), KBIT_QUANT_NF4, nullptr),
              "cgemm_4bit_fp32");
    };
    // kbit's int8 class (behaviour.md §3.6): the arithmetic of ggml's rows under kbit's NF4 format.
    auto gemm_int8 = [&](int64_t M) {
        const size_t c = next++ % nf4.copies();
        check(kbit_gemm_4bit_precision(KBIT_PRECISION_INT8, KBIT_DTYPE_FP32, x.p, nf4.packed[c], nf4.absmax[c], nullptr,
                                       nullptr, nullptr, out.p, nullptr, M, N, K, kBlocksize, KBIT_QUANT_NF4, nullptr),
              "kbit_gemm_4bit_precision int8");
    };
    // kbit's bf16 class (behaviour.md §3.7): a bf16 matmul of the dequantized weight (vdpbf16ps where the CPU has it).
    auto gemm_bf16 = [&](int64_t M) {
        const size_t c = next++ % nf4.copies();
        check(kbit_gemm_4bit_precision(KBIT_PRECISION_BF16, KBIT_DTYPE_FP32, x.p, nf4.packed[c], nf4.absmax[c], nullptr,
                                       nullptr, nullptr, out.p, nullptr, M, N, K, kBlocksize, KBIT_QUANT_NF4, nullptr),
              "kbit_gemm_4bit_precision bf16");
    };
    gemv(0);
    const bool gemv_ok = checked("kbit cgemm_4bit_inference_naive_fp32 M1", s.name, relative_error(out.p, ref, N));
    gemm(kLargestM);
    const bool gemm_ok = checked("kbit cgemm_4bit_fp32 M8", s.name, relative_error(out.p, ref, kLargestM * N));
    gemm_int8(kLargestM);
    const bool int8_ok = checked("kbit int8 class M8", s.name, relative_error(out.p, ref, kLargestM * N));
    gemm_bf16(kLargestM);
    const bool bf16_ok = checked("kbit bf16 class M8", s.name, relative_error(out.p, ref, kLargestM * N));

#ifdef KBIT_BENCH_HAVE_GGML
    using ggml_peer::Format;
    struct Peer {
        std::string impl;  // kernel name stem: ggml_q4_0_repack, ggml_q4_0_plain, ...
        std::string note;
        std::unique_ptr<ggml_peer::MatMul> mm;
    };
    std::vector<Peer> peers;
    for (Format f : {Format::q4_0, Format::iq4_nl, Format::q4_k})
        for (bool repack : {true, false}) {
            const std::string impl = std::string("ggml_") + ggml_peer::format_name(f) + (repack ? "_repack" : "_plain");
            bool wanted = false;
            for (int64_t M : {int64_t{1}, kLargestM})
                wanted = wanted || selected(impl + "_M" + std::to_string(M), "fp32", s.name);
            if (!wanted) continue;
            const double bytes = N * K * ggml_peer::bytes_per_weight(f);
            auto mm = std::make_unique<ggml_peer::MatMul>(f, repack, w.data(), N, K,
                                                          std::vector<int64_t>{1, kLargestM}, copies_for(bytes));
            if (!mm->ok()) {
                std::fprintf(stderr, "note: %s %s not timed: %s\n", impl.c_str(), s.name.c_str(), mm->why_not().c_str());
                continue;
            }
            bool ok = true;
            for (int64_t M : {int64_t{1}, kLargestM}) {
                std::copy(x.p, x.p + M * K, mm->input(M));
                mm->run(M, 1);
                ok = checked(impl + " M" + std::to_string(M), s.name, relative_error(mm->output(), ref, M * N)) && ok;
            }
            if (!ok) continue;
            const std::string note = ggml_peer::version() + " " + ggml_peer::format_name(f) +
                                     (repack ? " in CPU_REPACK as " + mm->layout() : " in the plain CPU buffer");
            peers.push_back({impl, note, std::move(mm)});
        }
#else
    std::fprintf(stderr, "note: engine %s: ggml was not built (configure with -DKBIT_BENCH_GGML=<prefix>, "
                         "see bench/fetch-ggml); kbit's rows only\n", s.name.c_str());
#endif

    for (int64_t M : {int64_t{1}, kLargestM})
        for (int t : options().threads) {
            const std::string ms = "_M" + std::to_string(M);
            const Traffic traffic{nf4_bytes + 4.0 * double(M * K), 4.0 * double(M * N), 2};
            std::vector<Case> cases;
            auto add = [&](const std::string& kernel, const Traffic& tr, std::function<void()> run, const std::string& note) {
                if (selected(kernel, "fp32", s.name)) cases.push_back(Case{kernel, "fp32", s.name, t, tr, std::move(run), note});
            };
            if (M == 1 && gemv_ok)
                add("kbit_nf4_naive" + ms, traffic, [&] { gemv(0); },
                    "kbit cgemm_4bit_inference_naive_fp32 NF4 blocksize 64");
#ifdef KBIT_BENCH_HAVE_GGML
            for (Peer& p : peers) {
                const Traffic tr{p.mm->weight_bytes() + 4.0 * double(M * K), 4.0 * double(M * N), 1};
                ggml_peer::MatMul* mm = p.mm.get();
                add(p.impl + ms, tr, [mm, M, t] { mm->run(M, t); }, p.note);
            }
#endif
            if (gemm_ok) add("kbit_nf4_gemm" + ms, traffic, [&, M] { gemm(M); }, "kbit cgemm_4bit_fp32 NF4 blocksize 64");
            if (int8_ok)
                add("kbit_nf4_int8" + ms, traffic, [&, M] { gemm_int8(M); },
                    "kbit_gemm_4bit_precision KBIT_PRECISION_INT8 NF4 blocksize 64");
            if (bf16_ok)
                add("kbit_nf4_bf16" + ms, traffic, [&, M] { gemm_bf16(M); },
                    "kbit_gemm_4bit_precision KBIT_PRECISION_BF16 NF4 blocksize 64");
            add("read_nf4" + ms, traffic, [&] {
                const size_t c = next++ % nf4.copies();
                if ((fold_bytes(nf4.packed[c], N * K / 2) ^ fold_bytes(reinterpret_cast<const uint8_t*>(nf4.absmax[c]),
                                                                      4 * (N * K / kBlocksize))) == 42)
                    std::puts("");  // keeps the reads
            }, "no work (kbit's weight bytes read once)");
            if (!cases.empty()) measure_alternating(cases);
        }
}

}  // namespace

KBIT_BENCH_SUITE(engine) {
    for (const auto& s : engine_shapes()) engine_cases(s);
}

}  // namespace kbit_bench
