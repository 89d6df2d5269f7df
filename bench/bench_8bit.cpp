// 8-bit suite: blockwise quantize / dequantize as % of the bandwidth probes, beside bitsandbytes'
// CPU library; the int8 GEMM (cigemmlt_32) beside an fp32 SGEMM of the same shape (OpenBLAS) and
// oneDNN's s8s8s32 GEMM. GEMM rows also print a machine-readable line
//   gops,<kernel>,<dtype>,<shape>,<threads>,<GOP/s>,<ratio to sgemm>,<note>
// (2 * tokens * in * out operations per call).
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "kbit/kbit_8bit.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"

#ifdef KBIT_BENCH_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace kbit_bench {
namespace {

// bitsandbytes' blockwise entry points of each dtype, and the dtype's name in the CSV.
template <auto Quantize, auto Dequantize>
struct Entries {
    static constexpr auto quantize = Quantize;
    static constexpr auto dequantize = Dequantize;
};
template <class T> struct Dtype;
template <> struct Dtype<float> : Entries<cquantize_blockwise_fp32, cdequantize_blockwise_fp32> { static constexpr const char* name = "fp32"; };
template <> struct Dtype<kbit_half> : Entries<cquantize_blockwise_fp16, cdequantize_blockwise_fp16> { static constexpr const char* name = "fp16"; };
template <> struct Dtype<kbit_bf16> : Entries<cquantize_blockwise_bf16, cdequantize_blockwise_bf16> { static constexpr const char* name = "bf16"; };

void check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) {
        std::fprintf(stderr, "bench_8bit: %s failed: %s\n", what, kbit_last_error_message());
        std::exit(1);
    }
}

template <class T>
void blockwise_cases(const std::string& shape, int64_t n, int64_t blocksize) {
    const char* dt = Dtype<T>::name;
    const bool q_sel = selected("quantize_blockwise_8bit", dt, shape);
    const bool d_sel = selected("dequantize_blockwise_8bit", dt, shape);
    if (!q_sel && !d_sel) return;
    std::vector<float> code = kbit::dynamic_map(true);
    Buffer<float> x(static_cast<size_t>(n));
    kbit_bench::fill_normal(x.data(), x.size(), 1);
    Buffer<T> in(x.size());
    for (size_t i = 0; i < x.size(); ++i) in[i] = kbit::Elem<T>::store(x[i]);
    const int64_t blocks = (n + blocksize - 1) / blocksize;
    Buffer<float> absmax(static_cast<size_t>(blocks));
    Buffer<uint8_t> q(x.size());
    Buffer<T> out(x.size());
    const double elems = static_cast<double>(n) * sizeof(T);
    const double codes = static_cast<double>(n) + 4.0 * static_cast<double>(blocks);
    const kbit_bench::Traffic quantized{elems, codes, 1}, dequantized{codes, elems, 2};
    const int B = static_cast<int>(blocksize), N = static_cast<int>(n);

    // bitsandbytes' CPU functions (0.50: long long blocksize and n), when its library is present.
    using BnbQuant = void (*)(float*, void*, float*, unsigned char*, long long, long long);
    using BnbDequant = void (*)(float*, unsigned char*, const float*, void*, long long, long long);
    BnbQuant bnb_q = nullptr;
    BnbDequant bnb_d = nullptr;
    if (void* h = kbit_bench::bnb_handle()) {
        bnb_q = reinterpret_cast<BnbQuant>(dlsym(h, (std::string("cquantize_blockwise_cpu_") + dt).c_str()));
        bnb_d = reinterpret_cast<BnbDequant>(dlsym(h, (std::string("cdequantize_blockwise_cpu_") + dt).c_str()));
    }
    check(Dtype<T>::quantize(code.data(), in.data(), absmax.data(), q.data(), B, N), "quantize");
    for (int threads : options().threads) {
        if (q_sel) {
            measure("quantize_blockwise_8bit", dt, shape, threads, quantized, [&] {
                check(Dtype<T>::quantize(code.data(), in.data(), absmax.data(), q.data(), B, N), "quantize");
            }, "kbit exact");
            if (bnb_q)
                measure("quantize_blockwise_8bit", dt, shape, threads, quantized, [&] {
                    bnb_q(code.data(), in.data(), absmax.data(), q.data(), blocksize, n);
                }, "bitsandbytes (approximate)");
        }
        if (d_sel) {
            measure("dequantize_blockwise_8bit", dt, shape, threads, dequantized, [&] {
                check(Dtype<T>::dequantize(code.data(), q.data(), absmax.data(), out.data(), B, N, nullptr), "dequantize");
            }, "kbit");
            if (bnb_d)
                measure("dequantize_blockwise_8bit", dt, shape, threads, dequantized, [&] {
                    bnb_d(code.data(), q.data(), absmax.data(), out.data(), blocksize, n);
                }, "bitsandbytes");
            // What memory alone allows this traffic: the same bytes read and written with no work.
            if (n % 64 == 0)
                measure("dequantize_blockwise_8bit", dt, shape, threads, dequantized, [&] {
                    kbit_bench::widen_pass(q.data(), out.data(), n, sizeof(T));
                }, "no work (the same traffic, bytes zero-extended)");
        }
    }
}

void print_gops(const kbit_bench::Result& r, double ops, double sgemm_seconds) {
    const double gops = ops / r.seconds / 1e9;
    std::printf("gops,%s,%s,%s,%d,%.1f,%.2f,%s\n", r.kernel.c_str(), r.dtype.c_str(), r.shape.c_str(), r.threads, gops,
                sgemm_seconds > 0 ? sgemm_seconds / r.seconds : 0.0, r.note.c_str());
    std::fflush(stdout);
}

// tokens x in x out: X [tokens][in], W [out][in], Y [tokens][out] (bitsandbytes: m = in, n = tokens,
// k = out, A = W, B = X).
void gemm_case(int64_t tokens, int64_t in, int64_t out) {
    const std::string shape = std::to_string(tokens) + "x" + std::to_string(in) + "x" + std::to_string(out);
    if (!selected("igemmlt_32", "int8", shape) && !selected("sgemm", "fp32", shape)) return;
    std::vector<int8_t> X(static_cast<size_t>(tokens * in)), W(static_cast<size_t>(out * in));
    std::vector<int32_t> Y(static_cast<size_t>(tokens * out));
    std::vector<float> Xf(X.size()), Wf(W.size()), Yf(Y.size());
    uint32_t s = 1;
    for (auto& v : X) v = static_cast<int8_t>((s = s * 1664525u + 1013904223u) >> 24);
    for (auto& v : W) v = static_cast<int8_t>((s = s * 1664525u + 1013904223u) >> 24);
    for (size_t i = 0; i < X.size(); ++i) Xf[i] = X[i];
    for (size_t i = 0; i < W.size(); ++i) Wf[i] = W[i];
    kbit_context* ctx = get_context();
    const double ops = 2.0 * static_cast<double>(tokens) * static_cast<double>(in) * static_cast<double>(out);
    // Compute-bound: the rows compare with SGEMM (print_gops); the traffic is the operands once.
    const kbit_bench::Traffic traffic{static_cast<double>(X.size() + W.size()), 4.0 * static_cast<double>(Y.size()), 2};
    const kbit_bench::Traffic fp32_traffic{4.0 * traffic.read, traffic.write, 2};
    const int m = static_cast<int>(in), n = static_cast<int>(tokens), k = static_cast<int>(out);
    for (int threads : options().threads) {
        double sgemm_seconds = 0;
#ifdef KBIT_BENCH_HAVE_OPENBLAS
        if (selected("sgemm", "fp32", shape)) {
            openblas_set_num_threads(threads);
            const auto r = measure("sgemm", "fp32", shape, threads, fp32_traffic, [&] {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, m, 1.0f, Xf.data(), m, Wf.data(), m, 0.0f,
                            Yf.data(), k);
            }, kbit_bench::openblas_name());
            sgemm_seconds = r.seconds;
            print_gops(r, ops, sgemm_seconds);
        }
#endif
        if (selected("igemmlt_32", "int8", shape)) {
            const auto r = measure("igemmlt_32", "int8", shape, threads, traffic, [&] {
                check(cigemmlt_32(ctx, m, n, k, W.data(), X.data(), Y.data(), nullptr, m, m, k, nullptr), "cigemmlt_32");
            }, "kbit exact");
            print_gops(r, ops, sgemm_seconds);
        }
#ifdef KBIT_BENCH_HAVE_DNNL
        if (selected("igemmlt_32", "int8", shape)) {
            const int32_t zero = 0;
            const auto r = measure("igemmlt_32", "int8", shape, threads, traffic, [&] {
                dnnl_gemm_s8s8s32('N', 'T', 'F', n, k, m, 1.0f, X.data(), m, 0, W.data(), m, 0, 0.0f, Y.data(), k, &zero);
            }, __builtin_cpu_supports("avx512vnni") ? "oneDNN s8s8s32 (exact here: AVX-512 VNNI)"
                                                     : "oneDNN s8s8s32 (saturates without VNNI: inexact here)");
            print_gops(r, ops, sgemm_seconds);
        }
#endif
    }
    kbit_context_destroy(ctx);
}

}  // namespace

KBIT_BENCH_SUITE(8bit) {
    const bool quick = options().quick;
    const std::vector<std::pair<std::string, int64_t>> sizes =
        quick ? std::vector<std::pair<std::string, int64_t>>{{"1024x1024", int64_t{1} << 20}}
              : std::vector<std::pair<std::string, int64_t>>{{"4096x4096", int64_t{1} << 24},
                                                              {"64M", int64_t{1} << 26}};
    for (const auto& [shape, n] : sizes) {
        blockwise_cases<float>(shape, n, 4096);
        blockwise_cases<kbit_half>(shape, n, 4096);
        blockwise_cases<kbit_bf16>(shape, n, 4096);
    }
    if (quick) {
        gemm_case(4, 256, 256);
        gemm_case(64, 256, 256);
        return;
    }
    gemm_case(1, 4096, 4096);
    gemm_case(16, 4096, 14336);
    gemm_case(512, 4096, 4096);
}

}  // namespace kbit_bench
