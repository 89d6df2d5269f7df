// peer_ggml.cpp — the ggml side of kbit_bench's engine and moe suites (peer_ggml.h says what is set
// up and why). Written against ggml's public headers only (ggml.h, ggml-alloc.h, ggml-backend.h,
// ggml-cpu.h).
#include "peer_ggml.h"

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#ifndef KBIT_BENCH_GGML_SOURCE
#define KBIT_BENCH_GGML_SOURCE "an unnamed source"
#endif

namespace kbit_bench::ggml_peer {
namespace {

ggml_type type_of(Format f) {
    switch (f) {
        case Format::q4_0: return GGML_TYPE_Q4_0;
        case Format::iq4_nl: return GGML_TYPE_IQ4_NL;
        case Format::q4_k: return GGML_TYPE_Q4_K;
    }
    std::abort();
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "peer_ggml: %s failed\n", what);
    std::exit(1);
}

// ggml's log: warnings and errors go to stderr; of the rest only the layout CPU_REPACK reports at
// debug level as it uploads a tensor ("repack tensor NAME with q4_0_8x8") is kept, for the notes.
std::string g_last_layout;

void on_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
        return;
    }
    const char* with = std::strstr(text, "repack tensor ") ? std::strstr(text, " with ") : nullptr;
    if (with != nullptr) {
        g_last_layout = with + 6;
        while (!g_last_layout.empty() && (g_last_layout.back() == '\n' || g_last_layout.back() == ' '))
            g_last_layout.pop_back();
    }
}

ggml_backend_dev_t cpu_device() {
    static const bool logging = (ggml_log_set(on_log, nullptr), true);
    (void)logging;
    static ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (dev == nullptr) fail("finding ggml's CPU device");
    return dev;
}

// One CPU backend for every row, as an engine has one per process; its thread count is set per call.
ggml_backend_t cpu_backend() {
    static ggml_backend_t backend = ggml_backend_dev_init(cpu_device(), nullptr);
    if (backend == nullptr) fail("ggml_backend_dev_init (CPU)");
    return backend;
}

// The buffer type llama.cpp tries first for a CPU weight: the CPU device's extra buffer type
// CPU_REPACK, reached as llama.cpp reaches it, through the registry's proc address
// "ggml_backend_dev_get_extra_bufts". nullptr where this build has none (GGML_CPU_REPACK off).
ggml_backend_buffer_type_t repack_buffer_type() {
    static ggml_backend_buffer_type_t found = [] {
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu_device());
        auto extra_bufts = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
            ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
        for (ggml_backend_buffer_type_t* b = extra_bufts ? extra_bufts(cpu_device()) : nullptr; b && *b; ++b)
            if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
        return static_cast<ggml_backend_buffer_type_t>(nullptr);
    }();
    return found;
}

// rows x K fp32 weights in `type`, in chunks of rows over the OpenMP threads (ggml's quantizers
// are thread-safe; IQ4_NL's and Q4_K's search for scales takes seconds on a large matrix).
std::vector<uint8_t> quantize(ggml_type type, const float* w, int64_t rows, int64_t K) {
    const size_t row_bytes = ggml_row_size(type, K);
    std::vector<uint8_t> q(static_cast<size_t>(rows) * row_bytes);
    ggml_quantize_init(type);
    const int64_t chunk = 16;
#pragma omp parallel for schedule(dynamic)
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        ggml_quantize_chunk(type, w, q.data(), r0 * K, n, K, nullptr);
    }
    return q;
}

ggml_context* new_context(size_t tensors, size_t graphs, size_t nodes_per_graph) {
    ggml_init_params params{};
    params.mem_size = tensors * ggml_tensor_overhead() + graphs * ggml_graph_overhead_custom(nodes_per_graph, false) +
                      4096;
    params.mem_buffer = nullptr;
    params.no_alloc = true;  // tensors' data live in backend buffers
    ggml_context* ctx = ggml_init(params);
    if (ctx == nullptr) fail("ggml_init");
    return ctx;
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// What MatMul and MatMulId share: the weight copies in their buffer, the fp32 tensors in a plain
// CPU buffer, one one-node graph per variant.
struct Setup {
    ggml_context* weights_ctx = nullptr;
    ggml_context* io_ctx = nullptr;
    ggml_backend_buffer_t weights_buf = nullptr;
    ggml_backend_buffer_t io_buf = nullptr;
    std::vector<ggml_tensor*> weights;
    std::vector<ggml_cgraph*> graphs;
    std::vector<ggml_tensor*> nodes;
    size_t out_offset = 0;  // every node's result at this offset of io_buf: one call's output at a time
    std::string why_not;
    std::string layout;  // the repacked layout ggml logged, "" if none
    size_t next = 0;

    ~Setup() {
        if (weights_buf) ggml_backend_buffer_free(weights_buf);
        if (io_buf) ggml_backend_buffer_free(io_buf);
        if (weights_ctx) ggml_free(weights_ctx);
        if (io_ctx) ggml_free(io_ctx);
    }

    // Allocates the weight copies (created in weights_ctx) in the chosen buffer type.
    void allocate_weights(bool repack) {
        ggml_backend_buffer_type_t buft = repack ? repack_buffer_type() : ggml_backend_cpu_buffer_type();
        if (buft == nullptr) {
            why_not = "this ggml build has no CPU_REPACK buffer type";
            return;
        }
        weights_buf = ggml_backend_alloc_ctx_tensors_from_buft(weights_ctx, buft);
        if (weights_buf == nullptr) fail("allocating the weight buffer");
        // llama.cpp would keep a weight out of CPU_REPACK when the op on it is not supported there
        // (no repacked kernel for this type or row count on this CPU); such a row is not timed.
    }

    void place_node(ggml_tensor* node) {
        char* base = static_cast<char*>(ggml_backend_buffer_get_base(io_buf));
        if (ggml_backend_tensor_alloc(io_buf, node, base + out_offset) != GGML_STATUS_SUCCESS) fail("placing a result");
        ggml_cgraph* g = ggml_new_graph_custom(io_ctx, 4, false);
        ggml_build_forward_expand(g, node);
        nodes.push_back(node);
        graphs.push_back(g);
    }

    bool supported(bool repack, Format f) {
        if (!why_not.empty()) return false;
        if (!ggml_backend_dev_supports_op(cpu_device(), nodes.front())) {
            why_not = std::string(repack ? "CPU_REPACK" : "the CPU buffer") + " does not take this " +
                      format_name(f) + " product on this CPU";
            return false;
        }
        return true;
    }

    void compute(size_t graph, int threads) {
        ggml_backend_t backend = cpu_backend();
        ggml_backend_cpu_set_n_threads(backend, threads);
        if (ggml_backend_graph_compute(backend, graphs[graph]) != GGML_STATUS_SUCCESS)
            fail("ggml_backend_graph_compute");
    }
};

}  // namespace

const char* format_name(Format f) { return ggml_type_name(type_of(f)); }

double bytes_per_weight(Format f) {
    const ggml_type t = type_of(f);
    return static_cast<double>(ggml_type_size(t)) / static_cast<double>(ggml_blck_size(t));
}

std::string version() { return std::string("ggml ") + ggml_version() + " from " + KBIT_BENCH_GGML_SOURCE; }

// --- MatMul ---------------------------------------------------------------------------------------

struct MatMul::State : Setup {
    std::vector<int64_t> Ms;
    std::vector<ggml_tensor*> xs;  // one per M
    int64_t copies = 0;
    double copy_bytes = 0;
};

MatMul::MatMul(Format f, bool repack, const float* w, int64_t N, int64_t K, const std::vector<int64_t>& Ms,
               int64_t copies)
    : s_(new State) {
    State& s = *s_;
    s.Ms = Ms;
    s.copies = copies;
    const ggml_type type = type_of(f);
    const auto nm = static_cast<int64_t>(Ms.size());
    s.weights_ctx = new_context(static_cast<size_t>(copies), 0, 0);
    for (int64_t c = 0; c < copies; ++c) s.weights.push_back(ggml_new_tensor_2d(s.weights_ctx, type, K, N));
    s.allocate_weights(repack);
    if (!s.why_not.empty()) return;
    s.copy_bytes = static_cast<double>(ggml_nbytes(s.weights.front()));
    s.io_ctx = new_context(static_cast<size_t>(nm * (copies + 1)), static_cast<size_t>(nm * copies), 4);
    // io_buf: each M's x, then one result region as large as the largest M's.
    size_t x_bytes = 0;
    int64_t largest = 0;
    for (int64_t M : Ms) {
        s.xs.push_back(ggml_new_tensor_2d(s.io_ctx, GGML_TYPE_F32, K, M));
        x_bytes += aligned(ggml_nbytes(s.xs.back()));
        largest = std::max(largest, M);
    }
    s.out_offset = x_bytes;
    s.io_buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(),
                                              x_bytes + aligned(sizeof(float) * static_cast<size_t>(largest * N)));
    if (s.io_buf == nullptr) fail("allocating the activation buffer");
    char* at = static_cast<char*>(ggml_backend_buffer_get_base(s.io_buf));
    for (ggml_tensor* x : s.xs) {
        if (ggml_backend_tensor_alloc(s.io_buf, x, at) != GGML_STATUS_SUCCESS) fail("placing x");
        std::memset(x->data, 0, ggml_nbytes(x));
        at += aligned(ggml_nbytes(x));
    }
    for (ggml_tensor* x : s.xs)  // graphs[i * copies + c]: the i-th M on copy c
        for (ggml_tensor* wt : s.weights) s.place_node(ggml_mul_mat(s.io_ctx, wt, x));
    if (!s.supported(repack, f)) return;
    // The upload: into CPU_REPACK this is where each copy is rearranged.
    const std::vector<uint8_t> q = quantize(type, w, N, K);
    g_last_layout.clear();
    for (ggml_tensor* wt : s.weights) ggml_backend_tensor_set(wt, q.data(), 0, q.size());
    s.layout = g_last_layout;
}

namespace {
size_t index_of(const std::vector<int64_t>& Ms, int64_t M) {
    const auto it = std::find(Ms.begin(), Ms.end(), M);
    if (it == Ms.end()) fail("MatMul: an M it was not built for");
    return static_cast<size_t>(it - Ms.begin());
}
}  // namespace

MatMul::~MatMul() = default;
bool MatMul::ok() const { return s_->why_not.empty(); }
const std::string& MatMul::why_not() const { return s_->why_not; }
float* MatMul::input(int64_t M) { return static_cast<float*>(s_->xs[index_of(s_->Ms, M)]->data); }
const float* MatMul::output() const { return static_cast<const float*>(s_->nodes.front()->data); }
void MatMul::run(int64_t M, int threads) {
    const size_t c = s_->next++ % static_cast<size_t>(s_->copies);
    s_->compute(index_of(s_->Ms, M) * static_cast<size_t>(s_->copies) + c, threads);
}
double MatMul::weight_bytes() const { return s_->copy_bytes; }
const std::string& MatMul::layout() const { return s_->layout; }

// --- MatMulId -------------------------------------------------------------------------------------

struct MatMulId::State : Setup {
    std::vector<int64_t> token_counts;
    std::vector<ggml_tensor*> xs;      // one per token count
    std::vector<size_t> first_graph;   // per token count, the index of its first graph
    std::vector<size_t> graph_count;   // per token count
};

MatMulId::MatMulId(Format f, bool repack, const std::vector<std::vector<float>>& distinct_experts, int64_t E,
                   int64_t N, int64_t K, int64_t rows, int64_t top_k, int64_t copies,
                   const std::vector<int64_t>& token_counts,
                   const std::vector<std::vector<std::vector<int32_t>>>& routings)
    : s_(new State) {
    State& s = *s_;
    s.token_counts = token_counts;
    const ggml_type type = type_of(f);
    s.weights_ctx = new_context(static_cast<size_t>(copies), 0, 0);
    for (int64_t c = 0; c < copies; ++c) s.weights.push_back(ggml_new_tensor_3d(s.weights_ctx, type, K, N, E));
    s.allocate_weights(repack);
    if (!s.why_not.empty()) return;
    // Per token count T: x, R ids tensors and lcm(copies, R) graphs, variant v on copy v % copies with
    // routing v % R, so that each pair comes once before a call repeats its predecessor's.
    size_t tensors = 0, graphs = 0, io_bytes = 0, largest_out = 0;
    for (size_t i = 0; i < token_counts.size(); ++i) {
        const int64_t T = token_counts[i], R = static_cast<int64_t>(routings[i].size());
        const auto variants = static_cast<size_t>(std::lcm(copies, R));
        tensors += 1 + static_cast<size_t>(R) + variants;
        graphs += variants;
        io_bytes += aligned(sizeof(float) * static_cast<size_t>(T * rows * K)) +
                    static_cast<size_t>(R) * aligned(sizeof(int32_t) * static_cast<size_t>(T * top_k));
        largest_out = std::max(largest_out, aligned(sizeof(float) * static_cast<size_t>(T * top_k * N)));
    }
    s.io_ctx = new_context(tensors, graphs, 4);
    s.out_offset = io_bytes;
    s.io_buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), io_bytes + largest_out);
    if (s.io_buf == nullptr) fail("allocating the activation buffer");
    char* at = static_cast<char*>(ggml_backend_buffer_get_base(s.io_buf));
    auto place = [&](ggml_tensor* t) {
        if (ggml_backend_tensor_alloc(s.io_buf, t, at) != GGML_STATUS_SUCCESS) fail("placing an input");
        at += aligned(ggml_nbytes(t));
    };
    for (size_t i = 0; i < token_counts.size(); ++i) {
        const int64_t T = token_counts[i], R = static_cast<int64_t>(routings[i].size());
        ggml_tensor* x = ggml_new_tensor_3d(s.io_ctx, GGML_TYPE_F32, K, rows, T);
        place(x);
        std::memset(x->data, 0, ggml_nbytes(x));
        s.xs.push_back(x);
        std::vector<ggml_tensor*> ids;
        for (int64_t r = 0; r < R; ++r) {
            ids.push_back(ggml_new_tensor_2d(s.io_ctx, GGML_TYPE_I32, top_k, T));
            place(ids.back());
            std::memcpy(ids.back()->data, routings[i][r].data(), ggml_nbytes(ids.back()));
        }
        const int64_t variants = std::lcm(copies, R);
        s.first_graph.push_back(s.graphs.size());
        s.graph_count.push_back(static_cast<size_t>(variants));
        for (int64_t v = 0; v < variants; ++v)
            s.place_node(ggml_mul_mat_id(s.io_ctx, s.weights[v % copies], x, ids[v % R]));
    }
    if (!s.supported(repack, f)) return;
    // Expert e's bytes are those of distinct expert e % D, quantized once.
    const auto D = static_cast<int64_t>(distinct_experts.size());
    const size_t expert_bytes = ggml_row_size(type, K) * static_cast<size_t>(N);
    std::vector<uint8_t> all(expert_bytes * static_cast<size_t>(E));
    for (int64_t d = 0; d < D && d < E; ++d) {
        const std::vector<uint8_t> q = quantize(type, distinct_experts[d].data(), N, K);
        for (int64_t e = d; e < E; e += D) std::memcpy(all.data() + e * expert_bytes, q.data(), expert_bytes);
    }
    g_last_layout.clear();
    for (ggml_tensor* wt : s.weights) ggml_backend_tensor_set(wt, all.data(), 0, all.size());
    s.layout = g_last_layout;
}

MatMulId::~MatMulId() = default;
bool MatMulId::ok() const { return s_->why_not.empty(); }
const std::string& MatMulId::why_not() const { return s_->why_not; }
float* MatMulId::input(int64_t T) {
    return static_cast<float*>(s_->xs[index_of(s_->token_counts, T)]->data);
}
const float* MatMulId::output() const { return static_cast<const float*>(s_->nodes.front()->data); }
void MatMulId::run(int64_t T, int threads) {
    const size_t i = index_of(s_->token_counts, T);
    s_->compute(s_->first_graph[i] + s_->next++ % s_->graph_count[i], threads);
}
void MatMulId::run_first(int64_t T, int threads) { s_->compute(s_->first_graph[index_of(s_->token_counts, T)], threads); }
const std::string& MatMulId::layout() const { return s_->layout; }

}  // namespace kbit_bench::ggml_peer
