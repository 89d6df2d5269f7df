// harness.h — benchmark harness. Each kernel is timed alternately with a small roofline of the
// machine measured in the same process (absolute GB/s on a shared VM swing 1.5-2x between runs):
// read bandwidth with as many concurrent streams as the kernel reads, write bandwidth, copy (one
// read stream, one write stream) and, for kernels that write back what they read (optimizers),
// in-place update; each write the better of non-temporal and ordinary stores, all with the widest
// vectors the CPU has (probe_passes.h). A kernel's limit is the time its traffic needs at those
// rates, the largest of three lower bounds: its reads at the read rate, its writes at the write
// rate, and the part of it that is balanced (min(reads, writes) each way) at the copy rate, or the
// update rate when it is in place. A kernel above 100% of its limit means the limit is wrong; the
// row says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#ifdef KBIT_BENCH_HAVE_OPENBLAS
#include <cblas.h>  // the SGEMM rows beside the GEMMs, openblas_name()
#endif

namespace kbit_bench {

// The bytes one kernel call must move, and how many arrays it reads at once.
struct Traffic {
    double read = 0;
    double write = 0;
    int read_streams = 1;
    bool in_place = false;  // its writes go to lines it has just read (no read-for-ownership)
    double bytes() const { return read + write; }
};

// Bytes a buffer must span so that a pass over it cannot be served again by the last-level cache:
// twice the LLC the OS reports, at least 512 MB (8 MB with --quick). A KVM guest on an Intel Xeon
// reports a 480 MB L3, and there 128 MB probe arrays read back 40% faster on repeated passes.
size_t cold_bytes();

// Buffers for the probes: every pass touches cold_bytes() in all (its streams share that span).
class Probes {
public:
    static constexpr int kMaxStreams = 6;
    explicit Probes(size_t cold);
    ~Probes();
    Probes(const Probes&) = delete;
    Probes& operator=(const Probes&) = delete;
    double read_gbs(int streams);  // one pass reading `streams` slices of the source together (1..kMaxStreams)
    double write_gbs();            // the better of one pass of non-temporal and one of ordinary stores
    double copy_gbs();             // one array read, another written (the better of both kinds)
    double update_gbs();           // one array read and written back in place

private:
    float* src_;  // n_ floats, read by the read and copy probes
    float* dst_;  // n_ floats, written by the write, copy and update probes
    size_t n_;
};

// The machine's rates next to one timed call, and the call's limit from them.
struct Roofline {
    double read_gbs = 0, write_gbs = 0, copy_gbs = 0, update_gbs = 0;  // update: in-place kernels only
    double balanced_gbs(const Traffic& t) const;  // the rate of t's balanced part: update or copy
    double limit_seconds(const Traffic& t) const;
    const char* bound(const Traffic& t) const;  // "read", "write", "copy" or "update": the largest bound
};

struct Result {
    std::string kernel, dtype, shape;
    int threads = 1;
    Traffic traffic;
    double seconds = 0;      // median time per call
    double gbs = 0;          // traffic.bytes() / seconds / 1e9 at the median
    Roofline machine;        // median of each probe over the rounds
    double limit_gbs = 0;    // traffic.bytes() / limit at the median rates
    double pct_of_limit = 0; // median over rounds of limit time / call time, in percent
    std::string note;        // e.g. "bitsandbytes"
};

struct Options {
    std::vector<int> threads{1, 2};
    std::string filter;      // run only cases whose "kernel dtype shape" contains this
    int rounds = 7;
    bool quick = false;      // smaller shapes and fewer rounds (smoke test in ctest)
    std::string bnb_library; // path to bitsandbytes' libbitsandbytes_cpu.so, "" if absent
};

const Options& options();

// Runs `run` (one kernel call moving `traffic`) alternately with the probes for options().rounds
// rounds at `threads` OpenMP threads, after one warm-up call, and prints a CSV row.
Result measure(const std::string& kernel, const std::string& dtype, const std::string& shape, int threads,
               const Traffic& traffic, const std::function<void()>& run, const std::string& note = "");

// One timed call for measure_alternating(): what measure() takes.
struct Case {
    std::string kernel, dtype, shape;
    int threads = 1;
    Traffic traffic;
    std::function<void()> run;
    std::string note;
};

// Times the cases in turn within each round (a, b, c, a, b, c, ...), each call beside its own probes
// as measure() times it, so that the rows compared with each other share the same minutes of a
// shared machine; prints a row per case, in their order. measure() is this with one case.
std::vector<Result> measure_alternating(const std::vector<Case>& cases);

// The traffic of a kernel that reads n bytes and writes n * out_bytes (2 or 4) non-temporally, with
// none of its work (each byte zero-extended): beside a kernel with that traffic, the share of its
// limit that memory alone allows. n a multiple of 64, out aligned to 64 bytes.
void widen_pass(const uint8_t* in, void* out, long n, int out_bytes);

// 8-bit Adam's traffic with none of its work: g read, p and the byte states s1 and s2 read and written
// back in place (their block scales left out). n a multiple of 256; s1 and s2 aligned to 64 bytes and
// zero (moved as floats plus 0.0f, which would quieten a signalling-NaN pattern of state bytes).
void adam8_pass(float* p, const float* g, uint8_t* s1, uint8_t* s2, long n);

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

// "OpenBLAS (core NAME)": the kernel set OpenBLAS chose for this CPU, for the notes of its rows. A
// build that does not know the CPU falls back to an older core: Debian 12's 0.3.21 on an Emerald
// Rapids Xeon (family 6, model 207) picks Prescott's SSE3 kernels and runs SGEMM at a fifth of its
// AVX-512 speed, unless OPENBLAS_CORETYPE=SkylakeX says otherwise.
std::string openblas_name();

// Fills a buffer with deterministic normally distributed values (weights-like).
void fill_normal(float* x, size_t n, unsigned seed, float scale = 1.0f);

// `bytes` of host memory (rounded up to whole 64-byte lines) at a 64-byte boundary, like framework
// tensors (PyTorch's CPU allocator), so that kernels may stream; free() releases it. Exits when out of
// memory.
void* aligned_bytes(size_t bytes);

// n elements of T in aligned_bytes(), uninitialised, freed with the buffer.
template <class T>
struct Buffer {
    explicit Buffer(size_t count) : p(static_cast<T*>(aligned_bytes(count * sizeof(T)))), n(count) {}
    ~Buffer() { std::free(p); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    T* data() const { return p; }
    size_t size() const { return n; }
    T& operator[](size_t i) const { return p[i]; }
    T* const p;
    const size_t n;
};

}  // namespace kbit_bench
