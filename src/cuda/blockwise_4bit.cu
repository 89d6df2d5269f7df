// 4-bit NF4/FP4 blockwise quantization and dequantization (bitsandbytes' kQuantizeBlockwise /
// kDequantizeBlockwise for 4-bit): kbit::ops::quantize_4bit and dequantize_4bit (kbit_ops_4bit.h),
// bit-identical to the CPU backend: indices from the shared format rules of kbit_formats.h, IEEE
// fp32 arithmetic (this file is compiled with --fmad=false). The bitsandbytes-named quantizers have
// no stream parameter and run on the legacy default stream (stream = NULL), as bitsandbytes does.
#include "blockwise_kernel.cuh"
#include "cuda_check.h"
#include "instantiate.h"
#include "kbit_ops_4bit.h"

namespace kbit::cuda {
namespace {

template <QuantType Q>
struct Coder4 {
    struct Params {};
    struct Shared {};
    __device__ static void setup(Shared&, const Params&) {}
    __device__ static uint8_t code(float y) {
        if constexpr (Q == QuantType::NF4) return nf4_index(y);
        else return fp4_index(y);
    }
    // Elements 2j, 2j+1 go to the high and low nibble of byte j; four bytes per chunk of 8.
    __device__ static void store(uint8_t* out, int64_t i0, int64_t n, bool vec, const float (&v)[kQuantVec],
                                 float r, const Shared&) {
        uint32_t word = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b)
            word |= uint32_t{pack_nibbles(code(__fmul_rn(v[2 * b], r)), code(__fmul_rn(v[2 * b + 1], r)))} << (8 * b);
        const int64_t j0 = i0 >> 1, bytes = (n + 1) >> 1;
        if (vec && j0 + 4 <= bytes) {
            *reinterpret_cast<uint32_t*>(out + j0) = word;
            return;
        }
#pragma unroll
        for (int b = 0; b < 4; ++b)
            if (j0 + b < bytes) out[j0 + b] = static_cast<uint8_t>(word >> (8 * b));
    }
};

// Each thread expands 16 packed bytes (32 elements, one block scale since blocksize >= 32) with
// one 16-byte load and 16-byte stores.
template <class T>
__global__ void __launch_bounds__(256)
dequantize_4bit_kernel(const uint8_t* __restrict__ A, const float* __restrict__ absmax, T* __restrict__ out,
                       int64_t n, int log2_block, bool vec, Lut16 lut) {
    __shared__ float s_lut[16];
    if (threadIdx.x < 16) s_lut[threadIdx.x] = lut.v[threadIdx.x];
    __syncthreads();
    const int64_t chunks = (n + 31) / 32;
    for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < chunks; c += int64_t{gridDim.x} * blockDim.x) {
        const int64_t i0 = c * 32;
        const float s = __ldg(absmax + (i0 >> log2_block));
        if (vec && i0 + 32 <= n) {
            const uint4 q = load16(A + (i0 >> 1));
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int part = 0; part < 4; ++part) {
                T o[8];
#pragma unroll
                for (int b = 0; b < 4; ++b) {
                    const uint32_t byte = (w[part] >> (8 * b)) & 0xFFu;
                    o[2 * b] = Dev<T>::store(mul_rn(s_lut[byte >> 4], s));
                    o[2 * b + 1] = Dev<T>::store(mul_rn(s_lut[byte & 0xFu], s));
                }
                store8(out, i0 + 8 * part, n, true, o);
            }
        } else {
            for (int e = 0; e < 32; ++e) {
                const int64_t i = i0 + e;
                if (i >= n) break;
                const uint8_t byte = A[i >> 1];
                const uint8_t nib = (i & 1) ? (byte & 0xFu) : (byte >> 4);
                out[i] = Dev<T>::store(mul_rn(s_lut[nib], s));
            }
        }
    }
}

Lut16 builtin_lut(QuantType type) {
    static constexpr Lut16 nf4{{KBIT_NF4_VALUES}};
    static constexpr Lut16 fp4{{KBIT_FP4_VALUES}};
    return type == QuantType::NF4 ? nf4 : fp4;
}

template <class T>
kbit_status quantize_t(const char* fn, QuantType type, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                       int64_t n, cudaStream_t stream) {
    const int log2b = log2_of(blocksize);
    const int64_t tile = blocksize > kQuantThreads * kQuantVec ? blocksize : kQuantThreads * kQuantVec;
    const unsigned grid = grid_for((n + tile - 1) / tile);
    const bool vec = host_aligned(A, 16) && host_aligned(out, 4);
    if (type == QuantType::NF4)
        quantize_blockwise_kernel<T, Coder4<QuantType::NF4>>
            <<<grid, kQuantThreads, 0, stream>>>(A, absmax, out, n, log2b, vec, nullptr, {});
    else
        quantize_blockwise_kernel<T, Coder4<QuantType::FP4>>
            <<<grid, kQuantThreads, 0, stream>>>(A, absmax, out, n, log2b, vec, nullptr, {});
    return check_launch(fn, "quantize_blockwise_kernel (4-bit)");
}

template <class T>
kbit_status dequantize_t(const char* fn, QuantType type, const uint8_t* A, const float* absmax, T* out,
                         int64_t blocksize, int64_t n, cudaStream_t stream) {
    const unsigned grid = grid_for(((n + 31) / 32 + 255) / 256);
    const bool vec = host_aligned(A, 16) && host_aligned(out, 16);
    dequantize_4bit_kernel<T><<<grid, 256, 0, stream>>>(A, absmax, out, n, log2_of(blocksize), vec, builtin_lut(type));
    return check_launch(fn, "dequantize_4bit_kernel");
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status quantize_4bit(const char* fn, QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void* stream) {
    return cuda::quantize_t(fn, qt, A, absmax, out, blocksize, n, cuda::to_stream(stream));
}

template <class T>
kbit_status dequantize_4bit(const char* fn, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return cuda::dequantize_t(fn, qt, A, absmax, out, blocksize, n, cuda::to_stream(stream));
}

KBIT_CUDA_INSTANTIATE(quantize_4bit);
KBIT_CUDA_INSTANTIATE(dequantize_4bit);

}  // namespace kbit::ops
