// Blockwise dynamic 8-bit quantization against the caller's 256-entry table and its dequantization
// (bitsandbytes' cquantize_blockwise_* / cdequantize_blockwise_*): kbit::ops::quantize_8bit and
// dequantize_8bit (kbit_ops_8bit.h), and the centred quantizer of blockwise_8bit.h, bit-identical to
// the CPU backend: the index rule is kbit::code8_index, evaluated through the shared-memory layout of
// code8_search.h; IEEE fp32 arithmetic (this file is compiled with --fmad=false). The
// bitsandbytes-named quantizer has no stream parameter and runs on the legacy default stream (stream =
// NULL), as bitsandbytes does.
#include "blockwise_8bit.h"
#include "blockwise_kernel.cuh"
#include "code8_search.h"
#include "cuda_check.h"
#include "instantiate.h"
#include "kbit_ops_8bit.h"

namespace kbit::cuda {
namespace {

static_assert(kQuantThreads == 256, "the table setup loads one entry per thread");

struct Coder8 {
    struct Params {
        const float* code;
    };
    struct Shared {
        float node[128];   // odd entries in breadth-first order (code8_search.h)
        float table[256];  // the table itself
    };
    __device__ static void setup(Shared& sh, const Params& p) {
        const int t = threadIdx.x;
        const float c = __ldg(p.code + t);
        sh.table[t] = c;
        const int e = code8_node_of(t);
        if (e != 0) sh.node[e] = c;
        __syncthreads();
    }
    __device__ static void store(uint8_t* out, int64_t i0, int64_t n, bool vec, const float (&v)[kQuantVec], float r,
                                 const Shared& sh) {
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            lo |= uint32_t{code8_index_bfs(sh.node, sh.table, __fmul_rn(v[e], r))} << (8 * e);
            hi |= uint32_t{code8_index_bfs(sh.node, sh.table, __fmul_rn(v[e + 4], r))} << (8 * e);
        }
        if (vec && i0 + 8 <= n) {
            *reinterpret_cast<uint2*>(out + i0) = make_uint2(lo, hi);
            return;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e)
            if (i0 + e < n) out[i0 + e] = static_cast<uint8_t>((e < 4 ? lo : hi) >> (8 * (e & 3)));
    }
};

// Each thread expands 16 codes (one 16-byte load, one block scale since blocksize >= 32).
template <class T>
__global__ void __launch_bounds__(256)
dequantize_8bit_kernel(const float* __restrict__ code, const uint8_t* __restrict__ A, const float* __restrict__ absmax,
                       T* __restrict__ out, int64_t n, int log2_block, bool vec) {
    __shared__ float table[256];
    table[threadIdx.x] = __ldg(code + threadIdx.x);
    __syncthreads();
    const int64_t chunks = (n + 15) / 16;
    for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < chunks; c += int64_t{gridDim.x} * blockDim.x) {
        const int64_t i0 = c * 16;
        const float s = __ldg(absmax + (i0 >> log2_block));
        if (vec && i0 + 16 <= n) {
            const uint4 q = load16(A + i0);
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                T o[8];
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    o[e] = Dev<T>::store(mul_rn(table[(w[2 * part + e / 4] >> (8 * (e % 4))) & 0xFFu], s));
                store8(out, i0 + 8 * part, n, true, o);
            }
        } else {
            for (int e = 0; e < 16; ++e) {
                const int64_t i = i0 + e;
                if (i >= n) break;
                out[i] = Dev<T>::store(mul_rn(table[A[i]], s));
            }
        }
    }
}

template <class T>
kbit_status quantize_t(const char* fn, const float* code, const T* A, const float* center, float* absmax,
                       uint8_t* out, int64_t blocksize, int64_t n, cudaStream_t stream) {
    const int64_t tile = blocksize > kQuantThreads * kQuantVec ? blocksize : kQuantThreads * kQuantVec;
    const unsigned grid = grid_for((n + tile - 1) / tile);
    const bool vec = host_aligned(A, 16) && host_aligned(out, 8);
    quantize_blockwise_kernel<T, Coder8><<<grid, kQuantThreads, 0, stream>>>(
        A, absmax, out, n, log2_of(blocksize), vec, center, Coder8::Params{code});
    return check_launch(fn, "quantize_blockwise_kernel (8-bit)");
}

template <class T>
kbit_status dequantize_t(const char* fn, const float* code, const uint8_t* A, const float* absmax, T* out,
                         int64_t blocksize, int64_t n, cudaStream_t stream) {
    const unsigned grid = grid_for(((n + 15) / 16 + 255) / 256);
    const bool vec = host_aligned(A, 16) && host_aligned(out, 16);
    dequantize_8bit_kernel<T><<<grid, 256, 0, stream>>>(code, A, absmax, out, n, log2_of(blocksize), vec);
    return check_launch(fn, "dequantize_8bit_kernel");
}

}  // namespace

kbit_status quantize_blockwise_8bit_centred(const char* fn, const float* code, const float* A, const float* center,
                                            float* absmax, uint8_t* out, int64_t blocksize, int64_t n, void* stream) {
    return quantize_t(fn, code, A, center, absmax, out, blocksize, n, to_stream(stream));
}

}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status quantize_8bit(const char* fn, const float* code, const T* A, float* absmax, uint8_t* out,
                          int64_t blocksize, int64_t n, void* stream) {
    return cuda::quantize_t(fn, code, A, nullptr, absmax, out, blocksize, n, cuda::to_stream(stream));
}

template <class T>
kbit_status dequantize_8bit(const char* fn, const float* code, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return cuda::dequantize_t(fn, code, A, absmax, out, blocksize, n, cuda::to_stream(stream));
}

KBIT_CUDA_INSTANTIATE(quantize_8bit);
KBIT_CUDA_INSTANTIATE(dequantize_8bit);

}  // namespace kbit::ops
