// 4-bit GEMV / GEMM: kbit::ops::gemv_4bit (bitsandbytes' cgemm_4bit_inference_naive_*: M = 1, the
// caller's LUT) and gemm_4bit (cgemm_4bit_*: M rows, built-in NF4/FP4 table, optional nested absmax
// and bias), on the caller's stream. fp32 accumulation in an order of this backend's choosing (class
// F: tolerance-equal to the CPU backend).
//
// Two kernels:
//  - skinny (M <= 4, K and the row stride multiples of 32, 16-byte aligned A and W): a CTA owns 4
//    weight rows; each thread takes 32-element chunks (16 bytes of weights per row, one 128-bit
//    load, one block scale since blocksize >= 32), decodes nibbles through a 16-entry table in
//    shared memory and accumulates sum_k A*lut per chunk, scaled once per chunk. The activation
//    chunk is loaded once for the CTA's 4 rows. Partial sums are reduced per warp, then across warps.
//  - tiled (everything else: any M, K, alignment): 64x64 output tiles, A and the dequantized weights
//    staged through shared memory in fp32, 4x4 outputs per thread.
#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "kbit_dtype.h"
#include "kbit_ops_4bit.h"

namespace kbit::cuda {
namespace {

// Block scale of flat weight element `flat`: plain or bitsandbytes' nested (second-level blocksize
// 256) form, the latter as two rounded fp32 operations like kbit_nested_absmax_dequantize.
struct Scales {
    const float* absmax;
    const uint8_t* qabsmax;
    const float* code;
    int log2_block;
    __device__ __forceinline__ float at(int64_t flat, float offset) const {
        const int64_t b = flat >> log2_block;
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

__device__ __forceinline__ void load_lut(float* s_lut, const WeightArgs& w) {
    if (threadIdx.x < 16) s_lut[threadIdx.x] = w.lut != nullptr ? __ldg(w.lut + threadIdx.x) : w.builtin.v[threadIdx.x];
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
    return v;
}

constexpr int kSkinnyRows = 4;
constexpr int kSkinnyMaxThreads = 128;

template <class T, int MT>
__global__ void __launch_bounds__(kSkinnyMaxThreads)
gemm_4bit_skinny_kernel(const T* __restrict__ A, int M, int K, int N, WeightArgs w, const T* __restrict__ bias,
                        T* __restrict__ out) {
    constexpr int R = kSkinnyRows;
    __shared__ float s_lut[16];
    __shared__ float s_part[kSkinnyMaxThreads / 32][MT][R];
    load_lut(s_lut, w);
    __syncthreads();
    const float offset = w.offset != nullptr ? __ldg(w.offset) : 0.0f;
    const int n0 = blockIdx.x * R;
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
            out[int64_t{m} * N + n] = Dev<T>::store(sum);
        }
    }
}

constexpr int kTile = 64, kTileK = 16, kTiledThreads = 256;

template <class T>
__global__ void __launch_bounds__(kTiledThreads)
gemm_4bit_tiled_kernel(const T* __restrict__ A, int M, int K, int N, WeightArgs w, const T* __restrict__ bias,
                       T* __restrict__ out) {
    __shared__ float s_lut[16];
    __shared__ __align__(16) float As[kTileK][kTile + 4];
    __shared__ __align__(16) float Ws[kTileK][kTile + 4];
    load_lut(s_lut, w);
    __syncthreads();
    const float offset = w.offset != nullptr ? __ldg(w.offset) : 0.0f;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int n0 = blockIdx.x * kTile;
    const int m_tiles = (M + kTile - 1) / kTile;

    for (int mt = blockIdx.y; mt < m_tiles; mt += gridDim.y) {
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
                    out[int64_t{m} * N + n] = Dev<T>::store(v);
                }
            }
    }
}

// out[m][r] = sum_k A[m][k] * W[r][k] (+ bias[r]) for m < M, r < N; W as `w` describes it.
template <class T>
kbit_status run(const char* fn, const T* A, const WeightArgs& w, const T* bias, T* out, int M, int N, int K,
                cudaStream_t stream) {
    const bool skinny = M <= 4 && K % 32 == 0 && w.row_elems % 32 == 0 && host_aligned(A, 16) && host_aligned(w.W, 16);
    if (skinny) {
        const int chunks = K / 32;
        int threads = (chunks + 31) / 32 * 32;  // whole warps, one chunk per thread and step
        threads = threads < 32 ? 32 : (threads > kSkinnyMaxThreads ? kSkinnyMaxThreads : threads);
        const unsigned grid = static_cast<unsigned>((int64_t{N} + kSkinnyRows - 1) / kSkinnyRows);
        if (M == 1)
            gemm_4bit_skinny_kernel<T, 1><<<grid, threads, 0, stream>>>(A, M, K, N, w, bias, out);
        else
            gemm_4bit_skinny_kernel<T, 4><<<grid, threads, 0, stream>>>(A, M, K, N, w, bias, out);
        return check_launch(fn, "gemm_4bit_skinny_kernel");
    }
    const unsigned nt = static_cast<unsigned>((int64_t{N} + kTile - 1) / kTile);
    const int64_t mt = (int64_t{M} + kTile - 1) / kTile;
    const dim3 grid(nt, static_cast<unsigned>(mt < 65535 ? mt : 65535));
    gemm_4bit_tiled_kernel<T><<<grid, kTiledThreads, 0, stream>>>(A, M, K, N, w, bias, out);
    return check_launch(fn, "gemm_4bit_tiled_kernel");
}

// Weight element (r, k) is nibble r * row_elems + k of W, whose rows are row_elems / 2 bytes apart;
// its scale is absmax[flat / blocksize] or, when qabsmax != NULL, code[qabsmax[b]] * absmax[b / 256]
// + *offset. The table is `lut` (16 device floats) or, when NULL, the built-in table of `type`.
WeightArgs weights(const uint8_t* W, int64_t row_elems, const float* absmax, const uint8_t* qabsmax,
                   const float* code, const float* offset, const float* lut, QuantType type, int64_t blocksize) {
    return WeightArgs{W, row_elems / 2, row_elems, Scales{absmax, qabsmax, code, log2_of(blocksize)},
                      qabsmax != nullptr ? offset : nullptr, lut, builtin_lut(type)};
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

// bitsandbytes' GEMV is the M = 1 GEMM over rows of ldb bytes with the caller's code table.
template <class T>
kbit_status gemv_4bit(const char* fn, int m, int k, const T* A, const uint8_t* B, const float* absmax,
                      const float* datatype, T* out, int ldb, int blocksize, void* stream) {
    const cuda::WeightArgs w =
        cuda::weights(B, 2 * int64_t{ldb}, absmax, nullptr, nullptr, nullptr, datatype, QuantType::NF4, blocksize);
    return cuda::run<T>(fn, A, w, nullptr, out, 1, m, k, cuda::to_stream(stream));
}

template <class T>
kbit_status gemm_4bit(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                      const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
                      int blocksize, QuantType qt, void* stream) {
    const cuda::WeightArgs w =
        cuda::weights(B, K, absmax, absmax_8bit, absmax_code, absmax_offset, nullptr, qt, blocksize);
    return cuda::run<T>(fn, A, w, bias, out, M, N, K, cuda::to_stream(stream));
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemv_4bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit);

}  // namespace kbit::ops
