// probe_passes.h — the roofline probes' passes over large arrays, written once over a vector type W
// (Ymm in harness.cpp, Zmm in probes_avx512.cpp, which is compiled for AVX-512). Everything here has
// internal linkage, so the two translation units' instances never merge: an AVX-512 instance
// must not stand in for the AVX2 one on a CPU without AVX-512.
//
// W provides: V, kLanes, set1, load, add, sum_lanes, store<kNonTemporal>, kOutVector and widen<OutBytes>;
// Lanes<V, W> below gives all but widen from the vector type and W::stream, the non-temporal store. Array
// lengths are multiples of 64 floats (4 x 16 lanes per step).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace kbit_bench {
namespace {

// After a pass's non-temporal stores: sfence on x86-64; a full barrier elsewhere (AArch64's
// non-temporal stores need no fence of their own).
inline void probe_store_fence() {
#if defined(__x86_64__)
    _mm_sfence();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

#if defined(__x86_64__)
// The intrinsics' vector of N floats (a member typedef keeps its may_alias attribute, which a template
// argument would drop).
template <long N> struct FloatVector;
template <> struct FloatVector<8> { using type = __m256; };
template <> struct FloatVector<16> { using type = __m512; };

// The lane operations of a vector of N floats for a W deriving from it, written with the compiler's
// vector extensions as the intrinsics define them: aligned loads and stores, lane-wise addition, a
// broadcast and a lane sum; W::stream(p, v) is W's non-temporal store.
template <long N, class W>
struct Lanes {
    using V = typename FloatVector<N>::type;
    static constexpr long kLanes = N;
    static constexpr long kOutVector = sizeof(V);  // bytes of one vector widen() writes
    static V set1(float x) {
        V v{};
        for (long i = 0; i < kLanes; ++i) v[i] = x;
        return v;
    }
    static V load(const float* p) { return *reinterpret_cast<const V*>(p); }
    static V add(V a, V b) { return a + b; }
    static float sum_lanes(V v) {
        float total = 0.0f;
        for (long i = 0; i < kLanes; ++i) total += v[i];
        return total;
    }
    template <bool kNonTemporal>
    static void store(float* p, V v) {
        if constexpr (kNonTemporal) W::stream(p, v);
        else *reinterpret_cast<V*>(p) = v;
    }
};
#endif

inline double probe_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Each thread sums its static part of every stream, two vectors of each per step: the streams are
// read together, as a kernel reads its inputs. The stream count is a template argument so that the
// loop is unrolled with two independent accumulators per stream and the pointers in registers: with
// one shared pair and a run-time stream loop the probe itself was the limit (17 GB/s on one Zen 5
// core that streams 40 GB/s), and kernels ran at up to 195% of it.
template <class W, int S>
double read_pass(const std::vector<float*>& src_vec, long n) {
    const float* src[S];
    for (int s = 0; s < S; ++s) src[s] = src_vec[s];
    float total = 0.0f;
    const double t0 = probe_now();
#pragma omp parallel reduction(+ : total)
    {
        typename W::V acc[S][2];
        for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = W::set1(0.0f);
#pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += 2 * W::kLanes)
            for (int s = 0; s < S; ++s) {
                acc[s][0] = W::add(acc[s][0], W::load(src[s] + i));
                acc[s][1] = W::add(acc[s][1], W::load(src[s] + i + W::kLanes));
            }
        typename W::V sum = W::set1(0.0f);
        for (int s = 0; s < S; ++s) sum = W::add(sum, W::add(acc[s][0], acc[s][1]));
        total += W::sum_lanes(sum);
    }
    const double dt = probe_now() - t0;
    if (total == 1234.5f) std::puts("");  // keeps the sums alive
    return static_cast<double>(S) * static_cast<double>(n) * sizeof(float) / dt / 1e9;
}

template <class W>
double read_gbs_of(const std::vector<float*>& src, long n, int streams, int max_streams) {
    switch (std::clamp(streams, 1, max_streams)) {
        case 1: return read_pass<W, 1>(src, n);
        case 2: return read_pass<W, 2>(src, n);
        case 3: return read_pass<W, 3>(src, n);
        case 4: return read_pass<W, 4>(src, n);
        case 5: return read_pass<W, 5>(src, n);
        default: return read_pass<W, 6>(src, n);
    }
}

// Four stores per step: on Sapphire Rapids one core wrote 20 GB/s with two 256-bit non-temporal
// stores per loop step and 22-24 GB/s with four 512-bit ones, and kernels that store the latter
// way ran at up to 109% of the former.
template <class W, bool kNonTemporal>
double write_pass(float* dst, long n) {
    const typename W::V v = W::set1(1.0f);
    const double t0 = probe_now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 4 * W::kLanes)
        for (long k = 0; k < 4; ++k) W::template store<kNonTemporal>(dst + i + k * W::kLanes, v);
    probe_store_fence();
    return static_cast<double>(n) * sizeof(float) / (probe_now() - t0) / 1e9;
}

template <class W, bool kNonTemporal>
double copy_pass(const float* src, float* dst, long n) {
    const double t0 = probe_now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 4 * W::kLanes)
        for (long k = 0; k < 4; ++k)
            W::template store<kNonTemporal>(dst + i + k * W::kLanes, W::load(src + i + k * W::kLanes));
    probe_store_fence();
    return 2.0 * static_cast<double>(n) * sizeof(float) / (probe_now() - t0) / 1e9;
}

// Every line read and written back in place (x + 0.0f: not folded away, and no value changes), as
// an optimizer updates its parameters and states: a line just read needs no read-for-ownership, so
// this moves more bytes per second than a copy (one Sapphire Rapids core: 26-27 GB/s against 18,
// where 32-bit Adam ran at 108-117% of the copy bound).
template <class W>
double update_pass(float* a, long n) {
    const typename W::V zero = W::set1(0.0f);
    const double t0 = probe_now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 4 * W::kLanes)
        for (long k = 0; k < 4; ++k) {
            float* p = a + i + k * W::kLanes;
            W::template store<false>(p, W::add(W::load(p), zero));
        }
    return 2.0 * static_cast<double>(n) * sizeof(float) / (probe_now() - t0) / 1e9;
}

// Writes and copies: the better of non-temporal and ordinary stores (ordinary ones won on Zen 5 for
// one thread, non-temporal ones on Sapphire Rapids).
template <class W>
double best_write_pass(float* dst, long n) {
    return std::max(write_pass<W, true>(dst, n), write_pass<W, false>(dst, n));
}
template <class W>
double best_copy_pass(const float* src, float* dst, long n) {
    return std::max(copy_pass<W, true>(src, dst, n), copy_pass<W, false>(src, dst, n));
}

// A kernel's traffic with none of its work: `n` bytes zero-extended to `out_bytes` (2 or 4) each,
// written non-temporally, the codes prefetched 2 KB ahead as the 8-bit dequantizers do. W provides
// widen<OutBytes>(const uint8_t* in, void* out): one vector of outputs from the bytes at `in`, and
// kOutVector, the bytes of that vector. n is a multiple of 64.
template <class W, int OutBytes>
void widen_pass(const uint8_t* in, void* out, long n) {
    constexpr long kPerVector = W::kOutVector / OutBytes;  // input bytes per output vector
    auto* o = static_cast<uint8_t*>(out);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i += 64) {
        __builtin_prefetch(in + i + 2048);  // prefetcht0 on x86-64; never faults
        for (long k = 0; k < 64; k += kPerVector) W::template widen<OutBytes>(in + i + k, o + (i + k) * OutBytes);
    }
    probe_store_fence();
}

// 8-bit Adam's traffic with none of its work: g (fp32) read and summed, p (fp32) and the two byte
// states (here n / 4 floats each) read and written back in place as x + 0.0f, as update_pass does.
// The states' block scales (1/64 of a state's bytes) are left out. n a multiple of 16 * W::kLanes.
template <class W>
void adam8_pass(float* p, const float* g, float* s1, float* s2, long n) {
    const typename W::V zero = W::set1(0.0f);
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
        typename W::V sum = zero;
#pragma omp for schedule(static) nowait
        for (long i = 0; i < n; i += 16 * W::kLanes) {
            for (long k = 0; k < 16; ++k) {
                float* pk = p + i + k * W::kLanes;
                sum = W::add(sum, W::load(g + i + k * W::kLanes));
                W::template store<false>(pk, W::add(W::load(pk), zero));
            }
            for (long k = 0; k < 4; ++k) {
                float* a = s1 + i / 4 + k * W::kLanes;
                float* b = s2 + i / 4 + k * W::kLanes;
                W::template store<false>(a, W::add(W::load(a), zero));
                W::template store<false>(b, W::add(W::load(b), zero));
            }
        }
        total += W::sum_lanes(sum);
    }
    if (total == 1234.5f) std::puts("");  // keeps the reads of g
}

}  // namespace

// The same passes with 512-bit vectors (probes_avx512.cpp, compiled for AVX-512F: call them only
// where the CPU has it).
double read_gbs_avx512(const std::vector<float*>& src, long n, int streams, int max_streams);
double write_gbs_avx512(float* dst, long n);
double copy_gbs_avx512(const float* src, float* dst, long n);
double update_gbs_avx512(float* a, long n);
void widen_pass_avx512(const uint8_t* in, void* out, long n, int out_bytes);
void adam8_pass_avx512(float* p, const float* g, float* s1, float* s2, long n);

}  // namespace kbit_bench
