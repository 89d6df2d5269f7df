// blockwise_kernel.cuh — the skeleton shared by the blockwise quantizers (4-bit and 8-bit).
//
// A CTA of 256 threads takes a tile of consecutive elements; each thread loads 8 of them per chunk
// with 16-byte loads (one chunk, or two for blocksize 4096) and keeps them in registers. The absmax
// of a quantization block is the shared rule of kbit_formats.h (absmax_fold from absmax_start): each
// thread folds its values from -FLT_MAX, elements past n counting as 0 (so a partial last block,
// which always holds such padding, ends >= 0 exactly as absmax_start's 0 makes it), and the `group`
// = blocksize / 8 threads that hold a block combine their folds by max (warp shuffles, then shared
// memory for groups above a warp). Folds never yield NaN and max is exact, so the order is free.
// Every element is then coded from x * (1.0f / absmax) (IEEE division and
// product: this file's users are compiled with --fmad=false and use __fdiv_rn / __fmul_rn) by the
// Coder policy, which also stores the codes.
#pragma once

#include <cfloat>

#include "cuda_elem.cuh"

namespace kbit::cuda {

constexpr int kQuantThreads = 256;
constexpr int kQuantVec = 8;  // elements per thread and chunk

// Max of v (never NaN) over aligned groups of `group` threads (a power of two, <= kQuantThreads,
// uniform in the CTA). Uses `scratch` (kQuantThreads / 32 floats) when a group spans several warps.
__device__ __forceinline__ float group_max(float v, int group, float* scratch) {
    for (int off = (group < 32 ? group : 32) / 2; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
    if (group > 32) {
        const int warp = threadIdx.x / 32;
        __syncthreads();  // the previous tile's readers are done with scratch
        if (threadIdx.x % 32 == 0) scratch[warp] = v;
        __syncthreads();
        const int per_group = group / 32;
        const int first = warp / per_group * per_group;
        v = scratch[first];
        for (int w = 1; w < per_group; ++w) v = fmaxf(v, scratch[first + w]);
    }
    return v;
}

// Coder interface:
//   struct Shared;                                   shared-memory state
//   static void setup(Shared&, const Params&);       called once per CTA by all threads (syncs)
//   static void store(uint8_t* out, int64_t i0, int64_t n, bool vec, const float (&v)[8], float r,
//                     const Shared&);                codes v[e] * r and stores the codes of [i0, i0+8)
template <class T, class Coder>
__global__ void __launch_bounds__(kQuantThreads)
quantize_blockwise_kernel(const T* __restrict__ A, float* __restrict__ absmax, uint8_t* __restrict__ out,
                          int64_t n, int log2_block, bool vec, const float* __restrict__ center,
                          typename Coder::Params params) {
    __shared__ typename Coder::Shared shared;
    __shared__ float scratch[kQuantThreads / 32];
    Coder::setup(shared, params);

    const int block = 1 << log2_block;
    const int group = block / kQuantVec < kQuantThreads ? block / kQuantVec : kQuantThreads;
    const int chunks = block > kQuantThreads * kQuantVec ? block / (kQuantThreads * kQuantVec) : 1;
    const int64_t tile = int64_t{kQuantThreads} * kQuantVec * chunks;
    const int64_t tiles = (n + tile - 1) / tile;
    const float shift = center != nullptr ? *center : 0.0f;

    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        float v[2][kQuantVec];
        float amax = -FLT_MAX;  // absmax_start of a full block; see above for partial blocks
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            if (c >= chunks) break;
            const int64_t i0 = t * tile + (int64_t{c} * kQuantThreads + threadIdx.x) * kQuantVec;
            load8(A, i0, n, vec, v[c]);
            if (center != nullptr) {
#pragma unroll
                for (int e = 0; e < kQuantVec; ++e)
                    if (i0 + e < n) v[c][e] = __fsub_rn(v[c][e], shift);
            }
#pragma unroll
            for (int e = 0; e < kQuantVec; ++e) amax = absmax_fold(amax, v[c][e]);
        }
        amax = group_max(amax, group, scratch);
        const float r = __fdiv_rn(1.0f, amax);
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            if (c >= chunks) break;
            const int64_t i0 = t * tile + (int64_t{c} * kQuantThreads + threadIdx.x) * kQuantVec;
            if (c == 0 && threadIdx.x % group == 0 && i0 < n) absmax[i0 >> log2_block] = amax;
            Coder::store(out, i0, n, vec, v[c], r, shared);
        }
    }
}

}  // namespace kbit::cuda
