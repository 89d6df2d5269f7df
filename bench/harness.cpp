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

Probes::Probes(size_t bytes_per_array) : n_(bytes_per_array / sizeof(float)) {
    a_ = alloc_floats(n_);
    b_ = alloc_floats(n_);
    c_ = alloc_floats(n_);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < static_cast<long>(n_); ++i) {
        a_[i] = 0.0f;
        b_[i] = 1.0f;
        c_[i] = 2.0f;
    }
}

Probes::~Probes() {
    std::free(a_);
    std::free(b_);
    std::free(c_);
}

double Probes::read_gbs() {
    const long n = static_cast<long>(n_);
    const float* b = b_;
    float total = 0.0f;
    const double t0 = now();
#pragma omp parallel reduction(+ : total)
    {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += 32) {
            s0 = _mm256_add_ps(s0, _mm256_load_ps(b + i));
            s1 = _mm256_add_ps(s1, _mm256_load_ps(b + i + 8));
            s2 = _mm256_add_ps(s2, _mm256_load_ps(b + i + 16));
            s3 = _mm256_add_ps(s3, _mm256_load_ps(b + i + 24));
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, s);
        for (float x : lanes) total += x;
    }
    const double dt = now() - t0;
    if (total == 1234.5f) std::puts("");  // keeps the sum alive
    return static_cast<double>(n_) * sizeof(float) / dt / 1e9;
}

double Probes::triad_gbs() {
    const long n = static_cast<long>(n_);
    float* a = a_;
    const float* b = b_;
    const float* c = c_;
    const __m256 s = _mm256_set1_ps(3.0f);
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 8)
        _mm256_stream_ps(a + i, _mm256_add_ps(_mm256_load_ps(b + i), _mm256_mul_ps(s, _mm256_load_ps(c + i))));
    _mm_sfence();
    const double dt = now() - t0;
    return 3.0 * static_cast<double>(n_) * sizeof(float) / dt / 1e9;
}

bool selected(const std::string& kernel, const std::string& dtype, const std::string& shape) {
    if (g_options.filter.empty()) return true;
    return (kernel + " " + dtype + " " + shape).find(g_options.filter) != std::string::npos;
}

Result measure(const std::string& kernel, const std::string& dtype, const std::string& shape, int threads,
               double bytes, const std::function<void()>& run, const std::string& note) {
    Result r;
    r.kernel = kernel;
    r.dtype = dtype;
    r.shape = shape;
    r.threads = threads;
    r.bytes = bytes;
    r.note = note;
    omp_set_num_threads(threads);
    run();  // warm-up: page faults, lazy initialisation, dispatch
    std::vector<double> times, reads, triads, pct_read, pct_triad;
    for (int round = 0; round < g_options.rounds; ++round) {
        const double read = g_probes->read_gbs();
        const double t0 = now();
        run();
        const double dt = now() - t0;
        const double triad = g_probes->triad_gbs();
        const double gbs = bytes / dt / 1e9;
        times.push_back(dt);
        reads.push_back(read);
        triads.push_back(triad);
        pct_read.push_back(100.0 * gbs / read);
        pct_triad.push_back(100.0 * gbs / triad);
    }
    r.seconds = median(times);
    r.gbs = bytes / r.seconds / 1e9;
    r.read_gbs = median(reads);
    r.triad_gbs = median(triads);
    r.pct_read = median(pct_read);
    r.pct_triad = median(pct_triad);
    std::printf("%s,%s,%s,%d,%.0f,%.6f,%.2f,%.2f,%.2f,%.1f,%.1f,%s\n", r.kernel.c_str(), r.dtype.c_str(),
                r.shape.c_str(), r.threads, r.bytes, r.seconds * 1e3, r.gbs, r.read_gbs, r.triad_gbs, r.pct_read,
                r.pct_triad, r.note.c_str());
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
    Probes probes(g_options.quick ? size_t{16} << 20 : size_t{256} << 20);
    g_probes = &probes;
    std::printf("kernel,dtype,shape,threads,bytes,ms,gbs,read_probe_gbs,triad_probe_gbs,pct_of_read,pct_of_triad,note\n");
    for (auto& [name, fn] : suites())
        if (only.empty() || std::find(only.begin(), only.end(), name) != only.end()) fn(probes);
    return 0;
}
