#include "harness.h"
#include "probe_passes.h"

#include <dlfcn.h>
#if defined(__x86_64__)
#include <immintrin.h>
#else
#include <arm_neon.h>
#endif
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
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

void* aligned_bytes(size_t bytes) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) {
        std::fprintf(stderr, "bench: out of memory\n");
        std::exit(1);
    }
    return p;
}

size_t cold_bytes() {
    if (g_options.quick) return size_t{8} << 20;
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);  // 0 or -1 where unknown
    return std::max(size_t{512} << 20, 2 * static_cast<size_t>(std::max(0L, llc)));
}

// n_ a multiple of 64 * kMaxStreams floats, so that every stream's slice is whole steps.
Probes::Probes(size_t cold) : n_(cold / sizeof(float) / (64 * kMaxStreams) * (64 * kMaxStreams)) {
    src_ = static_cast<float*>(aligned_bytes(n_ * sizeof(float)));
    dst_ = static_cast<float*>(aligned_bytes(n_ * sizeof(float)));
#pragma omp parallel for schedule(static)
    for (long i = 0; i < static_cast<long>(n_); ++i) {
        src_[i] = 1.0f;
        dst_[i] = 0.0f;
    }
}

Probes::~Probes() {
    std::free(src_);
    std::free(dst_);
}

namespace {

#if defined(__x86_64__)
struct Ymm : Lanes<8, Ymm> {
    static void stream(float* p, V v) { _mm256_stream_ps(p, v); }
    template <int OutBytes>
    static void widen(const uint8_t* in, uint8_t* out) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
        const __m256i v = OutBytes == 4 ? _mm256_cvtepu8_epi32(bytes) : _mm256_cvtepu8_epi16(bytes);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(out), v);
    }
};

// The probes use 512-bit vectors where the CPU has AVX-512 (one Sapphire Rapids core: reads 14.8
// GB/s against 13.0 with 256-bit ones, non-temporal writes 22-24 against 20-21), else 256-bit.
bool wide() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}
using Narrow = Ymm;
#define KBIT_BENCH_IF_WIDE(call) \
    if (wide()) return call
#else
// AArch64: 128-bit NEON probes, the only width (no SVE probes yet; probes_avx512.cpp is x86-64 only).
struct Neon {
    using V = float32x4_t;
    static constexpr long kLanes = 4;
    static V set1(float x) { return vdupq_n_f32(x); }
    static V load(const float* p) { return vld1q_f32(p); }
    static V add(V a, V b) { return vaddq_f32(a, b); }
    static float sum_lanes(V v) { return vaddvq_f32(v); }
    template <bool kNonTemporal>
    static void store(float* p, V v) {
        if constexpr (kNonTemporal) {  // STNP: a non-temporal pair of 64-bit halves
            __asm__ volatile("stnp %d1, %d2, [%0]" : : "r"(p), "w"(vget_low_f32(v)), "w"(vget_high_f32(v)) : "memory");
        } else {
            vst1q_f32(p, v);
        }
    }
    static constexpr long kOutVector = 16;
    template <int OutBytes>
    static void widen(const uint8_t* in, uint8_t* out) {  // plain stores: NEON has no streaming vector store
        if constexpr (OutBytes == 4) {
            uint32_t four;  // exactly the 4 input bytes (an 8-byte load would read past the array)
            std::memcpy(&four, in, sizeof four);
            vst1q_u32(reinterpret_cast<uint32_t*>(out), vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(four)))));
        } else {
            vst1q_u16(reinterpret_cast<uint16_t*>(out), vmovl_u8(vld1_u8(in)));
        }
    }
};
using Narrow = Neon;
#define KBIT_BENCH_IF_WIDE(call) static_cast<void>(0)
#endif

}  // namespace

double Probes::read_gbs(int streams) {
    const int s = std::clamp(streams, 1, kMaxStreams);
    const long n = static_cast<long>(n_) / s;  // s slices of the source: cold_bytes() in all
    std::vector<float*> slices;
    for (int k = 0; k < s; ++k) slices.push_back(src_ + k * n);
    KBIT_BENCH_IF_WIDE(read_gbs_avx512(slices, n, s, kMaxStreams));
    return read_gbs_of<Narrow>(slices, n, s, kMaxStreams);
}

double Probes::write_gbs() {
    const long n = static_cast<long>(n_);
    KBIT_BENCH_IF_WIDE(write_gbs_avx512(dst_, n));
    return best_write_pass<Narrow>(dst_, n);
}

double Probes::copy_gbs() {
    const long n = static_cast<long>(n_);
    KBIT_BENCH_IF_WIDE(copy_gbs_avx512(src_, dst_, n));
    return best_copy_pass<Narrow>(src_, dst_, n);
}

double Probes::update_gbs() {
    const long n = static_cast<long>(n_);
    KBIT_BENCH_IF_WIDE(update_gbs_avx512(dst_, n));
    return update_pass<Narrow>(dst_, n);
}

void widen_pass(const uint8_t* in, void* out, long n, int out_bytes) {
    KBIT_BENCH_IF_WIDE(widen_pass_avx512(in, out, n, out_bytes));
    if (out_bytes == 4) widen_pass<Narrow, 4>(in, out, n);
    else widen_pass<Narrow, 2>(in, out, n);
}

void adam8_pass(float* p, const float* g, uint8_t* s1, uint8_t* s2, long n) {
    float* a = reinterpret_cast<float*>(s1);  // zero bytes, moved as floats
    float* b = reinterpret_cast<float*>(s2);
    KBIT_BENCH_IF_WIDE(adam8_pass_avx512(p, g, a, b, n));
    adam8_pass<Narrow>(p, g, a, b, n);
}

double Roofline::balanced_gbs(const Traffic& t) const { return t.in_place ? update_gbs : copy_gbs; }

double Roofline::limit_seconds(const Traffic& t) const {
    const double reads = t.read / (read_gbs * 1e9), writes = t.write / (write_gbs * 1e9);
    const double balanced = 2.0 * std::min(t.read, t.write) / (balanced_gbs(t) * 1e9);
    return std::max({reads, writes, balanced});
}

const char* Roofline::bound(const Traffic& t) const {
    const double reads = t.read / read_gbs, writes = t.write / write_gbs;
    const double balanced = 2.0 * std::min(t.read, t.write) / balanced_gbs(t);
    if (balanced >= reads && balanced >= writes) return t.in_place ? "update" : "copy";
    return reads >= writes ? "read" : "write";
}

bool selected(const std::string& kernel, const std::string& dtype, const std::string& shape) {
    if (g_options.filter.empty()) return true;
    return (kernel + " " + dtype + " " + shape).find(g_options.filter) != std::string::npos;
}

Result measure(const std::string& kernel, const std::string& dtype, const std::string& shape, int threads,
               const Traffic& traffic, const std::function<void()>& run, const std::string& note) {
    return measure_alternating({Case{kernel, dtype, shape, threads, traffic, run, note}}).front();
}

std::vector<Result> measure_alternating(const std::vector<Case>& cases) {
    struct Samples {
        std::vector<double> times, reads, writes, copies, updates, pct;
    };
    std::vector<Samples> samples(cases.size());
    for (const Case& c : cases) {  // warm-up: page faults, lazy initialisation, dispatch
        omp_set_num_threads(c.threads);
        c.run();
    }
    for (int round = 0; round < g_options.rounds; ++round)
        for (size_t i = 0; i < cases.size(); ++i) {
            const Case& c = cases[i];
            Samples& s = samples[i];
            omp_set_num_threads(c.threads);
            Roofline m;
            // The write probe first: its 960 MB of non-temporal stores were still draining when a
            // kernel right behind it started, which cost read-mostly kernels 5-12% (NF4 GEMV on the
            // Intel guest, 2026-12-03: every 2-thread row 2-8 points lower); the read probe just
            // before the call leaves the memory system as a stream of reads does.
            m.write_gbs = g_probes->write_gbs();
            m.read_gbs = g_probes->read_gbs(c.traffic.read_streams);
            const double t0 = probe_now();
            c.run();
            const double dt = probe_now() - t0;
            m.copy_gbs = g_probes->copy_gbs();
            if (c.traffic.in_place) m.update_gbs = g_probes->update_gbs();
            s.times.push_back(dt);
            s.reads.push_back(m.read_gbs);
            s.writes.push_back(m.write_gbs);
            s.copies.push_back(m.copy_gbs);
            s.updates.push_back(m.update_gbs);
            s.pct.push_back(100.0 * m.limit_seconds(c.traffic) / dt);
        }
    std::vector<Result> results;
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const Samples& s = samples[i];
        const Traffic& traffic = c.traffic;
        Result r;
        r.kernel = c.kernel;
        r.dtype = c.dtype;
        r.shape = c.shape;
        r.threads = c.threads;
        r.traffic = traffic;
        r.note = c.note;
        r.seconds = median(s.times);
        r.gbs = traffic.bytes() / r.seconds / 1e9;
        r.machine.read_gbs = median(s.reads);
        r.machine.write_gbs = median(s.writes);
        r.machine.copy_gbs = median(s.copies);
        r.machine.update_gbs = median(s.updates);
        r.limit_gbs = traffic.bytes() / r.machine.limit_seconds(traffic) / 1e9;
        r.pct_of_limit = median(s.pct);
        std::string row_note = r.note;
        if (r.pct_of_limit > 100.0)
            row_note += std::string(row_note.empty() ? "" : "; ") + "ABOVE ITS LIMIT: the limit is wrong";
        char update[32] = "";  // measured for in-place kernels only
        if (traffic.in_place) std::snprintf(update, sizeof update, "%.2f", r.machine.update_gbs);
        std::printf("%s,%s,%s,%d,%.0f,%.0f,%d,%.6f,%.2f,%.2f,%.2f,%.2f,%s,%.2f,%s,%.1f,%s\n", r.kernel.c_str(),
                    r.dtype.c_str(), r.shape.c_str(), r.threads, traffic.read, traffic.write, traffic.read_streams,
                    r.seconds * 1e3, r.gbs, r.machine.read_gbs, r.machine.write_gbs, r.machine.copy_gbs, update,
                    r.limit_gbs, r.machine.bound(traffic), r.pct_of_limit, row_note.c_str());
        results.push_back(r);
    }
    std::fflush(stdout);
    return results;
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

std::string openblas_name() {
#ifdef KBIT_BENCH_HAVE_OPENBLAS
    return std::string("OpenBLAS (core ") + openblas_get_corename() + ")";
#else
    return "OpenBLAS";
#endif
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
    Probes probes(cold_bytes());
    g_probes = &probes;
    std::printf("kernel,dtype,shape,threads,read_bytes,write_bytes,read_streams,ms,gbs,read_gbs,write_gbs,copy_gbs,"
                "update_gbs,limit_gbs,bound,pct_of_limit,note\n");
    for (auto& [name, fn] : suites())
        if (only.empty() || std::find(only.begin(), only.end(), name) != only.end()) fn(probes);
    return 0;
}
