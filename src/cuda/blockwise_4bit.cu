// 4-bit NF4/FP4 blockwise quantization and dequantization (bitsandbytes' kQuantizeBlockwise /
// kDequantizeBlockwise for 4-bit): kbit::ops::quantize_4bit and dequantize_4bit (kbit_ops_4bit.h),
// bit-identical to the CPU backend: indices from the shared format rules of kbit_formats.h, IEEE
// fp32 arithmetic (this file is compiled with --fmad=false). The bitsandbytes-named quantizers have
// no stream parameter and run on the legacy default stream (stream = NULL), as bitsandbytes does.
#include "blockwise_kernel.cuh"
#include "cuda_check.h"
#include "kbit_dtype.h"
#include "kbit_ops_4bit.h"

namespace kbit::cuda {
namespace {

template <QuantType Q>
struct Coder4 {
    static constexpr unsigned kStoreAlign = 4;  // one 32-bit store per chunk of 8
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

// The 16-entry table of NF4 or FP4, passed by value; element 2j is the high nibble of byte j.
struct Decoder4 {
    static constexpr int kLog2CodesPerByte = 1;
    using Params = Lut16;
    struct Shared {
        float lut[16];
    };
    __device__ static void setup(Shared& sh, const Params& p) {
        if (threadIdx.x < 16) sh.lut[threadIdx.x] = p.v[threadIdx.x];
        __syncthreads();
    }
    __device__ static float value(const Shared& sh, const uint32_t (&w)[4], int j) {
        const uint32_t byte = (w[j >> 3] >> (8 * ((j & 7) >> 1))) & 0xFFu;
        return sh.lut[(j & 1) ? (byte & 0xFu) : (byte >> 4)];
    }
    __device__ static float value_at(const Shared& sh, const uint8_t* A, int64_t i) {
        const uint8_t byte = A[i >> 1];
        return sh.lut[(i & 1) ? (byte & 0xFu) : (byte >> 4)];
    }
};

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status quantize_4bit(const char* fn, QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void* stream) {
    constexpr const char* kernel = "quantize_blockwise_kernel (4-bit)";
    const cudaStream_t s = cuda::to_stream(stream);
    if (qt == QuantType::NF4)
        return cuda::launch_quantize_blockwise<T, cuda::Coder4<QuantType::NF4>>(fn, kernel, A, nullptr, absmax, out,
                                                                                blocksize, n, {}, s);
    return cuda::launch_quantize_blockwise<T, cuda::Coder4<QuantType::FP4>>(fn, kernel, A, nullptr, absmax, out,
                                                                            blocksize, n, {}, s);
}

template <class T>
kbit_status dequantize_4bit(const char* fn, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return cuda::launch_dequantize_blockwise<T, cuda::Decoder4>(fn, "dequantize_4bit_kernel", A, absmax, out,
                                                                blocksize, n, cuda::builtin_lut(qt),
                                                                cuda::to_stream(stream));
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(quantize_4bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(dequantize_4bit);

}  // namespace kbit::ops
