// 32-bit-state optimizers (bitsandbytes' c{adam,ademamix,lion,momentum,rmsprop,adagrad}32bit_grad_*):
// kbit::ops::optim32 (kbit_ops_optim8.h). Like bitsandbytes' optimizer functions, which have no stream
// parameter, it runs on the legacy default stream. Every element goes through optim::step32 and
// optim::norm_term32 of kbit_optim_math.h, compiled with --fmad=false and IEEE division and square
// root, so each value equals the CPU backend's bit for bit (NaN payloads aside: the header leaves them
// unspecified, and the GPU returns its canonical NaN).
//
// Call order, as the header prescribes (ref::run32):
//   constants: optim::make_consts on the host (binary64 powers as on the CPU);
//   clipping (max_unorm > 0, not AdEMAMix): norm_chunk_kernel sums norm_term32 per 4096-element chunk
//     in 16 interleaved lanes folded by optim::fold_lanes; finish_kernel reduces the chunk sums level
//     by level exactly as optim::tree_sum (optim_rules.h), stores *unorm and the clip factor
//     (optim::set_clip); Lion instead clips with the *unorm it is given and stores the norm of its
//     updated state afterwards;
//   update32_kernel: optim::step32 on every element, the clip factor read from device memory.
#include <cfloat>

#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "kbit_dtype.h"
#include "kbit_ops_optim8.h"
#include "optim_dispatch.h"
#include "optim_lanes.h"

namespace kbit::cuda {
namespace {

using optim::Consts;
using optim::Kind;

constexpr int kThreads = 256;
constexpr int kChunksPerCta = kThreads / optim::kNormLanes;
constexpr int kTreeThreads = 1024;

// Memory of a call: g, p (n elements); s1 n floats (AdEMAMix 2n); s2 n floats or NULL (1-state);
// unorm one float (read and/or written when max_unorm > 0).
template <class T>
struct Args32 {
    const T* g;
    T* p;
    float* s1;
    float* s2;
    float* unorm;
    float max_unorm, param_norm;
    int64_t n;
};

// Thread (chunk, lane) computes norm_lane_sum (optim_lanes.h); lane 0 folds the chunk's 16 sums.
template <class T, Kind K>
__global__ void __launch_bounds__(kThreads)
norm_chunk_kernel(Consts c, const T* __restrict__ g, const float* __restrict__ s1, const float* __restrict__ s2,
                  int64_t n, int64_t chunks, float* __restrict__ sums) {
    __shared__ float acc[kThreads];
    const int lane = threadIdx.x % optim::kNormLanes;
    const int64_t chunk = int64_t{blockIdx.x} * kChunksPerCta + threadIdx.x / optim::kNormLanes;
    acc[threadIdx.x] = chunk < chunks ? norm_lane_sum<T, K>(c, g, s1, s2, n, chunk, lane) : 0.0f;
    __syncthreads();
    if (lane == 0 && chunk < chunks) sums[chunk] = optim::fold_lanes(acc + threadIdx.x);
}

enum class Finish { StoreAndClip, ClipFromUnorm, StoreOnly };

// One CTA. StoreAndClip / StoreOnly: the tree sum of sums[0, count) (bufs: two scratch arrays of
// count / 2 + 1 floats), stored to *unorm; StoreAndClip / ClipFromUnorm: the clip factor from that
// sum (or from *unorm), clip[0] = u, clip[1] = su.
__global__ void __launch_bounds__(kTreeThreads)
finish_kernel(Finish mode, const float* __restrict__ sums, float* __restrict__ buf0, float* __restrict__ buf1,
              int64_t count, Consts c, float max_unorm, float param_norm, bool one_state, float* __restrict__ unorm,
              float* __restrict__ clip) {
    float total = 0.0f;
    if (mode == Finish::ClipFromUnorm) {
        total = *unorm;
    } else {
        const float* src = sums;
        float* dst = buf0;
        while (count > 1) {
            const int64_t next = tree_level_count(count);
            for (int64_t i = threadIdx.x; i < next; i += kTreeThreads) dst[i] = tree_level_value(src, count, i);
            __syncthreads();  // the level is complete (and visible) before the next one reads it
            src = dst;
            dst = dst == buf0 ? buf1 : buf0;
            count = next;
        }
        total = src[0];
    }
    if (threadIdx.x != 0) return;
    if (mode != Finish::ClipFromUnorm) *unorm = total;
    if (mode != Finish::StoreOnly) {
        optim::set_clip(c, total, max_unorm, param_norm, one_state);
        clip[0] = c.u;
        clip[1] = c.su;
    }
}

template <class T, Kind K>
__global__ void __launch_bounds__(kThreads)
update32_kernel(Consts c, const float* __restrict__ clip, const T* __restrict__ g, T* __restrict__ p,
                float* __restrict__ s1, float* __restrict__ s2, int64_t n) {
    if (clip != nullptr) {
        c.u = clip[0];
        c.su = clip[1];
    }
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        float pv = Elem<T>::load(p[i]), a = s1[i];
        float b = optim::two_state(K) ? s2[i] : 0.0f;
        float m2 = K == Kind::AdEMAMix ? s1[n + i] : 0.0f;
        optim::step32<T, K>(c, Elem<T>::load(g[i]), pv, a, b, m2);
        p[i] = Elem<T>::store(pv);
        s1[i] = a;
        if (optim::two_state(K)) s2[i] = b;
        if (K == Kind::AdEMAMix) s1[n + i] = m2;
    }
}

template <class T, Kind K>
kbit_status run(const char* fn, const optim::Hyper& h, const Args32<T>& m, cudaStream_t stream) {
    const Consts c = optim::make_consts(h);
    const bool clip = m.max_unorm > 0.0f && K != Kind::AdEMAMix;
    const T* g = m.g;
    T* p = m.p;
    const unsigned update_grid = grid_for((m.n + kThreads - 1) / kThreads, 8);
    if (!clip) {
        update32_kernel<T, K><<<update_grid, kThreads, 0, stream>>>(c, nullptr, g, p, m.s1, m.s2, m.n);
        return check_launch(fn, "update32_kernel");
    }
    // Scratch: the chunk sums, two tree buffers, the clip factor (u, su).
    const int64_t chunks = (m.n + optim::kNormChunk - 1) / optim::kNormChunk;
    const int64_t half = chunks / 2 + 1;
    float* scratch = nullptr;
    KBIT_CUDA_TRY(fn, "cudaMallocAsync (update-norm scratch)",
                  cudaMallocAsync(reinterpret_cast<void**>(&scratch), (chunks + 2 * half + 2) * sizeof(float), stream));
    float* sums = scratch;
    float* buf0 = sums + chunks;
    float* buf1 = buf0 + half;
    float* factor = buf1 + half;
    const unsigned norm_grid = static_cast<unsigned>((chunks + kChunksPerCta - 1) / kChunksPerCta);
    auto norm = [&](Finish mode) {
        norm_chunk_kernel<T, K><<<norm_grid, kThreads, 0, stream>>>(c, g, m.s1, m.s2, m.n, chunks, sums);
        kbit_status st = check_launch(fn, "norm_chunk_kernel");
        if (st != KBIT_STATUS_SUCCESS) return st;
        finish_kernel<<<1, kTreeThreads, 0, stream>>>(mode, sums, buf0, buf1, chunks, c, m.max_unorm, m.param_norm,
                                                      !optim::two_state(K), m.unorm, factor);
        return check_launch(fn, "finish_kernel");
    };
    kbit_status st = KBIT_STATUS_SUCCESS;
    if (K == Kind::Lion) {
        finish_kernel<<<1, 1, 0, stream>>>(Finish::ClipFromUnorm, nullptr, nullptr, nullptr, 0, c, m.max_unorm,
                                           m.param_norm, true, m.unorm, factor);
        st = check_launch(fn, "finish_kernel");
    } else {
        st = norm(Finish::StoreAndClip);
    }
    if (st == KBIT_STATUS_SUCCESS) {
        update32_kernel<T, K><<<update_grid, kThreads, 0, stream>>>(c, factor, g, p, m.s1, m.s2, m.n);
        st = check_launch(fn, "update32_kernel");
    }
    if (st == KBIT_STATUS_SUCCESS && K == Kind::Lion) st = norm(Finish::StoreOnly);
    const cudaError_t freed = cudaFreeAsync(scratch, stream);
    if (st == KBIT_STATUS_SUCCESS && freed != cudaSuccess)
        return device_error(fn, "cudaFreeAsync (update-norm scratch)", freed);
    return st;
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status optim32(const char* fn, optim::Kind kind, const optim::Hyper& h, T* g, T* p, float* state1, float* state2,
                    float* unorm, float max_unorm, float param_norm, int64_t n) {
    const cuda::Args32<T> m{g, p, state1, state2, unorm, max_unorm, param_norm, n};
    return cuda::with_kind(kind, [&](auto k) { return cuda::run<T, decltype(k)::value>(fn, h, m, nullptr); });
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(optim32);

}  // namespace kbit::ops
