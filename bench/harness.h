// harness.h — benchmark harness: each kernel is timed alternately with two memory-bandwidth probes
// (a read-only sweep and a STREAM triad with non-temporal stores) in the same process, and reported
// as a ratio to them, because absolute GB/s on a shared VM swing 1.5-2x between runs.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kbit_bench {

// Large buffers for the probes (each array well beyond the last-level cache).
class Probes {
public:
    explicit Probes(size_t bytes_per_array = size_t{256} << 20);
    ~Probes();
    Probes(const Probes&) = delete;
    Probes& operator=(const Probes&) = delete;
    double read_gbs();   // one timed pass reading one array, with the current OpenMP thread count
    double triad_gbs();  // a = b + s*c with streaming stores: 2 arrays read + 1 written per pass

private:
    float* a_;
    float* b_;
    float* c_;
    size_t n_;
};

struct Result {
    std::string kernel, dtype, shape;
    int threads = 1;
    double bytes = 0;       // bytes the kernel must move per call (reads + writes)
    double seconds = 0;     // median time per call
    double gbs = 0;         // bytes / seconds / 1e9 at the median
    double read_gbs = 0;    // median read-probe bandwidth over the rounds
    double triad_gbs = 0;   // median triad-probe bandwidth over the rounds
    double pct_read = 0;    // median over rounds of kernel / adjacent read probe, in percent
    double pct_triad = 0;   // likewise against the triad probe
    std::string note;       // e.g. "bitsandbytes"
};

struct Options {
    std::vector<int> threads{1, 2};
    std::string filter;      // run only cases whose "kernel dtype shape" contains this
    int rounds = 7;
    bool quick = false;      // smaller shapes and fewer rounds (smoke test in ctest)
    std::string bnb_library; // path to bitsandbytes' libbitsandbytes_cpu.so, "" if absent
};

const Options& options();

// Runs `run` (one kernel call moving `bytes` bytes) alternately with the probes for
// options().rounds rounds at `threads` OpenMP threads, after one warm-up call, and prints a CSV row.
Result measure(const std::string& kernel, const std::string& dtype, const std::string& shape, int threads,
               double bytes, const std::function<void()>& run, const std::string& note = "");

// Whether a case named this way passes --filter.
bool selected(const std::string& kernel, const std::string& dtype, const std::string& shape);

// A benchmark suite registers itself with KBIT_BENCH_SUITE(name) { ...body using measure()... }.
using SuiteFn = void (*)(Probes&);
bool register_suite(const char* name, SuiteFn fn);
#define KBIT_BENCH_SUITE(name)                                                          \
    static void kbit_bench_suite_##name(kbit_bench::Probes&);                           \
    static const bool kbit_bench_registered_##name =                                    \
        kbit_bench::register_suite(#name, kbit_bench_suite_##name);                     \
    static void kbit_bench_suite_##name(kbit_bench::Probes& probes [[maybe_unused]])

// Opens bitsandbytes' CPU library (options().bnb_library) once; nullptr if unavailable.
void* bnb_handle();

// Fills a buffer with deterministic normally distributed values (weights-like).
void fill_normal(float* x, size_t n, unsigned seed, float scale = 1.0f);

}  // namespace kbit_bench
