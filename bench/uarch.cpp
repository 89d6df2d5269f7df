// kbit_uarch: what the instructions that bound kbit's CPU kernels cost on this machine, in cycles of
// its clock measured in the same process. The notes in bench/notes/ argue each unmet target from
// instruction counts (so many gathers, divisions, shuffles per 16 elements); this tool measures the
// price of each, so the argument can be checked on any machine, including guests without performance
// counters.
//
// The clock is a chain of dependent 64-bit `imul`s on x86-64 (3 cycles each on every x86 core kbit
// targets) and of dependent `add`s on AArch64 (1 cycle on every AArch64 core), timed before and after
// each probe. Each probe runs 8 (or 4) independent chains of one instruction so that it is bound by
// throughput, not latency, and prints the reciprocal throughput in cycles; the `fma_chain` row is one
// dependent chain instead, whose 4-cycle latency at the imul clock says that 512-bit work runs at the
// same clock (no frequency license). CSV on stdout; probes the CPU lacks are printed as skipped.
// AArch64 has the NEON instructions its kernels are built from (kernels_4bit_neon.cpp: TBL and the
// zips; FMLA; the optimizers' FDIV/FSQRT; SDOT of the int8 GEMM); no SVE probes yet (the 4-bit and
// optimizer kernels run NEON at the SVE levels too).
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A probe: runs `reps` iterations of `per_iter` instructions; returns seconds.
using Probe = double (*)(long reps);
constexpr int kPerIter = 8;

#if defined(__x86_64__)

// GHz from n x 10 dependent imuls.
double clock_ghz(long n) {
    long x = 3;
    const double t0 = seconds();
    for (long i = 0; i < n; ++i)
        asm volatile(
            "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\t"
            "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0"
            : "+r"(x));
    return n * 30.0 / (seconds() - t0) / 1e9;
}

#define KBIT_UARCH_8(insn) insn insn insn insn insn insn insn insn

// Each probe is compiled for exactly what its row requires (has() below): a VBMI flag on an AVX-512
// probe would let the compiler use VBMI where the row only checks AVX-512 F/BW/VL.
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), noinline))
#define AVX512VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"), noinline))
#define AVX2 __attribute__((target("avx2,fma"), noinline))

// Eight independent registers through one two-operand-plus-destination instruction.
#define KBIT_UARCH_CHAINS(name, attr, type, init, text)                                                     \
    attr double name(long reps) {                                                                           \
        type a0 = init(1.5f), a1 = init(2.5f), a2 = init(3.5f), a3 = init(4.5f), a4 = init(5.5f),           \
             a5 = init(6.5f), a6 = init(7.5f), a7 = init(8.5f), b = init(1.0000001f), c = init(1e-7f);     \
        const double t0 = seconds();                                                                        \
        for (long i = 0; i < reps; ++i)                                                                     \
            asm volatile(text "%0\n\t" text "%1\n\t" text "%2\n\t" text "%3\n\t" text "%4\n\t" text         \
                              "%5\n\t" text "%6\n\t" text "%7"                                              \
                         : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7)   \
                         : "v"(b), "v"(c));                                                                 \
        return seconds() - t0;                                                                              \
    }

AVX512 __m512 z(float x) { return _mm512_set1_ps(x); }
AVX2 __m256 y(float x) { return _mm256_set1_ps(x); }

// The throughput probes, one line each: function, row label, ISA (Avx2, Avx512 or Avx512Vbmi), lanes
// per instruction (32-bit lanes; bytes for the byte shuffles) and the instruction's text before its
// destination. Operands: %8 = b, %9 = c, the destination last (AT&T order). KBIT_UARCH_BOTH_WIDTHS
// makes the two rows of one instruction text, zmm (AVX-512) then ymm (AVX2, half the lanes).
#define KBIT_UARCH_BOTH_WIDTHS(X, op, name, zmm_lanes, text) \
    X(op##_zmm, name " zmm", Avx512, zmm_lanes, text) X(op##_ymm, name " ymm", Avx2, (zmm_lanes) / 2, text)
#define KBIT_UARCH_THROUGHPUT_PROBES(X)                                                     \
    KBIT_UARCH_BOTH_WIDTHS(X, fma, "vfmadd213ps", 16, "vfmadd213ps %9, %8, ")               \
    KBIT_UARCH_BOTH_WIDTHS(X, div, "vdivps", 16, "vdivps %8, %8, ") /* b / b: the common case */ \
    KBIT_UARCH_BOTH_WIDTHS(X, sqrt, "vsqrtps", 16, "vsqrtps %8, ")                          \
    X(permps_zmm, "vpermps zmm", Avx512, 16, "vpermps %8, %9, ")                            \
    X(permi2ps_zmm, "vpermi2ps zmm", Avx512, 16, "vpermi2ps %8, %9, ")                      \
    X(pshufb_zmm, "vpshufb zmm", Avx512, 64, "vpshufb %8, %9, ")                            \
    X(psrld_zmm, "vpsrld zmm", Avx512, 16, "vpsrld $4, %8, ")                               \
    /* the 256-bit shuffles the AVX2 kernels are bound by (some issue on two ports) */      \
    X(pshufb_ymm, "vpshufb ymm", Avx2, 32, "vpshufb %8, %9, ")                              \
    X(punpcklbw_ymm, "vpunpcklbw ymm", Avx2, 32, "vpunpcklbw %8, %9, ")                     \
    X(permps_ymm, "vpermps ymm", Avx2, 8, "vpermps %8, %9, ")                               \
    X(blendvps_ymm, "vblendvps ymm", Avx2, 8, "vblendvps %9, %8, %0, ")                     \
    X(permb_zmm, "vpermb zmm", Avx512Vbmi, 64, "vpermb %8, %9, ")                           \
    X(permi2b_zmm, "vpermi2b zmm", Avx512Vbmi, 64, "vpermi2b %8, %9, ")

// Per ISA: the function attribute, the vector type and its broadcast.
#define KBIT_UARCH_ATTR_Avx2 AVX2
#define KBIT_UARCH_ATTR_Avx512 AVX512
#define KBIT_UARCH_ATTR_Avx512Vbmi AVX512VBMI
#define KBIT_UARCH_TYPE_Avx2 __m256
#define KBIT_UARCH_TYPE_Avx512 __m512
#define KBIT_UARCH_TYPE_Avx512Vbmi __m512
#define KBIT_UARCH_INIT_Avx2 y
#define KBIT_UARCH_INIT_Avx512 z
#define KBIT_UARCH_INIT_Avx512Vbmi z
#define KBIT_UARCH_DEFINE(fn, label, isa, lanes, text) \
    KBIT_UARCH_CHAINS(fn, KBIT_UARCH_ATTR_##isa, KBIT_UARCH_TYPE_##isa, KBIT_UARCH_INIT_##isa, text)
KBIT_UARCH_THROUGHPUT_PROBES(KBIT_UARCH_DEFINE)

// One dependent chain: cycles per instruction = its latency at the clock it runs at.
AVX512 double fma_chain_zmm(long reps) {
    __m512 a = z(1.0f), b = z(0.999f), c = z(1e-3f);
    const double t0 = seconds();
    for (long i = 0; i < reps; ++i) asm volatile(KBIT_UARCH_8("vfmadd213ps %2, %1, %0\n\t") : "+v"(a) : "v"(b), "v"(c));
    return seconds() - t0;
}

// Gathers as the kernels issue them (a vector of 32-bit indices, a 4-byte look-up per lane): four
// independent gathers per iteration, each added into its own accumulator, the indices read in turn
// from a 64 KB array of random ones. Two tables: 256 entries (1 KB, an 8-bit map, in L1) and 65536
// (256 KB, the 8-bit search's bucket table, kbit_code8_lut.h; random indices: mostly L2).
struct GatherInput {
    std::vector<float> table;
    std::vector<uint32_t> index;
};
constexpr long kIndexCount = 1 << 14;  // a multiple of 4 x 16
GatherInput gather_input(size_t table_entries) {
    GatherInput in{std::vector<float>(table_entries), std::vector<uint32_t>(kIndexCount)};
    std::mt19937 rng(7);
    for (size_t i = 0; i < table_entries; ++i) in.table[i] = static_cast<float>(i % 251) * 0.25f;
    for (auto& i : in.index) i = static_cast<uint32_t>(rng() % table_entries);
    return in;
}
const GatherInput& small_table() {
    static const GatherInput in = gather_input(256);
    return in;
}
const GatherInput& bucket_table() {
    static const GatherInput in = gather_input(1 << 16);
    return in;
}

// Four independent gathers of `lanes` indices per iteration; V is the vector type, `gather(v, k)`
// the k-th look-up from index block v.
#define KBIT_UARCH_GATHER(name, attr, V, lanes, zero, add, gather)                                          \
    template <const GatherInput& (*In)()>                                                                 \
    attr double name(long reps) {                                                                         \
        const float* t = In().table.data();                                                               \
        const uint32_t* idx = In().index.data();                                                          \
        V s0 = zero, s1 = zero, s2 = zero, s3 = zero;                                                     \
        long j = 0;                                                                                       \
        const double t0 = seconds();                                                                      \
        for (long r = 0; r < reps; ++r) {                                                                 \
            s0 = add(s0, gather(t, idx + j));                                                             \
            s1 = add(s1, gather(t, idx + j + (lanes)));                                                   \
            s2 = add(s2, gather(t, idx + j + 2 * (lanes)));                                               \
            s3 = add(s3, gather(t, idx + j + 3 * (lanes)));                                               \
            j = (j + 4 * (lanes)) & (kIndexCount - 1);                                                    \
        }                                                                                                 \
        const double elapsed = seconds() - t0;                                                            \
        const V total = add(add(s0, s1), add(s2, s3));                                                    \
        float sum[lanes];                                                                                 \
        std::memcpy(sum, &total, sizeof sum);                                                             \
        volatile float sink = sum[0];                                                                     \
        (void)sink;                                                                                       \
        return elapsed;                                                                                   \
    }

// The masked form with an explicit source: GCC 12 warns on the unmasked intrinsic's undefined one.
#define KBIT_UARCH_GATHER_ZMM(t, at) \
    _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF, _mm512_loadu_si512(at), t, 4)
#define KBIT_UARCH_GATHER_YMM(t, at) \
    _mm256_i32gather_ps(t, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)), 4)
KBIT_UARCH_GATHER(gather_zmm, AVX512, __m512, 16, _mm512_setzero_ps(), _mm512_add_ps, KBIT_UARCH_GATHER_ZMM)
KBIT_UARCH_GATHER(gather_ymm, AVX2, __m256, 8, _mm256_setzero_ps(), _mm256_add_ps, KBIT_UARCH_GATHER_YMM)

enum class Isa { Avx2, Avx512, Avx512Vbmi };

bool has(Isa isa) {
    switch (isa) {
        case Isa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case Isa::Avx512:
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl");
        case Isa::Avx512Vbmi: return has(Isa::Avx512) && __builtin_cpu_supports("avx512vbmi");
    }
    return false;
}

struct Row {
    const char* name;  // the instruction and its width
    const char* note;
    Isa isa;
    int per_iter;  // instructions per iteration of the probe
    int lanes;     // 32-bit lanes (bytes for the byte permutes) per instruction
    Probe run;
};

#define KBIT_UARCH_ROW(fn, label, isa, lanes, text) {label, "", Isa::isa, kPerIter, lanes, fn},
const Row kRows[] = {
    {"fma_chain zmm", "one dependent chain: latency (4 where 512-bit work runs at the imul clock)", Isa::Avx512,
     kPerIter, 16, fma_chain_zmm},
    KBIT_UARCH_THROUGHPUT_PROBES(KBIT_UARCH_ROW)
    {"vgatherdps zmm", "1 KB table (L1)", Isa::Avx512, 4, 16, gather_zmm<small_table>},
    {"vgatherdps ymm", "1 KB table (L1)", Isa::Avx2, 4, 8, gather_ymm<small_table>},
    {"vgatherdps zmm", "256 KB table; random indices", Isa::Avx512, 4, 16, gather_zmm<bucket_table>},
};

#elif defined(__aarch64__)

// GHz from n x 10 dependent adds.
double clock_ghz(long n) {
    long x = 3;
    const double t0 = seconds();
    for (long i = 0; i < n; ++i)
        asm volatile(
            "add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\t"
            "add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1"
            : "+r"(x));
    return n * 10.0 / (seconds() - t0) / 1e9;
}

enum class Isa { Neon, Dotprod };

bool has(Isa isa) {
    // HWCAP_ASIMD (bit 1) and HWCAP_ASIMDDP (bit 20) of <asm/hwcap.h>, as src/cpu/cpu_isa.cpp reads them.
    const unsigned long hw = getauxval(AT_HWCAP);
    return isa == Isa::Neon ? (hw & (1ul << 1)) != 0 : (hw & (1ul << 20)) != 0;
}

// Eight independent 128-bit registers through one instruction: `text` names its destination %[d] and
// its sources %[b] and %[c]. The attribute lets the assembler take SDOT where the row needs it.
#define KBIT_UARCH_A64_CHAINS(name, attr, text)                                                            \
    __attribute__((noinline attr)) double name(long reps) {                                               \
        float32x4_t a0 = vdupq_n_f32(1.5f), a1 = vdupq_n_f32(2.5f), a2 = vdupq_n_f32(3.5f),                 \
                    a3 = vdupq_n_f32(4.5f), a4 = vdupq_n_f32(5.5f), a5 = vdupq_n_f32(6.5f),                 \
                    a6 = vdupq_n_f32(7.5f), a7 = vdupq_n_f32(8.5f), b = vdupq_n_f32(1.0000001f),            \
                    c = vdupq_n_f32(1e-7f);                                                                 \
        const double t0 = seconds();                                                                        \
        for (long i = 0; i < reps; ++i) {                                                                   \
            asm volatile(text : [d] "+w"(a0) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a1) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a2) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a3) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a4) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a5) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a6) : [b] "w"(b), [c] "w"(c));                                     \
            asm volatile(text : [d] "+w"(a7) : [b] "w"(b), [c] "w"(c));                                     \
        }                                                                                                   \
        return seconds() - t0;                                                                              \
    }

// function, row label, ISA, lanes per instruction (32-bit lanes; bytes for the byte instructions), text
#define KBIT_UARCH_A64_PROBES(X)                                                                 \
    X(fmla_v, "fmla v.4s", Neon, 4, "fmla %[d].4s, %[b].4s, %[c].4s")                            \
    X(fdiv_v, "fdiv v.4s", Neon, 4, "fdiv %[d].4s, %[b].4s, %[b].4s") /* b / b: the common case */ \
    X(fsqrt_v, "fsqrt v.4s", Neon, 4, "fsqrt %[d].4s, %[b].4s")                                  \
    X(tbl_v, "tbl v.16b (one table register)", Neon, 16, "tbl %[d].16b, {%[b].16b}, %[c].16b")   \
    X(zip1_v, "zip1 v.16b", Neon, 16, "zip1 %[d].16b, %[b].16b, %[c].16b")                       \
    X(uzp1_v, "uzp1 v.4s", Neon, 4, "uzp1 %[d].4s, %[b].4s, %[c].4s")                            \
    X(sdot_v, "sdot v.4s", Dotprod, 16, "sdot %[d].4s, %[b].16b, %[c].16b")

#define KBIT_UARCH_A64_ATTR_Neon
#define KBIT_UARCH_A64_ATTR_Dotprod , target("arch=armv8.2-a+dotprod")
#define KBIT_UARCH_A64_DEFINE(fn, label, isa, lanes, text) KBIT_UARCH_A64_CHAINS(fn, KBIT_UARCH_A64_ATTR_##isa, text)
KBIT_UARCH_A64_PROBES(KBIT_UARCH_A64_DEFINE)

struct Row {
    const char* name;
    const char* note;
    Isa isa;
    int per_iter;
    int lanes;
    Probe run;
};

#define KBIT_UARCH_A64_ROW(fn, label, isa, lanes, text) {label, "", Isa::isa, kPerIter, lanes, fn},
const Row kRows[] = {KBIT_UARCH_A64_PROBES(KBIT_UARCH_A64_ROW)};

#endif  // x86-64, AArch64
}  // namespace

int main(int argc, char** argv) {
    double seconds_per_probe = 0.02;
    int rounds = 5;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            seconds_per_probe = 0.002;
            rounds = 1;
        } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = std::max(1, std::atoi(argv[++i]));
        } else {
            std::fprintf(stderr,
                         "usage: kbit_uarch [--quick] [--rounds N]\n"
                         "Reciprocal throughput, in cycles of the clock measured in the same process, of the\n"
                         "instructions kbit's CPU kernels are bound by (CSV on stdout; best of N rounds, 5).\n");
            return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    std::printf("instruction,note,cycles_per_instruction,cycles_per_lane,ns_per_instruction,clock_ghz\n");
#if !defined(__x86_64__) && !defined(__aarch64__)
    (void)seconds_per_probe, (void)rounds;
    std::printf("all,skipped: probes exist for x86-64 and AArch64 only,,,,\n");
    return 0;
#else
    for (const Row& row : kRows) {
        if (!has(row.isa)) {
            std::printf("%s,skipped: the CPU lacks it,,,,\n", row.name);
            continue;
        }
        row.run(1000);  // warm up (tables, caches)
        long reps = 1000;
        while (row.run(reps) < seconds_per_probe / 4) reps *= 2;
        reps = static_cast<long>(reps * 4);
        double best_ns = 1e30, ghz_at_best = 0;
        for (int r = 0; r < rounds; ++r) {
            const double before = clock_ghz(200000);
            const double ns = row.run(reps) * 1e9 / (static_cast<double>(reps) * row.per_iter);
            const double after = clock_ghz(200000);
            if (ns < best_ns) best_ns = ns, ghz_at_best = (before + after) / 2;
        }
        const double cycles = best_ns * ghz_at_best;
        std::printf("%s,%s,%.2f,%.3f,%.3f,%.2f\n", row.name, row.note, cycles, cycles / row.lanes, best_ns,
                    ghz_at_best);
    }
    return 0;
#endif
}
