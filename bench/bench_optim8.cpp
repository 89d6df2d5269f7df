// Optimizer step throughput: parameters per second and GB/s of the traffic one step needs (read p,
// g, states, absmax; write p, states, absmax), beside the bandwidth probes of the same run.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "harness.h"
#include "kbit/kbit_optim8.h"
#include "kbit_dynamic_map.h"

namespace kbit_bench {
namespace {

// Weight-like values: 1M normal values tiled (generating 64M normals would dominate the run).
void fill_values(float* x, size_t n, unsigned seed, float scale) {
    const size_t tile = std::min<size_t>(n, size_t{1} << 20);
    kbit_bench::fill_normal(x, tile, seed, scale);
    for (size_t i = tile; i < n; i += tile) std::memcpy(x + i, x, std::min(tile, n - i) * sizeof(float));
}

void fill_values(kbit_bf16* x, size_t n, unsigned seed, float scale) {
    std::vector<float> tmp(std::min<size_t>(n, size_t{1} << 20));
    kbit_bench::fill_normal(tmp.data(), tmp.size(), seed, scale);
    for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, &tmp[i % tmp.size()], 4);
        x[i].bits = static_cast<uint16_t>(u >> 16);
    }
}

std::string shape_of(size_t n) { return n >= (size_t{1} << 20) ? std::to_string(n >> 20) + "M" : std::to_string(n); }

template <class T, class F>
void bench_8bit(const char* kernel, const char* dtype, F fn, bool two_state, bool ademamix, size_t n, int threads) {
    const std::string shape = shape_of(n);
    if (!kbit_bench::selected(kernel, dtype, shape)) return;
    const size_t blocks = (n + 255) / 256;
    Buffer<T> p(n), g(n);
    Buffer<uint8_t> s1(ademamix ? 2 * n : n), s2(n);
    Buffer<float> a1(ademamix ? 2 * blocks : blocks), a2(blocks);
    fill_values(p.p, n, 1, 0.1f);
    fill_values(g.p, n, 2, 0.01f);
    std::memset(s1.p, 0, s1.n);
    std::memset(s2.p, 0, s2.n);
    std::memset(a1.p, 0, a1.n * sizeof(float));
    std::memset(a2.p, 0, a2.n * sizeof(float));
    auto q1 = kbit::dynamic_map(true), q2 = kbit::dynamic_map(false);
    const double elem = sizeof(T), states = ademamix ? 3.0 : two_state ? 2.0 : 1.0;
    const double scales = (ademamix ? 3.0 : two_state ? 2.0 : 1.0) * 4.0 / 256.0;
    // p and g read, p written; every state and its block scales read and written.
    const double per = states + scales;
    // In place: every line written was read by the same call.
    const kbit_bench::Traffic traffic{static_cast<double>(n) * (2.0 * elem + per), static_cast<double>(n) * (elem + per),
                                      2 + static_cast<int>(states), true};
    int step = 1;
    measure(kernel, dtype, shape, threads, traffic, [&] {
        fn(p.p, g.p, s1.p, two_state ? s2.p : nullptr, 0.9f, 0.999f, 0.9999f, 5.0f, 1e-8f, step++,
           1e-3f, q1.data(), two_state ? q2.data() : nullptr, a1.p, two_state ? a2.p : nullptr, 0.0f, 1.0f,
           false, static_cast<int>(n));
    });
    // What memory alone allows this traffic (8-bit Adam on fp32 parameters): its own zeroed states,
    // so that the kernel's are left as it wrote them.
    if constexpr (std::is_same_v<T, float>)
        if (two_state && !ademamix && n % 256 == 0) {
            Buffer<uint8_t> z1(n), z2(n);
            std::memset(z1.p, 0, n);
            std::memset(z2.p, 0, n);
            measure(kernel, dtype, shape, threads, traffic, [&] {
                kbit_bench::adam8_pass(p.p, g.p, z1.p, z2.p, static_cast<long>(n));
            }, "no work (the same traffic)");
        }
}

void bench_adam32(size_t n, int threads) {
    const std::string shape = shape_of(n);
    if (!kbit_bench::selected("adam32", "fp32", shape)) return;
    Buffer<float> p(n), g(n), s1(n), s2(n);
    fill_values(p.p, n, 1, 0.1f);
    fill_values(g.p, n, 2, 0.01f);
    std::memset(s1.p, 0, n * sizeof(float));
    std::memset(s2.p, 0, n * sizeof(float));
    int step = 1;
    // p, g, s1, s2 read; p, s1, s2 written back in place.
    const kbit_bench::Traffic traffic{16.0 * static_cast<double>(n), 12.0 * static_cast<double>(n), 4, true};
    measure("adam32", "fp32", shape, threads, traffic, [&] {
        cadam32bit_grad_fp32(g.p, p.p, s1.p, s2.p, nullptr, 0.0f, 0.0f, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f,
                             0.0f, step++, 1e-3f, 1.0f, false, static_cast<int>(n));
    });
}

}  // namespace

// bytes per parameter (fp32): Adam 32-bit 28; 8-bit Adam 16 + 16/256 (absmax read and written);
// 1-state 8-bit 14 + 8/256; AdEMAMix 8-bit 18 + 24/256. Rows: kernel, dtype, parameters.
KBIT_BENCH_SUITE(optim8) {
    const auto& o = kbit_bench::options();
    const std::vector<size_t> sizes =
        o.quick ? std::vector<size_t>{size_t{1} << 16} : std::vector<size_t>{size_t{1} << 20, size_t{64} << 20};
    for (size_t n : sizes) {
        for (int t : o.threads) {
            bench_adam32(n, t);
            bench_8bit<float>("adam8", "fp32", cadam_8bit_blockwise_grad_fp32, true, false, n, t);
            bench_8bit<float>("ademamix8", "fp32", cademamix_8bit_blockwise_grad_fp32, true, true, n, t);
            bench_8bit<float>("momentum8", "fp32", cmomentum_8bit_blockwise_grad_fp32, false, false, n, t);
            bench_8bit<float>("rmsprop8", "fp32", crmsprop_8bit_blockwise_grad_fp32, false, false, n, t);
            bench_8bit<float>("lion8", "fp32", clion_8bit_blockwise_grad_fp32, false, false, n, t);
            bench_8bit<float>("adagrad8", "fp32", cadagrad_8bit_blockwise_grad_fp32, false, false, n, t);
            bench_8bit<kbit_bf16>("adam8", "bf16", cadam_8bit_blockwise_grad_bf16, true, false, n, t);
        }
    }
}

}  // namespace kbit_bench
