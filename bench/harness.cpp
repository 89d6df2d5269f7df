#include "harness.h"

#include <dlfcn.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

namespace kbit_bench {
namespace {

Options g_options;
Probes* g_probes = nullptr;

std::map<std::string, SuiteFn>& suites() {
    static std::map<std::string, SuiteFn> s;
    return s;
}

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

float* alloc_floats(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (p == nullptr) {
        std::fprintf(stderr, "bench: out of memory\n");
        std::exit(1);
    }
    return static_cast<float*>(p);
}

std::vector<int> parse_ints(const char* s) {
    std::vector<int> v;
    for (const char* p = s; *p;) {
        v.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
    }
    return v;
}

}  // namespace

const Options& options() { return g_options; }

Probes::Probes(size_t bytes_per_array) : n_(bytes_per_array / sizeof(float) / 64 * 64) {
    for (int i = 0; i < kMaxStreams; ++i) src_.push_back(alloc_floats(n_));
    dst_ = alloc_floats(n_);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < static_cast<long>(n_); ++i) {
        for (int s = 0; s < kMaxStreams; ++s) src_[s][i] = static_cast<float>(s);
        dst_[i] = 0.0f;
    }
}

Probes::~Probes() {
    for (float* p : src_) std::free(p);
    std::free(dst_);
}

// Each thread sums its static part of every stream, 64 bytes of each per step: the streams are read
// together, as a kernel reads its inputs. The stream count is a template argument so that the loop
// is unrolled with two independent accumulators per stream and the pointers in registers: with one
// shared pair and a run-time stream loop the probe itself was the limit (17 GB/s on one Zen 5 core
// that streams 40 GB/s), and kernels ran at up to 195% of it.
template <int S>
double read_pass(const std::vector<float*>& src_vec, long n) {
    const float* src[S];
    for (int s = 0; s < S; ++s) src[s] = src_vec[s];
    float total = 0.0f;
    const double t0 = now();
#pragma omp parallel reduction(+ : total)
    {
        __m256 acc[S][2];
        for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm256_setzero_ps();
#pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += 16)
            for (int s = 0; s < S; ++s) {
                acc[s][0] = _mm256_add_ps(acc[s][0], _mm256_load_ps(src[s] + i));
                acc[s][1] = _mm256_add_ps(acc[s][1], _mm256_load_ps(src[s] + i + 8));
            }
        __m256 sum = _mm256_setzero_ps();
        for (int s = 0; s < S; ++s) sum = _mm256_add_ps(sum, _mm256_add_ps(acc[s][0], acc[s][1]));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, sum);
        for (float x : lanes) total += x;
    }
    const double dt = now() - t0;
    if (total == 1234.5f) std::puts("");  // keeps the sums alive
    return static_cast<double>(S) * static_cast<double>(n) * sizeof(float) / dt / 1e9;
}

double Probes::read_gbs(int streams) {
    const long n = static_cast<long>(n_);
    switch (std::clamp(streams, 1, kMaxStreams)) {
        case 1: return read_pass<1>(src_, n);
        case 2: return read_pass<2>(src_, n);
        case 3: return read_pass<3>(src_, n);
        case 4: return read_pass<4>(src_, n);
        case 5: return read_pass<5>(src_, n);
        default: return read_pass<6>(src_, n);
    }
}

// Writes and copies take the better of non-temporal and ordinary stores: which one is faster
// depends on the core (ordinary stores won on Zen 5 for one thread, and kernels that use them ran
// above a non-temporal-only probe).
template <bool kNonTemporal>
void store8(float* p, __m256 v) {
    if constexpr (kNonTemporal)
        _mm256_stream_ps(p, v);
    else
        _mm256_store_ps(p, v);
}

template <bool kNonTemporal>
double write_pass(float* dst, long n) {
    const __m256 v = _mm256_set1_ps(1.0f);
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 16) {
        store8<kNonTemporal>(dst + i, v);
        store8<kNonTemporal>(dst + i + 8, v);
    }
    _mm_sfence();
    return static_cast<double>(n) * sizeof(float) / (now() - t0) / 1e9;
}

template <bool kNonTemporal>
double copy_pass(const float* src, float* dst, long n) {
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 16) {
        store8<kNonTemporal>(dst + i, _mm256_load_ps(src + i));
        store8<kNonTemporal>(dst + i + 8, _mm256_load_ps(src + i + 8));
    }
    _mm_sfence();
    return 2.0 * static_cast<double>(n) * sizeof(float) / (now() - t0) / 1e9;
}

double Probes::write_gbs() {
    const long n = static_cast<long>(n_);
    return std::max(write_pass<true>(dst_, n), write_pass<false>(dst_, n));
}

double Probes::copy_gbs() {
    const long n = static_cast<long>(n_);
    return std::max(copy_pass<true>(src_[0], dst_, n), copy_pass<false>(src_[0], dst_, n));
}

double Roofline::limit_seconds(const Traffic& t) const {
    const double reads = t.read / (read_gbs * 1e9), writes = t.write / (write_gbs * 1e9);
    const double balanced = 2.0 * std::min(t.read, t.write) / (copy_gbs * 1e9);
    return std::max({reads, writes, balanced});
}

const char* Roofline::bound(const Traffic& t) const {
    const double reads = t.read / read_gbs, writes = t.write / write_gbs;
    const double balanced = 2.0 * std::min(t.read, t.write) / copy_gbs;
    if (balanced >= reads && balanced >= writes) return "copy";
    return reads >= writes ? "read" : "write";
}

bool selected(const std::string& kernel, const std::string& dtype, const std::string& shape) {
    if (g_options.filter.empty()) return true;
    return (kernel + " " + dtype + " " + shape).find(g_options.filter) != std::string::npos;
}

Result measure(const std::string& kernel, const std::string& dtype, const std::string& shape, int threads,
               const Traffic& traffic, const std::function<void()>& run, const std::string& note) {
    Result r;
    r.kernel = kernel;
    r.dtype = dtype;
    r.shape = shape;
    r.threads = threads;
    r.traffic = traffic;
    r.note = note;
    omp_set_num_threads(threads);
    run();  // warm-up: page faults, lazy initialisation, dispatch
    std::vector<double> times, reads, writes, copies, pct;
    for (int round = 0; round < g_options.rounds; ++round) {
        Roofline m;
        m.read_gbs = g_probes->read_gbs(traffic.read_streams);
        m.write_gbs = g_probes->write_gbs();
        const double t0 = now();
        run();
        const double dt = now() - t0;
        m.copy_gbs = g_probes->copy_gbs();
        times.push_back(dt);
        reads.push_back(m.read_gbs);
        writes.push_back(m.write_gbs);
        copies.push_back(m.copy_gbs);
        pct.push_back(100.0 * m.limit_seconds(traffic) / dt);
    }
    r.seconds = median(times);
    r.gbs = traffic.bytes() / r.seconds / 1e9;
    r.machine.read_gbs = median(reads);
    r.machine.write_gbs = median(writes);
    r.machine.copy_gbs = median(copies);
    r.limit_gbs = traffic.bytes() / r.machine.limit_seconds(traffic) / 1e9;
    r.pct_of_limit = median(pct);
    std::string row_note = r.note;
    if (r.pct_of_limit > 100.0) row_note += std::string(row_note.empty() ? "" : "; ") + "ABOVE ITS LIMIT: the limit is wrong";
    std::printf("%s,%s,%s,%d,%.0f,%.0f,%d,%.6f,%.2f,%.2f,%.2f,%.2f,%.2f,%s,%.1f,%s\n", r.kernel.c_str(),
                r.dtype.c_str(), r.shape.c_str(), r.threads, traffic.read, traffic.write, traffic.read_streams,
                r.seconds * 1e3, r.gbs, r.machine.read_gbs, r.machine.write_gbs, r.machine.copy_gbs, r.limit_gbs,
                r.machine.bound(traffic), r.pct_of_limit, row_note.c_str());
    std::fflush(stdout);
    return r;
}

bool register_suite(const char* name, SuiteFn fn) {
    suites()[name] = fn;
    return true;
}

void* bnb_handle() {
    static void* handle = g_options.bnb_library.empty()
                              ? nullptr
                              : dlopen(g_options.bnb_library.c_str(), RTLD_NOW | RTLD_LOCAL);
    return handle;
}

void fill_normal(float* x, size_t n, unsigned seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    for (size_t i = 0; i < n; ++i) x[i] = dist(rng);
}

}  // namespace kbit_bench

int main(int argc, char** argv) {
    using namespace kbit_bench;
    std::vector<std::string> only;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const char* name) -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench: %s needs a value\n", name);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--threads") g_options.threads = parse_ints(value("--threads"));
        else if (a == "--filter") g_options.filter = value("--filter");
        else if (a == "--rounds") g_options.rounds = std::atoi(value("--rounds"));
        else if (a == "--quick") g_options.quick = true;
        else if (a == "--bnb") g_options.bnb_library = value("--bnb");
        else if (a == "--suite") only.push_back(value("--suite"));
        else if (a == "--list") {
            for (auto& [name, fn] : suites()) std::printf("%s\n", name.c_str());
            return 0;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--suite NAME]... [--threads 1,2] [--filter TEXT] [--rounds N] [--quick] "
                         "[--bnb libbitsandbytes_cpu.so] [--list]\n",
                         argv[0]);
            return 2;
        }
    }
    if (g_options.quick && g_options.rounds > 2) g_options.rounds = 2;
    if (g_options.bnb_library.empty()) {
        if (const char* env = std::getenv("KBIT_BENCH_BNB_LIBRARY")) g_options.bnb_library = env;
#ifdef KBIT_BENCH_DEFAULT_BNB
        else g_options.bnb_library = KBIT_BENCH_DEFAULT_BNB;
#endif
    }
    std::fprintf(stderr, "bitsandbytes CPU library: %s\n",
                 bnb_handle() ? g_options.bnb_library.c_str() : "not found (comparison rows skipped)");
    Probes probes(g_options.quick ? size_t{16} << 20 : size_t{128} << 20);
    g_probes = &probes;
    std::printf("kernel,dtype,shape,threads,read_bytes,write_bytes,read_streams,ms,gbs,read_gbs,write_gbs,copy_gbs,"
                "limit_gbs,bound,pct_of_limit,note\n");
    for (auto& [name, fn] : suites())
        if (only.empty() || std::find(only.begin(), only.end(), name) != only.end()) fn(probes);
    return 0;
}
