// blockwise_kernel.cuh — the kernels and launches shared by the blockwise quantizers and dequantizers
// of blockwise_4bit.cu and blockwise_8bit.cu, which differ only in their code policies (Coder: how a
// value is coded and stored; Decoder: the table a code is looked up in).
//
// Quantization. A CTA of 256 threads takes a tile of consecutive elements; each thread loads 8 of
// them per chunk with 16-byte loads (one chunk, or two for blocksize 4096) and keeps them in
// registers. The absmax of a quantization block is the shared rule of kbit_formats.h (absmax_fold
// from absmax_start): each thread folds its values from -FLT_MAX, elements past n counting as 0 (so a
// partial last block, which always holds such padding, ends >= 0 exactly as absmax_start's 0 makes
// it), and the `group` = blocksize / 8 threads that hold a block combine their folds by max (warp
// shuffles, then shared memory for groups above a warp). Folds never yield NaN and max is exact, so
// the order is free. Every element is then coded from x * (1.0f / absmax) (IEEE division and product:
// this file's users are compiled with --fmad=false and use __fdiv_rn / __fmul_rn) by the Coder
// policy, which also stores the codes.
//
// Dequantization. Each thread expands one 16-byte chunk of codes (one 16-byte load; 32 elements of
// 4 bits or 16 of 8, one block scale since blocksize >= 32) into table value * scale (IEEE product)
// with 16-byte stores.
//
// The launchers report a failed launch as "fn: <kernel>: ..." (check_launch), `kernel` being the
// label the caller passes.
#pragma once

#include <cfloat>

#include "cuda_check.h"
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
//   kStoreAlign                                      alignment of `out` that store's vector store needs
//   struct Params; struct Shared;                    kernel argument and shared-memory state
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

// Launches quantize_blockwise_kernel: one tile (kQuantThreads * kQuantVec elements, or one block if
// larger) per CTA and grid-stride step; `vec` when A is 16-byte aligned and out aligned for the
// Coder's vector store (Coder::kStoreAlign bytes). center: NULL, or a device value subtracted first.
template <class T, class Coder>
kbit_status launch_quantize_blockwise(const char* fn, const char* kernel, const T* A, const float* center,
                                      float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                                      typename Coder::Params params, cudaStream_t stream) {
    const int64_t tile = blocksize > kQuantThreads * kQuantVec ? blocksize : kQuantThreads * kQuantVec;
    const unsigned grid = grid_for((n + tile - 1) / tile);
    const bool vec = host_aligned(A, 16) && host_aligned(out, Coder::kStoreAlign);
    quantize_blockwise_kernel<T, Coder>
        <<<grid, kQuantThreads, 0, stream>>>(A, absmax, out, n, log2_of(blocksize), vec, center, params);
    return check_launch(fn, kernel);
}

// Decoder interface:
//   kLog2CodesPerByte                                0 (8-bit codes) or 1 (two 4-bit codes a byte)
//   struct Params; struct Shared;                    the table, passed and in shared memory
//   static void setup(Shared&, const Params&)        called once per CTA by all threads (syncs)
//   static float value(const Shared&, const uint32_t (&w)[4], int j)
//                                                    table value of code j of the 16 bytes w
//   static float value_at(const Shared&, const uint8_t* A, int64_t i)
//                                                    table value of code i of A
template <class Decoder>
constexpr int kDequantChunk = 16 << Decoder::kLog2CodesPerByte;  // codes per thread and chunk

template <class T, class Decoder>
__global__ void __launch_bounds__(256)
dequantize_blockwise_kernel(const uint8_t* __restrict__ A, const float* __restrict__ absmax, T* __restrict__ out,
                            int64_t n, int log2_block, bool vec, typename Decoder::Params params) {
    constexpr int kChunk = kDequantChunk<Decoder>;
    __shared__ typename Decoder::Shared shared;
    Decoder::setup(shared, params);
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < chunks; c += int64_t{gridDim.x} * blockDim.x) {
        const int64_t i0 = c * kChunk;
        const float s = __ldg(absmax + (i0 >> log2_block));
        if (vec && i0 + kChunk <= n) {
            const uint4 q = load16(A + (i0 >> Decoder::kLog2CodesPerByte));
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int part = 0; part < kChunk / 8; ++part) {
                T o[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) o[e] = Dev<T>::store(mul_rn(Decoder::value(shared, w, 8 * part + e), s));
                store8(out, i0 + 8 * part, n, true, o);
            }
        } else {
            for (int e = 0; e < kChunk; ++e) {
                const int64_t i = i0 + e;
                if (i >= n) break;
                out[i] = Dev<T>::store(mul_rn(Decoder::value_at(shared, A, i), s));
            }
        }
    }
}

// Launches dequantize_blockwise_kernel: 256 threads a CTA, one chunk per thread and grid-stride step;
// `vec` when A and out are 16-byte aligned.
template <class T, class Decoder>
kbit_status launch_dequantize_blockwise(const char* fn, const char* kernel, const uint8_t* A, const float* absmax,
                                        T* out, int64_t blocksize, int64_t n, typename Decoder::Params params,
                                        cudaStream_t stream) {
    constexpr int kChunk = kDequantChunk<Decoder>;
    const unsigned grid = grid_for(((n + kChunk - 1) / kChunk + 255) / 256);
    const bool vec = host_aligned(A, 16) && host_aligned(out, 16);
    dequantize_blockwise_kernel<T, Decoder>
        <<<grid, 256, 0, stream>>>(A, absmax, out, n, log2_of(blocksize), vec, params);
    return check_launch(fn, kernel);
}

}  // namespace kbit::cuda
