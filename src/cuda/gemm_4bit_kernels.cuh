// gemm_4bit_kernels.cuh — the two kernel bodies of the 4-bit GEMM (skinny and tiled, described in
// gemm_4bit.cu), as device functions over one CTA's output tile, so that gemm_4bit.cu's kernels and the
// grouped GEMM's (gemm_4bit_grouped.cu), which run them once per expert, perform the same operations in
// the same order for every output: the grouped call equals the per-expert loop byte for byte.
#pragma once

#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "gemm_4bit_choice.h"

namespace kbit::cuda {

// Block scale of weight element `flat` (counted from the first element of W): plain or bitsandbytes'
// nested (second-level blocksize 256) form, the latter as two rounded fp32 operations like
// kbit_nested_absmax_dequantize. `flat0` is the element index of W's first element in the tensor the
// scales describe (0 for a whole tensor; e*N*K for expert e of a grouped weight).
struct Scales {
    const float* absmax;
    const uint8_t* qabsmax;
    const float* code;
    int log2_block;
    int64_t flat0;
    __device__ __forceinline__ float at(int64_t flat, float offset) const {
        const int64_t b = (flat0 + flat) >> log2_block;
        if (qabsmax == nullptr) return __ldg(absmax + b);
        return __fadd_rn(__fmul_rn(__ldg(code + qabsmax[b]), __ldg(absmax + (b >> 8))), offset);
    }
};

struct WeightArgs {
    const uint8_t* W;
    int64_t row_bytes;
    int64_t row_elems;
    Scales scales;
    const float* offset;  // nested offset (device), or NULL
    const float* lut;     // device table, or NULL for `builtin`
    Lut16 builtin;
};

// Weight element (r, k) is nibble r * row_elems + k of W, whose rows are row_elems / 2 bytes apart;
// its scale is absmax[flat / blocksize] or, when qabsmax != NULL, code[qabsmax[b]] * absmax[b / 256]
// + *offset, with flat = flat0 + r * row_elems + k. The table is `lut` (16 device floats) or, when NULL,
// the built-in table of `type`.
inline WeightArgs weights(const uint8_t* W, int64_t row_elems, const float* absmax, const uint8_t* qabsmax,
                          const float* code, const float* offset, const float* lut, QuantType type, int64_t blocksize,
                          int64_t flat0 = 0) {
    return WeightArgs{W, row_elems / 2, row_elems, Scales{absmax, qabsmax, code, log2_of(blocksize), flat0},
                      qabsmax != nullptr ? offset : nullptr, lut, builtin_lut(type)};
}

// Where output row m goes: row m of `out`, or row rows[m] when the caller scatters (the grouped GEMM).
template <class T>
struct OutRows {
    T* out;
    const int32_t* rows;
    __device__ __forceinline__ T* row(int m, int N) const { return out + int64_t{rows != nullptr ? rows[m] : m} * N; }
};

__device__ __forceinline__ void load_lut(float* s_lut, const WeightArgs& w) {
    if (threadIdx.x < 16) s_lut[threadIdx.x] = w.lut != nullptr ? __ldg(w.lut + threadIdx.x) : w.builtin.v[threadIdx.x];
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
    return v;
}

// Skinny body (M <= MT <= 4 rows; K, the row stride multiples of 32; A and W 16-byte aligned): the CTA owns
// weight rows n0 .. n0 + 3; each thread takes 32-element chunks (16 bytes of weights per row, one 128-bit
// load, one block scale since blocksize >= 32), decodes nibbles through a 16-entry table in shared memory
// and accumulates sum_k A*lut per chunk, scaled once per chunk. The activation chunk is loaded once for
// the CTA's 4 rows. Partial sums are reduced per warp, then across warps. Row m's sums do not depend on
// MT or M.
template <class T, int MT>
__device__ __forceinline__ void skinny_tile(const T* __restrict__ A, int M, int K, int N, const WeightArgs& w,
                                            const T* __restrict__ bias, OutRows<T> out, int n0) {
    constexpr int R = kSkinnyRows;
    __shared__ float s_lut[16];
    __shared__ float s_part[kSkinnyMaxThreads / 32][MT][R];
    load_lut(s_lut, w);
    __syncthreads();
    const float offset = w.offset != nullptr ? __ldg(w.offset) : 0.0f;
    const int chunks = K / 32;

    float tot[MT][R];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int r = 0; r < R; ++r) tot[m][r] = 0.0f;

    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        uint4 wq[R];
        float s[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int n = n0 + r;
            if (n < N) {
                wq[r] = load16(w.W + n * w.row_bytes + int64_t{c} * 16);
                s[r] = w.scales.at(n * w.row_elems + int64_t{c} * 32, offset);
            } else {
                wq[r] = make_uint4(0, 0, 0, 0);
                s[r] = 0.0f;
            }
        }
        float acc[MT][R];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[m][r] = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // 8 elements per 32-bit word of the chunk
            float a[MT][8];
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                if (m < M) {
                    load8_vec(A + int64_t{m} * K + int64_t{c} * 32 + 8 * j, a[m]);
                } else {
#pragma unroll
                    for (int e = 0; e < 8; ++e) a[m][e] = 0.0f;
                }
            }
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const uint32_t word = j == 0 ? wq[r].x : j == 1 ? wq[r].y : j == 2 ? wq[r].z : wq[r].w;
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    // element 2b of byte b is its high nibble
                    const float l = s_lut[(word >> (8 * (e >> 1) + ((e & 1) ? 0 : 4))) & 0xFu];
#pragma unroll
                    for (int m = 0; m < MT; ++m) acc[m][r] = fmaf(a[m][e], l, acc[m][r]);
                }
            }
        }
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int r = 0; r < R; ++r) tot[m][r] = fmaf(acc[m][r], s[r], tot[m][r]);
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float v = warp_sum(tot[m][r]);
            if (lane == 0) s_part[warp][m][r] = v;
        }
    __syncthreads();
    if (threadIdx.x < MT * R) {
        const int m = threadIdx.x / R, r = threadIdx.x % R, n = n0 + r;
        if (m < M && n < N) {
            float sum = 0.0f;
            for (int wi = 0; wi < static_cast<int>(blockDim.x / 32); ++wi) sum += s_part[wi][m][r];
            if (bias != nullptr) sum += Dev<T>::load(bias[n]);
            out.row(m, N)[n] = Dev<T>::store(sum);
        }
    }
}

constexpr int kTile = 64, kTileK = 16, kTiledThreads = 256;

// Tiled body (any M, K, alignment): 64x64 output tiles (columns n0 .. n0 + 63, row tiles mt = mt0,
// mt0 + mt_step, ...), A and the dequantized weights staged through shared memory in fp32, 4x4 outputs
// per thread, one fused multiply-add per k in order.
template <class T>
__device__ __forceinline__ void tiled_tiles(const T* __restrict__ A, int M, int K, int N, const WeightArgs& w,
                                            const T* __restrict__ bias, OutRows<T> out, int n0, int mt0, int mt_step) {
    __shared__ float s_lut[16];
    __shared__ __align__(16) float As[kTileK][kTile + 4];
    __shared__ __align__(16) float Ws[kTileK][kTile + 4];
    load_lut(s_lut, w);
    __syncthreads();
    const float offset = w.offset != nullptr ? __ldg(w.offset) : 0.0f;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int m_tiles = (M + kTile - 1) / kTile;

    for (int mt = mt0; mt < m_tiles; mt += mt_step) {
        const int m0 = mt * kTile;
        float acc[4][4] = {};
        for (int k0 = 0; k0 < K; k0 += kTileK) {
#pragma unroll
            for (int i = 0; i < kTile * kTileK / kTiledThreads; ++i) {
                const int e = threadIdx.x + i * kTiledThreads;
                const int kk = e % kTileK, rr = e / kTileK;
                const int k = k0 + kk;
                const int m = m0 + rr, n = n0 + rr;
                As[kk][rr] = (m < M && k < K) ? Dev<T>::load(A[int64_t{m} * K + k]) : 0.0f;
                float wv = 0.0f;
                if (n < N && k < K) {
                    const uint8_t byte = w.W[n * w.row_bytes + (k >> 1)];
                    const uint8_t nib = (k & 1) ? (byte & 0xFu) : (byte >> 4);
                    wv = s_lut[nib] * w.scales.at(n * w.row_elems + k, offset);
                }
                Ws[kk][rr] = wv;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < kTileK; ++kk) {
                const float4 a = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
                const float4 b = *reinterpret_cast<const float4*>(&Ws[kk][tx * 4]);
                const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
                if (m < M && n < N) {
                    float v = acc[i][j];
                    if (bias != nullptr) v += Dev<T>::load(bias[n]);
                    out.row(m, N)[n] = Dev<T>::store(v);
                }
            }
    }
}

}  // namespace kbit::cuda
