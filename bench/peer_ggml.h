// peer_ggml.h — ggml (llama.cpp's kernel library) as a peer in kbit_bench: its 4-bit matrix products
// set up as llama.cpp runs them on a CPU, for the engine and moe suites to time beside kbit's.
// Compiled only when kbit_bench is configured with -DKBIT_BENCH_GGML=<prefix> (bench/fetch-ggml
// builds one), which defines KBIT_BENCH_HAVE_GGML; nothing here names a ggml type, so the suites
// include this header either way and call it only under that macro.
//
// What llama.cpp does, and so what is timed: weights quantized to a ggml type live in a backend
// buffer, by default one of the CPU backend's extra buffer type "CPU_REPACK" (found through the
// backend registry, ggml_backend_dev_get_extra_bufts), which rearranges each tensor as it is
// uploaded into interleaved rows for its GEMV/GEMM kernels; activations are fp32 tensors, which
// ggml_mul_mat / ggml_mul_mat_id quantize to Q8_0 or Q8_K inside the call (so that time is in the
// row); one CPU backend computes the one-node graph on its OpenMP threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kbit_bench::ggml_peer {

enum class Format { q4_0, iq4_nl, q4_k };

const char* format_name(Format f);  // "q4_0", "iq4_nl", "q4_k"

// Bytes of a weight in the format, its scales included (ggml blocks hold both): 18 per 32 weights
// for Q4_0 and IQ4_NL, 144 per 256 for Q4_K. Repacking moves bytes, it adds none.
double bytes_per_weight(Format f);

// "ggml 0.25.3 from llama-cpp-python 0.3.36": the version the rows' notes name.
std::string version();

// out[M][N] = x[M][K] * W[N][K]^T (ggml_mul_mat(W, x), W with ne0 = K, ne1 = N) for each M of a list,
// W quantized once and uploaded into `copies` tensors so that calls rotating over them read it from
// memory.
class MatMul {
public:
    // w: N * K fp32 weights, row-major. repack: the CPU_REPACK buffer type, else the CPU backend's
    // plain one. On failure (no repacked kernel for this type and shape on this CPU) ok() is false and
    // why_not() says why.
    MatMul(Format f, bool repack, const float* w, int64_t N, int64_t K, const std::vector<int64_t>& Ms,
           int64_t copies);
    ~MatMul();
    MatMul(const MatMul&) = delete;
    MatMul& operator=(const MatMul&) = delete;
    bool ok() const;
    const std::string& why_not() const;
    float* input(int64_t M);         // x for this M, M * K floats
    const float* output() const;     // the last call's out, M * N floats
    void run(int64_t M, int threads);  // one product on the next copy
    double weight_bytes() const;     // one copy
    const std::string& layout() const;  // the repacked layout ggml chose ("q4_0_8x8"), "" if plain

private:
    struct State;
    std::unique_ptr<State> s_;
};

// The mixture-of-experts product llama.cpp's MoE layers call: ggml_mul_mat_id(W, x, ids) with W
// [E][N][K] (ne0 = K, ne1 = N, ne2 = E), x [T][rows][K] fp32 (rows 1: every choice of a token reads
// its one row; rows = top_k: one row per choice), ids [T][top_k] int32, out [T][top_k][N] fp32, for
// each token count T of a list. The weights in `copies` tensors, uploaded once for every T; calls
// rotate over (copy, routing) pairs, routing r of token count T being routings[i][r] for T =
// token_counts[i].
class MatMulId {
public:
    // distinct_experts: D experts' N * K fp32 weights each; expert e holds distinct_experts[e % D] (the
    // product's time does not depend on the values, and quantizing 128 experts to each format would
    // take minutes).
    MatMulId(Format f, bool repack, const std::vector<std::vector<float>>& distinct_experts, int64_t E, int64_t N,
             int64_t K, int64_t rows, int64_t top_k, int64_t copies, const std::vector<int64_t>& token_counts,
             const std::vector<std::vector<std::vector<int32_t>>>& routings);
    ~MatMulId();
    MatMulId(const MatMulId&) = delete;
    MatMulId& operator=(const MatMulId&) = delete;
    bool ok() const;
    const std::string& why_not() const;
    float* input(int64_t T);               // x for T tokens, T * rows * K floats
    const float* output() const;           // the last call's out, T * top_k * N floats
    void run(int64_t T, int threads);        // the next (copy, routing)
    void run_first(int64_t T, int threads);  // copy 0, routing 0 (for checking a result)
    const std::string& layout() const;     // the repacked layout ggml chose, "" if plain

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace kbit_bench::ggml_peer
