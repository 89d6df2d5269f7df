// Benchmarks of the 4-bit interface: quantize, dequantize (NF4/FP4 x fp32/fp16/bf16), the 4-bit GEMV,
// cgemm_4bit at a small M and at prefill size (beside dequantize + OpenBLAS SGEMM and dequantize +
// oneDNN's bf16 matmul), beside
// bitsandbytes' CPU library where it has the same kernel.
// Weights of the GEMV rotate over enough copies to exceed the last-level cache.
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "kbit/kbit_4bit.h"
#ifdef KBIT_BENCH_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif
#include "kbit/kbit_bnb_cpu.h"
#include "kbit_half.h"

namespace kbit_bench {
namespace {

struct Shape {
    std::string name;
    int64_t rows, cols;  // rows x cols elements (GEMV: out features x in features)
    int64_t n() const { return rows * cols; }
};

std::vector<Shape> tensor_shapes() {
    if (options().quick) return {{"1024x1024", 1024, 1024}};
    return {{"4096x4096", 4096, 4096}, {"4096x14336", 4096, 14336}, {"64M", 1, int64_t{64} << 20}};
}

template <class T>
void fill(T* x, size_t n, unsigned seed) {
    std::vector<float> f(n);
    kbit_bench::fill_normal(f.data(), n, seed, 0.02f);
    for (size_t i = 0; i < n; ++i) x[i] = kbit::Elem<T>::store(f[i]);
}

void check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) {
        std::fprintf(stderr, "bench_4bit: %s failed with status %d\n", what, s);
        std::exit(1);
    }
}

constexpr int32_t kQuants[] = {KBIT_QUANT_NF4, KBIT_QUANT_FP4};
const char* qname(int32_t q) { return q == KBIT_QUANT_NF4 ? "nf4" : "fp4"; }

template <class T>
void blockwise_cases(const Shape& s, int64_t bs) {
    const int64_t n = s.n();
    const int32_t dtype = kbit::Elem<T>::dtype;
    const char* dt = kbit::Elem<T>::name;
    Buffer<T> x(n), y(n);
    Buffer<float> absmax((n + bs - 1) / bs);
    Buffer<uint8_t> packed((n + 1) / 2);
    fill(x.p, n, 1);
    const double elems = double(n) * sizeof(T), codes = n / 2.0 + 4.0 * ((n + bs - 1) / bs);
    const kbit_bench::Traffic quantized{elems, codes, 1}, dequantized{codes, elems, 2};
    for (int32_t q : kQuants) {
        const std::string qk = std::string("quantize_") + qname(q);
        const std::string dk = std::string("dequantize_") + qname(q);
        check(kbit_quantize_4bit(q, dtype, x.p, absmax.p, packed.p, bs, n, nullptr), "quantize");
        for (int t : options().threads) {
            if (selected(qk, dt, s.name))
                measure(qk, dt, s.name, t, quantized,
                        [&] { kbit_quantize_4bit(q, dtype, x.p, absmax.p, packed.p, bs, n, nullptr); });
            if (selected(dk, dt, s.name))
                measure(dk, dt, s.name, t, dequantized,
                        [&] { kbit_dequantize_4bit(q, dtype, packed.p, absmax.p, y.p, bs, n, nullptr); });
        }
        // bitsandbytes: cdequantize_blockwise_cpu_<q>_<dt>(A, absmax, out, blocksize, m, n)
        using BnbDequant = void (*)(unsigned char*, const float*, T*, long long, long long, long long);
        void* h = kbit_bench::bnb_handle();
        const std::string sym = std::string("cdequantize_blockwise_cpu_") + qname(q) + "_" + dt;
        auto bnb = h ? reinterpret_cast<BnbDequant>(dlsym(h, sym.c_str())) : nullptr;
        if (bnb != nullptr && selected(dk, dt, s.name))
            for (int t : options().threads)
                measure(dk, dt, s.name, t, dequantized, [&] { bnb(packed.p, absmax.p, y.p, bs, s.rows, s.cols); },
                        "bitsandbytes");
    }
}

// Weights quantized once, copied so that one pass over all copies spans kbit_bench::cold_bytes() (16x a
// 32 MB last-level cache: with only 2-4x, AMD's L3 still held part of a copy when it came round again,
// up to +60% cold GB/s).
struct Weights {
    int64_t rows, cols, bs, copies;
    std::vector<uint8_t*> packed;
    std::vector<float*> absmax;
    Weights(int64_t r, int64_t c, int64_t b) : rows(r), cols(c), bs(b) {
        const int64_t n = r * c;
        const double bytes = n / 2.0 + 4.0 * n / b;
        copies = std::max<int64_t>(2, static_cast<int64_t>(static_cast<double>(kbit_bench::cold_bytes()) / bytes) + 1);
        Buffer<float> w(n);
        kbit_bench::fill_normal(w.p, n, 7, 0.02f);
        for (int64_t i = 0; i < copies; ++i) {
            packed.push_back(static_cast<uint8_t*>(aligned_bytes(n / 2)));
            absmax.push_back(static_cast<float*>(aligned_bytes((n / b) * 4)));
            check(kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, w.p, absmax[i], packed[i], b, n, nullptr),
                  "quantize weights");
        }
    }
    ~Weights() {
        for (auto* p : packed) std::free(p);
        for (auto* p : absmax) std::free(p);
    }
};

// The GEMV's memory traffic with none of its work: the rows split into one contiguous range per
// thread, as the kernel splits them; four rows per tile, each tile's 64-byte groups loaded row by row
// with the next tile's rows prefetched and each group's block scales read, as the AVX-512 kernel
// reads them; the bytes only folded into an XOR. Beside the GEMV, the share of its limit that its
// reads alone reach in this pattern.
uint64_t gemv_reads(const uint8_t* packed, const float* absmax, int64_t rows, int64_t cols, int64_t bs) {
    const int64_t row_bytes = cols / 2, groups = row_bytes / 64, scales_per_group = std::max<int64_t>(1, 128 / bs);
    uint64_t folded = 0;
#pragma omp parallel reduction(^ : folded)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        // 32 bytes per step in GCC's generic vectors: vpxor on ymm with -mavx2, two NEON eors on AArch64.
        typedef uint64_t Bytes32 __attribute__((vector_size(32), aligned(1), may_alias));
        Bytes32 acc = {0, 0, 0, 0};
        float scale_sum = 0.0f;
        for (int64_t r = r0; r + 4 <= r1; r += 4)
            for (int64_t g = 0; g < groups; ++g)
                for (int64_t j = 0; j < 4; ++j) {
                    const uint8_t* line = packed + (r + j) * row_bytes + 64 * g;
                    __builtin_prefetch(line + 4 * row_bytes);
                    acc ^= *reinterpret_cast<const Bytes32*>(line);
                    acc ^= *reinterpret_cast<const Bytes32*>(line + 32);
                    const float* scale = absmax + ((r + j) * cols + 128 * g) / bs;
                    for (int64_t b = 0; b < scales_per_group; ++b) scale_sum += scale[b];
                }
        folded ^= acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ static_cast<uint64_t>(scale_sum);
    }
    return folded;
}

template <class T>
void gemv_cases(Weights& w, const std::string& shape) {
    const char* dt = kbit::Elem<T>::name;
    const int m = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
    Buffer<T> a(k), out(m);
    fill(a.p, k, 3);
    // Weights and scales stream from memory (2 arrays); the activations stay in cache.
    const kbit_bench::Traffic traffic{w.rows * w.cols / 2.0 + 4.0 * w.rows * w.cols / w.bs + sizeof(T) * double(k),
                                      sizeof(T) * double(m), 2};
    int64_t next = 0;
    for (int t : options().threads) {
        if (!selected("gemv_nf4", dt, shape)) continue;
        measure("gemv_nf4", dt, shape, t, traffic, [&] {
            const int64_t c = next++ % w.copies;
            kbit_status s;
            if constexpr (std::is_same_v<T, float>)
                s = cgemm_4bit_inference_naive_fp32(m, 1, k, a.p, w.packed[c], w.absmax[c],
                                                    const_cast<float*>(kbit::kNf4Values), out.p, m, k / 2, m,
                                                    static_cast<int>(w.bs), nullptr);
            else if constexpr (std::is_same_v<T, kbit_half>)
                s = cgemm_4bit_inference_naive_fp16(m, 1, k, a.p, w.packed[c], w.absmax[c],
                                                    const_cast<float*>(kbit::kNf4Values), out.p, m, k / 2, m,
                                                    static_cast<int>(w.bs), nullptr);
            else
                s = cgemm_4bit_inference_naive_bf16(m, 1, k, a.p, w.packed[c], w.absmax[c],
                                                    const_cast<float*>(kbit::kNf4Values), out.p, m, k / 2, m,
                                                    static_cast<int>(w.bs), nullptr);
            check(s, "gemv");
        });
        if (std::is_same_v<T, float> && m % 4 == 0 && k % 128 == 0)
            measure("gemv_nf4", dt, shape, t, traffic, [&] {
                const int64_t c = next++ % w.copies;
                if (gemv_reads(w.packed[c], w.absmax[c], m, k, w.bs) == 42) std::puts("");  // keeps the reads
            }, "no work (the GEMV's reads)");
    }
}

// cgemm_4bit_<T> on copy c of the weights, NF4, no bias, plain absmax.
template <class T>
kbit_status cgemm_4bit(const T* a, const Weights& w, int64_t c, T* out, int M, int N, int K) {
    const int bs = static_cast<int>(w.bs);
    if constexpr (std::is_same_v<T, float>)
        return cgemm_4bit_fp32(a, w.packed[c], w.absmax[c], nullptr, nullptr, nullptr, out, nullptr, M, N, K, bs,
                               KBIT_QUANT_NF4, nullptr);
    else if constexpr (std::is_same_v<T, kbit_half>)
        return cgemm_4bit_fp16(a, w.packed[c], w.absmax[c], nullptr, nullptr, nullptr, out, nullptr, M, N, K, bs,
                               KBIT_QUANT_NF4, nullptr);
    else
        return cgemm_4bit_bf16(a, w.packed[c], w.absmax[c], nullptr, nullptr, nullptr, out, nullptr, M, N, K, bs,
                               KBIT_QUANT_NF4, nullptr);
}

template <class T>
void gemm_cases(Weights& w, const std::string& shape, int M) {
    const char* dt = kbit::Elem<T>::name;
    const int N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
    Buffer<T> a(static_cast<size_t>(M) * K), out(static_cast<size_t>(M) * N);
    fill(a.p, static_cast<size_t>(M) * K, 4);
    const kbit_bench::Traffic traffic{double(N) * K / 2.0 + 4.0 * double(N) * K / w.bs + sizeof(T) * double(M) * K,
                                      sizeof(T) * double(M) * N, 2};
    const std::string kernel = "gemm_nf4_M" + std::to_string(M);
    int64_t next = 0;
    for (int t : options().threads) {
        if (!selected(kernel, dt, shape)) continue;
        measure(kernel, dt, shape, t, traffic, [&] {
            const int64_t c = next++ % w.copies;
            check(cgemm_4bit(a.p, w, c, out.p, M, N, K), "gemm");
        });
    }
}

// kbit_gemm_4bit_precision's int8 class (behaviour.md §3.6) beside the exact rows above (gemv_nf4 for M = 1,
// gemm_nf4_M<M>): the same weights and traffic, kernel "gemm_nf4_M<M>_int8".
template <class T>
void int8_class_cases(Weights& w, const std::string& shape, int M) {
    const char* dt = kbit::Elem<T>::name;
    const int64_t N = w.rows, K = w.cols;
    Buffer<T> a(static_cast<size_t>(M * K)), out(static_cast<size_t>(M * N));
    fill(a.p, static_cast<size_t>(M * K), 4);
    const kbit_bench::Traffic traffic{double(N) * K / 2.0 + 4.0 * double(N) * K / w.bs + sizeof(T) * double(M) * K,
                                      sizeof(T) * double(M) * N, 2};
    const std::string kernel = "gemm_nf4_M" + std::to_string(M) + "_int8";
    const int32_t dtype = std::is_same_v<T, float> ? KBIT_DTYPE_FP32
                          : std::is_same_v<T, kbit_half> ? KBIT_DTYPE_FP16 : KBIT_DTYPE_BF16;
    int64_t next = 0;
    for (int t : options().threads) {
        if (!selected(kernel, dt, shape)) continue;
        measure(kernel, dt, shape, t, traffic, [&] {
            const int64_t c = next++ % w.copies;
            check(kbit_gemm_4bit_precision(KBIT_PRECISION_INT8, dtype, a.p, w.packed[c], w.absmax[c], nullptr, nullptr,
                                           nullptr, out.p, nullptr, M, N, K, w.bs, KBIT_QUANT_NF4, nullptr),
                  "int8 class");
        });
    }
}

// The GEMV on bitsandbytes' CPU layout, kbit's (bnb_cpu interface) beside bitsandbytes' own
// (AVX512-BF16 builds), the layout built from the same weights: per 32
// output rows, for each pair of columns, 32 bytes whose low nibbles are rows 0..15 and high nibbles
// rows 16..31 (byte i: row i / 2, column 2p + i % 2); the scales as bf16, transposed to [K / bs][N].
void bnb_gemv_cases(Weights& w, const std::string& shape) {
    using BnbGemv = void (*)(int64_t, int64_t, int64_t, const kbit_bf16*, const uint8_t*, const kbit_bf16*,
                             kbit_bf16*, int64_t, int64_t, int64_t);
    void* h = kbit_bench::bnb_handle();
    auto gemv = h ? reinterpret_cast<BnbGemv>(dlsym(h, "gemv_4bit_inference_cpu_nf4_bf16")) : nullptr;
    auto has_bf16 = h ? reinterpret_cast<bool (*)()>(dlsym(h, "has_avx512bf16_cpu")) : nullptr;
    const int64_t N = w.rows, K = w.cols, kb = K / w.bs;
    if (!selected("gemv_nf4_bnb_layout", "bf16", shape) || N % 32 != 0) return;
    if (gemv != nullptr && (has_bf16 == nullptr || !has_bf16())) {
        std::fprintf(stderr, "note: bitsandbytes gemv_4bit_inference_cpu_nf4_bf16 skipped: this CPU has no "
                             "AVX512-BF16 (has_avx512bf16_cpu() is false)\n");
        gemv = nullptr;
    }
    std::vector<uint8_t*> packed;
    std::vector<kbit_bf16*> scales;
    auto nibble = [&](const uint8_t* src, int64_t r, int64_t c) {
        const uint8_t byte = src[(r * K + c) / 2];
        return c % 2 == 0 ? byte >> 4 : byte & 0x0F;
    };
    for (int64_t i = 0; i < w.copies; ++i) {
        auto* dst = static_cast<uint8_t*>(aligned_bytes(N * K / 2));
        auto* sc = static_cast<kbit_bf16*>(aligned_bytes(N * kb * 2));
        for (int64_t nb = 0; nb < N / 32; ++nb)
            for (int64_t p = 0; p < K / 2; ++p)
                for (int64_t b = 0; b < 32; ++b) {
                    const int64_t r = nb * 32 + b / 2, c = 2 * p + b % 2;
                    dst[(nb * (K / 2) + p) * 32 + b] =
                        static_cast<uint8_t>(nibble(w.packed[i], r + 16, c) << 4 | nibble(w.packed[i], r, c));
                }
        for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < kb; ++j) sc[j * N + n] = kbit::Elem<kbit_bf16>::store(w.absmax[i][n * kb + j]);
        packed.push_back(dst);
        scales.push_back(sc);
    }
    Buffer<kbit_bf16> a(K), out(N), ours(N);
    fill(a.p, K, 3);
    // The layout is this file's reading of bitsandbytes' packer: prove it on one call before timing
    // (kbit's function of the same name on the same bytes against kbit's GEMV on its own layout).
    check(gemv_4bit_inference_cpu_nf4_bf16(1, N, K, a.p, packed[0], scales[0], out.p, w.bs, K, N), "bnb-layout gemv");
    check(cgemm_4bit_inference_naive_bf16(static_cast<int>(N), 1, static_cast<int>(K), a.p, w.packed[0], w.absmax[0],
                                          const_cast<float*>(kbit::kNf4Values), ours.p, static_cast<int>(N),
                                          static_cast<int>(K / 2), static_cast<int>(N), static_cast<int>(w.bs), nullptr),
          "gemv");
    double worst = 0, largest = 0;
    for (int64_t n = 0; n < N; ++n) {
        const double x = kbit::Elem<kbit_bf16>::load(out.p[n]), y = kbit::Elem<kbit_bf16>::load(ours.p[n]);
        worst = std::max(worst, std::fabs(x - y));
        largest = std::max(largest, std::fabs(y));
    }
    const bool layout_ok = worst <= largest / 64;  // bf16 scales and output: a few bf16 ulps
    if (!layout_ok)
        std::fprintf(stderr, "note: gemv_4bit_inference_cpu_nf4_bf16 not measured on %s: its result differs from "
                             "kbit's GEMV by %g (largest %g), so the repacked layout is wrong\n",
                     shape.c_str(), worst, largest);
    const kbit_bench::Traffic traffic{N * K / 2.0 + 2.0 * N * kb + 2.0 * K, 2.0 * N, 2};
    int64_t next = 0;
    for (int t : options().threads) {
        if (!layout_ok) break;
        measure("gemv_nf4_bnb_layout", "bf16", shape, t, traffic, [&] {
            const int64_t c = next++ % w.copies;
            check(gemv_4bit_inference_cpu_nf4_bf16(1, N, K, a.p, packed[c], scales[c], out.p, w.bs, K, N), "gemv");
        });
        if (gemv != nullptr)
            measure("gemv_nf4_bnb_layout", "bf16", shape, t, traffic, [&] {
                const int64_t c = next++ % w.copies;
                gemv(1, N, K, a.p, packed[c], scales[c], out.p, w.bs, K, N);
            }, "bitsandbytes");
    }
    for (auto* p : packed) std::free(p);
    for (auto* p : scales) std::free(p);
}

#ifdef KBIT_BENCH_HAVE_DNNL
// oneDNN's bf16 matmul, out[M][N] = a[M][K] * w[N][K]^T with bf16 operands and outputs of T (fp32
// or bf16), the primitive created once; oneDNN picks its kernel for the CPU (AMX-BF16 or
// AVX512-BF16 where present), which `impl` names.
template <class T>
struct DnnlBf16Matmul {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    dnnl::matmul matmul;
    dnnl::memory a, w, out;
    std::string impl;
    DnnlBf16Matmul(int M, int N, int K, kbit_bf16* a_p, kbit_bf16* w_p, T* out_p) {
        using dt = dnnl::memory::data_type;
        using tag = dnnl::memory::format_tag;
        const dnnl::memory::desc ad({M, K}, dt::bf16, tag::ab), wd({K, N}, dt::bf16, tag::ba),
            od({M, N}, std::is_same_v<T, float> ? dt::f32 : dt::bf16, tag::ab);
#if DNNL_VERSION_MAJOR >= 3
        const dnnl::matmul::primitive_desc pd(engine, ad, wd, od);
#else
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, wd, od), engine);
#endif
        impl = pd.impl_info_str();
        matmul = dnnl::matmul(pd);
        a = dnnl::memory(ad, engine, a_p);
        w = dnnl::memory(wd, engine, w_p);
        out = dnnl::memory(od, engine, out_p);
    }
    void run() {
        matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, out}});
        stream.wait();
    }
};
#endif

#ifdef KBIT_BENCH_HAVE_OPENBLAS
// Prefill, M = 512 tokens: cgemm_4bit_<T> beside what an engine would do without it, the weights
// dequantized and multiplied by the best dense GEMM at hand, in the same run: for fp32 activations
// OpenBLAS SGEMM, and oneDNN's bf16 matmul on activations rounded to bf16 inside the call; for bf16
// activations oneDNN's bf16 matmul. Shapes tokens x in x out; every row takes the same traffic (the
// packed weights, activations and outputs once), and a gops line gives each one's GFLOP/s
// (2 * M * in * out per call) and its speed over the fastest dense row of its dtype.
template <class T>
void prefill_cases(Weights& w, int M) {
    const int N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
    const std::string shape = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    constexpr bool kFp32 = std::is_same_v<T, float>;
    const char* dtype = kbit::Elem<T>::name;
    if (!selected("prefill_nf4", dtype, shape)) return;
    Buffer<T> a(static_cast<size_t>(M) * K), out(static_cast<size_t>(M) * N);
    fill(a.p, static_cast<size_t>(M) * K, 5);
    const kbit_bench::Traffic traffic{double(N) * K / 2.0 + 4.0 * double(N) * K / w.bs + sizeof(T) * double(M) * K,
                                      sizeof(T) * double(M) * N, 2};
    const double flops = 2.0 * M * double(K) * N;
#ifdef KBIT_BENCH_HAVE_DNNL
    Buffer<kbit_bf16> a16(static_cast<size_t>(M) * K), w16(static_cast<size_t>(N) * K);
    // bf16 activations go to oneDNN as they are; fp32 ones are rounded into a16 inside the call.
    DnnlBf16Matmul<T> dnnl_bf16(M, N, K, kFp32 ? a16.p : reinterpret_cast<kbit_bf16*>(a.p), w16.p, out.p);
#endif
    int64_t next = 0;
    for (int t : options().threads) {
        std::vector<kbit_bench::Result> rows;
        rows.push_back(measure("prefill_nf4", dtype, shape, t, traffic, [&] {
            const int64_t c = next++ % w.copies;
            check(cgemm_4bit(a.p, w, c, out.p, M, N, K), "cgemm_4bit");
        }, kFp32 ? "kbit cgemm_4bit_fp32" : "kbit cgemm_4bit_bf16"));
        if constexpr (kFp32) {
            Buffer<float> dense(static_cast<size_t>(N) * K);
            openblas_set_num_threads(t);
            rows.push_back(measure("prefill_nf4", dtype, shape, t, traffic, [&] {
                const int64_t c = next++ % w.copies;
                check(kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, w.packed[c], w.absmax[c], dense.p, w.bs,
                                           int64_t{N} * K, nullptr),
                      "dequantize");
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.p, K, dense.p, K, 0.0f, out.p,
                            N);
            }, "dense: kbit dequantize + " + kbit_bench::openblas_name() + " SGEMM"));
        }
#ifdef KBIT_BENCH_HAVE_DNNL
        const std::string note = kFp32 ? "dense: kbit dequantize to bf16 + activations to bf16 + oneDNN bf16 matmul (" +
                                             dnnl_bf16.impl + ")"
                                       : "dense: kbit dequantize to bf16 + oneDNN bf16 matmul (" + dnnl_bf16.impl + ")";
        rows.push_back(measure("prefill_nf4", dtype, shape, t, traffic, [&] {
            const int64_t c = next++ % w.copies;
            check(kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_BF16, w.packed[c], w.absmax[c], w16.p, w.bs,
                                       int64_t{N} * K, nullptr),
                  "dequantize");
            if constexpr (kFp32) {
#pragma omp parallel for num_threads(t) schedule(static)
                for (int64_t i = 0; i < int64_t{M} * K; ++i) a16.p[i] = kbit::Elem<kbit_bf16>::store(a.p[i]);
            }
            dnnl_bf16.run();
        }, note));
#endif
        double dense_seconds = 1e300;
        for (size_t i = 1; i < rows.size(); ++i) dense_seconds = std::min(dense_seconds, rows[i].seconds);
        for (const auto& r : rows)
            std::printf("gops,%s,%s,%s,%d,%.1f,%.2f,%s\n", r.kernel.c_str(), r.dtype.c_str(), r.shape.c_str(),
                        r.threads, flops / r.seconds / 1e9, rows.size() > 1 ? dense_seconds / r.seconds : 0.0,
                        r.note.c_str());
        std::fflush(stdout);
    }
}
#endif

}  // namespace

KBIT_BENCH_SUITE(4bit) {
    const int64_t bs = 64;
    for (const auto& s : tensor_shapes()) {
        blockwise_cases<float>(s, bs);
        blockwise_cases<kbit_half>(s, bs);
        blockwise_cases<kbit_bf16>(s, bs);
    }
    std::vector<Shape> gemv_shapes = options().quick ? std::vector<Shape>{{"1024x1024", 1024, 1024}}
                                                     : std::vector<Shape>{{"4096x4096", 4096, 4096},
                                                                          {"4096x14336", 4096, 14336},
                                                                          {"14336x4096", 14336, 4096}};
    for (const auto& s : gemv_shapes) {
        Weights w(s.rows, s.cols, bs);
        gemv_cases<float>(w, s.name);
        gemv_cases<kbit_half>(w, s.name);
        gemv_cases<kbit_bf16>(w, s.name);
        gemm_cases<kbit_bf16>(w, s.name, 4);
        for (int M : {4, 8, 12, 16}) gemm_cases<float>(w, s.name, M);
        for (int M : {1, 8}) {
            int8_class_cases<float>(w, s.name, M);
            int8_class_cases<kbit_bf16>(w, s.name, M);
        }
        bnb_gemv_cases(w, s.name);
#ifdef KBIT_BENCH_HAVE_OPENBLAS
        if (!options().quick && s.name != "4096x14336") {  // 512x4096x4096, 512x4096x14336
            prefill_cases<float>(w, 512);
            prefill_cases<kbit_bf16>(w, 512);
        }
#endif
    }
}

}  // namespace kbit_bench
