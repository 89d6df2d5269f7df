// kbit_bench_cuda — throughput of the CUDA backend's bandwidth-bound kernels (4-bit and 8-bit
// quantization, NF4 GEMV, the grouped mixture-of-experts GEMM, optimizer steps) beside the device's measured copy bandwidth, as CSV.
//
// Each round times the device-to-device copy (cudaMemcpyAsync of 1 GiB, counted as bytes read +
// written) and then the kernel (the mean over `iters` back-to-back calls through the exported C
// functions, cycling through enough buffer sets that the working set is 3x the L2 cache), with CUDA
// events; the row reports the medians over the rounds and pct_copy = median of the per-round ratios.
//
// Usage: kbit_bench_cuda [--quick] [--filter TEXT] [--rounds N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kbit/kbit.h"
#include "kbit_half.h"

namespace {

struct Options {
    bool quick = false;
    std::string filter;
    int rounds = 5;
} g_opt;

void die(const char* what, const char* detail) {
    std::fprintf(stderr, "kbit_bench_cuda: %s: %s\n", what, detail);
    std::exit(1);
}
void cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) die(what, cudaGetErrorString(e));
}
void kbit_ok(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) die(what, kbit_last_error_message());
}

void* dmalloc(size_t bytes) {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}

// Deterministic pseudo-normal values (Box-Muller on a hash) or random bytes, generated on the GPU.
__device__ uint32_t hash32(uint64_t i, uint32_t seed) {
    uint64_t h = (i + seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return static_cast<uint32_t>(h >> 32);
}
template <class T>
__global__ void fill_normal_kernel(T* x, int64_t n, uint32_t seed) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const float u1 = (hash32(i, seed) + 1.0f) * 0x1p-32f, u2 = hash32(i, seed ^ 0x5bd1e995u) * 0x1p-32f;
        const float v = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
        if constexpr (sizeof(T) == 4) x[i] = v;
        else x[i] = T{static_cast<uint16_t>(std::is_same<T, kbit_half>::value ? kbit::float_to_half(v) : kbit::float_to_bf16(v))};
    }
}
__global__ void fill_bytes_kernel(uint8_t* x, int64_t n, uint32_t seed) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        x[i] = static_cast<uint8_t>(hash32(i, seed));
}
__global__ void fill_value_kernel(float* x, int64_t n, float v) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) x[i] = v;
}
template <class T> void fill_normal(T* x, int64_t n, uint32_t seed) { fill_normal_kernel<<<4096, 256>>>(x, n, seed); }
void fill_bytes(void* x, int64_t n, uint32_t seed) { fill_bytes_kernel<<<4096, 256>>>(static_cast<uint8_t*>(x), n, seed); }
void fill_value(float* x, int64_t n, float v) { fill_value_kernel<<<4096, 256>>>(x, n, v); }

int64_t l2_bytes() {
    int dev = 0, l2 = 0;
    cuda_ok(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute");
    return l2;
}

// Buffer sets whose total footprint is at least 3x L2 (at least one set).
int sets_for(double footprint) { return std::max(1, static_cast<int>(std::ceil(3.0 * l2_bytes() / footprint))); }

class CopyProbe {
public:
    CopyProbe() : bytes_(size_t{1} << 30) {
        a_ = dmalloc(bytes_);
        b_ = dmalloc(bytes_);
        cuda_ok(cudaMemset(a_, 1, bytes_), "cudaMemset");
    }
    ~CopyProbe() {
        cudaFree(a_);
        cudaFree(b_);
    }
    double gbs() {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        cuda_ok(cudaMemcpyAsync(b_, a_, bytes_, cudaMemcpyDeviceToDevice), "copy");  // warm
        cudaEventRecord(e0);
        for (int i = 0; i < 3; ++i) cuda_ok(cudaMemcpyAsync(i % 2 ? a_ : b_, i % 2 ? b_ : a_, bytes_, cudaMemcpyDeviceToDevice), "copy");
        cudaEventRecord(e1);
        cuda_ok(cudaEventSynchronize(e1), "sync");
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return 3.0 * 2.0 * static_cast<double>(bytes_) / (ms * 1e-3) / 1e9;
    }

private:
    size_t bytes_;
    void* a_;
    void* b_;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Times `run(set)` (one call on buffer set `set`) and prints a CSV row.
void measure(CopyProbe& copy, const std::string& kernel, const std::string& dtype, const std::string& shape, double bytes,
             int sets, const std::function<void(int)>& run) {
    const std::string name = kernel + " " + dtype + " " + shape;
    if (!g_opt.filter.empty() && name.find(g_opt.filter) == std::string::npos) return;
    for (int s = 0; s < sets; ++s) run(s);  // warm-up, and the first error
    cuda_ok(cudaDeviceSynchronize(), kernel.c_str());
    const int iters = std::max(sets, g_opt.quick ? 4 : 20);
    std::vector<double> secs, copies, ratios;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < g_opt.rounds; ++r) {
        const double c = copy.gbs();
        cudaEventRecord(e0);
        for (int i = 0; i < iters; ++i) run(i % sets);
        cudaEventRecord(e1);
        cuda_ok(cudaEventSynchronize(e1), kernel.c_str());
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        const double t = ms * 1e-3 / iters;
        secs.push_back(t);
        copies.push_back(c);
        ratios.push_back(bytes / t / 1e9 / c);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    const double t = median(secs);
    std::printf("%s,%s,%s,%.0f,%.2f,%.1f,%.1f,%.1f\n", kernel.c_str(), dtype.c_str(), shape.c_str(), bytes, t * 1e6,
                bytes / t / 1e9, median(copies), 100.0 * median(ratios));
    std::fflush(stdout);
}

template <class T> const char* dtype_name() { return kbit::Elem<T>::name; }

// A blockwise quantizer (T -> codes) or dequantizer (codes -> T) of n elements in blocks of B:
// buffer sets {in, absmax, out}, `code_bytes` the bytes of the n codes. A quantizer reads pseudo-normal
// values (set s: seed `seed` + s), a dequantizer random codes (seed s) and absmax 0.5. call(in, absmax,
// out) is one call of the kernel.
template <class T, class Call>
void bench_blockwise(CopyProbe& copy, const char* kernel, bool quantize, int64_t n, int64_t B, int64_t code_bytes,
                     uint32_t seed, const Call& call) {
    const int64_t elem_bytes = n * sizeof(T), absmax_bytes = n / B * 4;
    const double bytes = double(elem_bytes) + double(code_bytes) + double(absmax_bytes);
    const int sets = sets_for(bytes);
    std::vector<void*> in(sets), absmax(sets), out(sets);
    for (int s = 0; s < sets; ++s) {
        in[s] = dmalloc(quantize ? elem_bytes : code_bytes);
        absmax[s] = dmalloc(absmax_bytes);
        out[s] = dmalloc(quantize ? code_bytes : elem_bytes);
        if (quantize) {
            fill_normal(static_cast<T*>(in[s]), n, seed + s);
        } else {
            fill_bytes(in[s], code_bytes, seed + s);
            fill_value(static_cast<float*>(absmax[s]), n / B, 0.5f);
        }
    }
    measure(copy, kernel, dtype_name<T>(), "n=" + std::to_string(n) + " blocksize=" + std::to_string(B), bytes, sets,
            [&](int s) { call(in[s], static_cast<float*>(absmax[s]), out[s]); });
    for (int s = 0; s < sets; ++s) {
        cudaFree(in[s]);
        cudaFree(absmax[s]);
        cudaFree(out[s]);
    }
}

template <class T>
void bench_dequantize_4bit(CopyProbe& copy, int64_t n) {
    bench_blockwise<T>(copy, "dequantize_4bit_nf4", false, n, 64, n / 2, 0, [&](void* in, float* absmax, void* out) {
        kbit_ok(kbit_dequantize_4bit(KBIT_QUANT_NF4, kbit::Elem<T>::dtype, static_cast<uint8_t*>(in), absmax, out, 64, n,
                                     nullptr),
                "kbit_dequantize_4bit");
    });
}

template <class T>
void bench_quantize_4bit(CopyProbe& copy, int64_t n) {
    bench_blockwise<T>(copy, "quantize_4bit_nf4", true, n, 64, n / 2, 0, [&](void* in, float* absmax, void* out) {
        kbit_ok(kbit_quantize_4bit(KBIT_QUANT_NF4, kbit::Elem<T>::dtype, in, absmax, static_cast<uint8_t*>(out), 64, n,
                                   nullptr),
                "kbit_quantize_4bit");
    });
}

// bitsandbytes' create_dynamic_map(signed), fp32.
std::vector<float> dynamic_map(bool is_signed) {
    std::vector<float> v;
    for (int d = 0; d <= 6; ++d) {
        const int f = is_signed ? (1 << d) + 1 : (1 << (d + 1)) + 1;
        const float h = (1.0f - 0.1f) / static_cast<float>(f - 1);
        std::vector<float> b(f);
        for (int i = 0; i < f; ++i) b[i] = i < f / 2 ? 0.1f + h * static_cast<float>(i) : 1.0f - h * static_cast<float>(f - 1 - i);
        const float sc = static_cast<float>(std::pow(10.0, d - 6));
        for (int i = 0; i + 1 < f; ++i) {
            v.push_back(sc * ((b[i] + b[i + 1]) / 2.0f));
            if (is_signed) v.push_back(-(sc * ((b[i] + b[i + 1]) / 2.0f)));
        }
    }
    v.push_back(0.0f);
    v.push_back(1.0f);
    std::sort(v.begin(), v.end());
    return v;
}

template <class T>
void bench_quantize_8bit(CopyProbe& copy, int64_t n, int64_t B, float* code) {
    bench_blockwise<T>(copy, "quantize_blockwise_8bit", true, n, B, n, 7, [&](void* in, float* absmax, void* out) {
        kbit_ok(kbit_quantize_blockwise_8bit(kbit::Elem<T>::dtype, code, in, absmax, static_cast<uint8_t*>(out), B, n,
                                             nullptr),
                "kbit_quantize_blockwise_8bit");
    });
}

template <class T>
void bench_dequantize_8bit(CopyProbe& copy, int64_t n, float* code) {
    bench_blockwise<T>(copy, "dequantize_blockwise_8bit", false, n, 256, n, 0, [&](void* in, float* absmax, void* out) {
        kbit_ok(kbit_dequantize_blockwise_8bit(kbit::Elem<T>::dtype, code, static_cast<uint8_t*>(in), absmax, out, 256, n,
                                               nullptr),
                "kbit_dequantize_blockwise_8bit");
    });
}

// NF4 GEMV with one activation row: out[N] = W[N, K] x, blocksize 64.
template <class T>
void bench_gemv(CopyProbe& copy, int N, int K, float* lut) {
    const int B = 64;
    const double wbytes = double(N) * K / 2 + double(N) * K / B * 4;
    const double bytes = wbytes + double(K) * sizeof(T) + double(N) * sizeof(T);
    const int sets = sets_for(wbytes);
    std::vector<void*> W(sets), absmax(sets);
    for (int s = 0; s < sets; ++s) {
        W[s] = dmalloc(size_t(N) * K / 2);
        absmax[s] = dmalloc(size_t(N) * K / B * 4);
        fill_bytes(W[s], int64_t{N} * K / 2, s);
        fill_value(static_cast<float*>(absmax[s]), int64_t{N} * K / B, 0.02f);
    }
    T* A = static_cast<T*>(dmalloc(size_t(K) * sizeof(T)));
    T* out = static_cast<T*>(dmalloc(size_t(N) * sizeof(T)));
    fill_normal(A, K, 3);
    auto call = [&](int s) {
        kbit_status st;
        if constexpr (std::is_same<T, float>::value)
            st = cgemm_4bit_inference_naive_fp32(N, 1, K, A, static_cast<unsigned char*>(W[s]), static_cast<float*>(absmax[s]),
                                                 lut, out, N, K / 2, N, B, nullptr);
        else if constexpr (std::is_same<T, kbit_half>::value)
            st = cgemm_4bit_inference_naive_fp16(N, 1, K, A, static_cast<unsigned char*>(W[s]), static_cast<float*>(absmax[s]),
                                                 lut, out, N, K / 2, N, B, nullptr);
        else
            st = cgemm_4bit_inference_naive_bf16(N, 1, K, A, static_cast<unsigned char*>(W[s]), static_cast<float*>(absmax[s]),
                                                 lut, out, N, K / 2, N, B, nullptr);
        kbit_ok(st, "cgemm_4bit_inference_naive");
    };
    measure(copy, "gemv_4bit_nf4", dtype_name<T>(), "M=1 N=" + std::to_string(N) + " K=" + std::to_string(K) + " blocksize=64",
            bytes, sets, call);
    for (int s = 0; s < sets; ++s) {
        cudaFree(W[s]);
        cudaFree(absmax[s]);
    }
    cudaFree(A);
    cudaFree(out);
}

// kbit_gemm_4bit_grouped on a fused [E, N, K] NF4 weight (blocksize 64) at decode: `tokens` tokens, each
// choosing top_k distinct experts at random; the buffer sets are routings (the whole weight is well
// past the L2 cache, so each routing's experts come from memory). bytes: the touched experts' weights
// and scales (the mean over the routings) plus the activations and outputs.
template <class T>
void bench_grouped(CopyProbe& copy, const char* name, int64_t E, int64_t top_k, int64_t N, int64_t K, int64_t tokens) {
    const int64_t B = 64, routings = 16, pairs = tokens * top_k;
    uint8_t* W = static_cast<uint8_t*>(dmalloc(size_t(E * N * K / 2)));
    float* absmax = static_cast<float*>(dmalloc(size_t(E * N * K / B * 4)));
    fill_bytes(W, E * N * K / 2, 11);
    fill_value(absmax, E * N * K / B, 0.02f);
    T* A = static_cast<T*>(dmalloc(size_t(tokens * K) * sizeof(T)));
    T* out = static_cast<T*>(dmalloc(size_t(pairs * N) * sizeof(T)));
    fill_normal(A, tokens * K, 5);
    std::mt19937 rng(7);
    std::vector<int32_t*> ids(routings);
    double touched = 0;
    for (auto& set : ids) {
        std::vector<int32_t> host(static_cast<size_t>(pairs));
        std::vector<char> seen(static_cast<size_t>(E), 0);
        for (int64_t t = 0; t < tokens; ++t) {
            std::vector<int32_t> pool(static_cast<size_t>(E));
            for (int64_t e = 0; e < E; ++e) pool[e] = static_cast<int32_t>(e);
            std::shuffle(pool.begin(), pool.end(), rng);
            for (int64_t j = 0; j < top_k; ++j) {
                host[t * top_k + j] = pool[j];
                seen[pool[j]] = 1;
            }
        }
        touched += std::count(seen.begin(), seen.end(), 1);
        set = static_cast<int32_t*>(dmalloc(size_t(pairs) * 4));
        cuda_ok(cudaMemcpy(set, host.data(), size_t(pairs) * 4, cudaMemcpyHostToDevice), "ids");
    }
    const double expert_bytes = double(N) * K / 2 + double(N) * K / B * 4;
    const double bytes = touched / routings * expert_bytes + double(tokens * K + pairs * N) * sizeof(T);
    auto call = [&](int s) {
        kbit_ok(kbit_gemm_4bit_grouped(kbit::Elem<T>::dtype, A, 1, W, absmax, nullptr, nullptr, nullptr, E, N, K, B,
                                       KBIT_QUANT_NF4, ids[s], tokens, top_k, nullptr, out, nullptr),
                "kbit_gemm_4bit_grouped");
    };
    measure(copy, "gemm_4bit_grouped_nf4", dtype_name<T>(),
            std::string(name) + " T=" + std::to_string(tokens) + " E=" + std::to_string(E) + " top_k=" +
                std::to_string(top_k) + " N=" + std::to_string(N) + " K=" + std::to_string(K),
            bytes, static_cast<int>(routings), call);
    kbit_ok(kbit_stream_synchronize(nullptr), "kbit_stream_synchronize (deferred id checks)");
    for (int32_t* set : ids) cudaFree(set);
    cudaFree(W);
    cudaFree(absmax);
    cudaFree(A);
    cudaFree(out);
}

// 8-bit blockwise Adam (cadam_8bit_blockwise_grad_*): p read and written, g read, two 8-bit states
// read and written, two absmax arrays read and written.
template <class T>
void bench_adam_8bit(CopyProbe& copy, int64_t n, float* q1, float* q2) {
    const int64_t blocks = (n + 255) / 256;
    const double bytes = double(n) * (3 * sizeof(T) + 4) + double(blocks) * 16;
    const int sets = sets_for(bytes);
    std::vector<void*> p(sets), g(sets), s1(sets), s2(sets), a1(sets), a2(sets);
    for (int s = 0; s < sets; ++s) {
        p[s] = dmalloc(n * sizeof(T));
        g[s] = dmalloc(n * sizeof(T));
        s1[s] = dmalloc(n);
        s2[s] = dmalloc(n);
        a1[s] = dmalloc(blocks * 4);
        a2[s] = dmalloc(blocks * 4);
        fill_normal(static_cast<T*>(p[s]), n, s + 11);
        fill_normal(static_cast<T*>(g[s]), n, s + 12);
        fill_bytes(s1[s], n, s + 13);
        fill_bytes(s2[s], n, s + 14);
        fill_value(static_cast<float*>(a1[s]), blocks, 0.01f);
        fill_value(static_cast<float*>(a2[s]), blocks, 1e-4f);
    }
    measure(copy, "adam_8bit_blockwise", dtype_name<T>(), "n=" + std::to_string(n), bytes, sets, [&](int s) {
        T* pp = static_cast<T*>(p[s]);
        T* gg = static_cast<T*>(g[s]);
        auto* c1 = static_cast<unsigned char*>(s1[s]);
        auto* c2 = static_cast<unsigned char*>(s2[s]);
        auto* m1 = static_cast<float*>(a1[s]);
        auto* m2 = static_cast<float*>(a2[s]);
        kbit_status st;
        if constexpr (std::is_same<T, float>::value)
            st = cadam_8bit_blockwise_grad_fp32(pp, gg, c1, c2, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 10, 1e-3f, q1, q2, m1, m2,
                                                0.0f, 1.0f, false, static_cast<int>(n));
        else if constexpr (std::is_same<T, kbit_half>::value)
            st = cadam_8bit_blockwise_grad_fp16(pp, gg, c1, c2, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 10, 1e-3f, q1, q2, m1, m2,
                                                0.0f, 1.0f, false, static_cast<int>(n));
        else
            st = cadam_8bit_blockwise_grad_bf16(pp, gg, c1, c2, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 10, 1e-3f, q1, q2, m1, m2,
                                                0.0f, 1.0f, false, static_cast<int>(n));
        kbit_ok(st, "cadam_8bit_blockwise_grad");
    });
    for (int s = 0; s < sets; ++s)
        for (void* ptr : {p[s], g[s], s1[s], s2[s], a1[s], a2[s]}) cudaFree(ptr);
}

// 32-bit Adam fp32 (cadam32bit_grad_fp32), without and with update-norm clipping (an extra pass that
// reads g and both states).
void bench_adam_32bit(CopyProbe& copy, int64_t n, bool clip) {
    const double bytes = double(n) * (clip ? 40 : 28);
    const int sets = sets_for(bytes);
    std::vector<float*> p(sets), g(sets), s1(sets), s2(sets);
    float* unorm = static_cast<float*>(dmalloc(4));
    for (int s = 0; s < sets; ++s) {
        p[s] = static_cast<float*>(dmalloc(n * 4));
        g[s] = static_cast<float*>(dmalloc(n * 4));
        s1[s] = static_cast<float*>(dmalloc(n * 4));
        s2[s] = static_cast<float*>(dmalloc(n * 4));
        fill_normal(p[s], n, s + 21);
        fill_normal(g[s], n, s + 22);
        fill_value(s1[s], n, 0.0f);
        fill_value(s2[s], n, 0.0f);
    }
    measure(copy, "adam_32bit", "fp32", "n=" + std::to_string(n) + (clip ? " max_unorm=1" : ""), bytes, sets, [&](int s) {
        kbit_ok(cadam32bit_grad_fp32(g[s], p[s], s1[s], s2[s], unorm, clip ? 1.0f : 0.0f, 1.0f, 0.9f, 0.999f, 0.0f, 0.0f,
                                     1e-8f, 0.0f, 10, 1e-3f, 1.0f, false, static_cast<int>(n)),
                "cadam32bit_grad_fp32");
    });
    for (int s = 0; s < sets; ++s)
        for (float* ptr : {p[s], g[s], s1[s], s2[s]}) cudaFree(ptr);
    cudaFree(unorm);
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) g_opt.quick = true;
        else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) g_opt.filter = argv[++i];
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) g_opt.rounds = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: %s [--quick] [--filter TEXT] [--rounds N]\n", argv[0]);
            return 2;
        }
    }
    if (kbit_backend_probe() <= 0) {
        std::printf("# no usable CUDA device: %s\n", kbit_backend_info());
        return 77;
    }
    if (g_opt.quick) g_opt.rounds = std::min(g_opt.rounds, 3);
    std::printf("# %s\n", kbit_backend_info());
    std::printf("kernel,dtype,shape,bytes,time_us,gbs,copy_gbs,pct_copy\n");
    CopyProbe copy;
    const int64_t n = g_opt.quick ? int64_t{1} << 24 : int64_t{1} << 27;

    const std::vector<float> nf4 = {KBIT_NF4_VALUES};
    float* lut = static_cast<float*>(dmalloc(16 * sizeof(float)));
    cuda_ok(cudaMemcpy(lut, nf4.data(), 16 * sizeof(float), cudaMemcpyHostToDevice), "lut");
    const std::vector<float> map = dynamic_map(true), umap = dynamic_map(false);
    float* code = static_cast<float*>(dmalloc(256 * sizeof(float)));
    float* ucode = static_cast<float*>(dmalloc(256 * sizeof(float)));
    cuda_ok(cudaMemcpy(code, map.data(), 256 * sizeof(float), cudaMemcpyHostToDevice), "code");
    cuda_ok(cudaMemcpy(ucode, umap.data(), 256 * sizeof(float), cudaMemcpyHostToDevice), "code");

    bench_dequantize_4bit<kbit_half>(copy, n);
    bench_dequantize_4bit<kbit_bf16>(copy, n);
    bench_dequantize_4bit<float>(copy, n);
    bench_quantize_8bit<float>(copy, n, 256, code);
    bench_quantize_8bit<kbit_half>(copy, n, 256, code);
    bench_quantize_8bit<kbit_bf16>(copy, n, 256, code);
    bench_quantize_8bit<kbit_half>(copy, n, 64, code);
    bench_gemv<kbit_half>(copy, 14336, 4096, lut);
    bench_gemv<kbit_half>(copy, 4096, 14336, lut);
    bench_gemv<kbit_bf16>(copy, 14336, 4096, lut);
    bench_gemv<kbit_bf16>(copy, 4096, 14336, lut);
    bench_gemv<float>(copy, 14336, 4096, lut);
    bench_grouped<kbit_bf16>(copy, "qwen3moe_gate_up", 128, 8, 1536, 2048, 1);
    bench_grouped<kbit_bf16>(copy, "qwen3moe_gate_up", 128, 8, 1536, 2048, 8);
    bench_grouped<kbit_bf16>(copy, "mixtral_w1", 8, 2, 14336, 4096, 1);
    bench_quantize_4bit<kbit_half>(copy, n);
    bench_dequantize_8bit<kbit_half>(copy, n, code);
    const int64_t params = g_opt.quick ? int64_t{1} << 24 : int64_t{1} << 26;  // 64M parameters
    bench_adam_8bit<float>(copy, params, code, ucode);
    bench_adam_8bit<kbit_bf16>(copy, params, code, ucode);
    bench_adam_32bit(copy, params, false);
    bench_adam_32bit(copy, params, true);
    cudaFree(lut);
    cudaFree(code);
    cudaFree(ucode);
    return 0;
}
