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
#include "kbit_dtype.h"
#include "kbit_ops_8bit.h"

namespace kbit::cuda {
namespace {

static_assert(kQuantThreads == 256, "the table setup loads one entry per thread");

struct Coder8 {
    static constexpr unsigned kStoreAlign = 8;  // one 64-bit store per chunk of 8
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

// The caller's 256-entry table, loaded to shared memory by the CTA's 256 threads.
struct Decoder8 {
    static constexpr int kLog2CodesPerByte = 0;
    struct Params {
        const float* code;
    };
    struct Shared {
        float table[256];
    };
    __device__ static void setup(Shared& sh, const Params& p) {
        sh.table[threadIdx.x] = __ldg(p.code + threadIdx.x);
        __syncthreads();
    }
    __device__ static float value(const Shared& sh, const uint32_t (&w)[4], int j) {
        return sh.table[(w[j >> 2] >> (8 * (j & 3))) & 0xFFu];
    }
    __device__ static float value_at(const Shared& sh, const uint8_t* A, int64_t i) { return sh.table[A[i]]; }
};

template <class T>
kbit_status quantize(const char* fn, const float* code, const T* A, const float* center, float* absmax, uint8_t* out,
                     int64_t blocksize, int64_t n, void* stream) {
    return launch_quantize_blockwise<T, Coder8>(fn, "quantize_blockwise_kernel (8-bit)", A, center, absmax, out,
                                                blocksize, n, Coder8::Params{code}, to_stream(stream));
}

}  // namespace

kbit_status quantize_blockwise_8bit_centred(const char* fn, const float* code, const float* A, const float* center,
                                            float* absmax, uint8_t* out, int64_t blocksize, int64_t n, void* stream) {
    return quantize(fn, code, A, center, absmax, out, blocksize, n, stream);
}

}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status quantize_8bit(const char* fn, const float* code, const T* A, float* absmax, uint8_t* out,
                          int64_t blocksize, int64_t n, void* stream) {
    return cuda::quantize(fn, code, A, nullptr, absmax, out, blocksize, n, stream);
}

template <class T>
kbit_status dequantize_8bit(const char* fn, const float* code, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return cuda::launch_dequantize_blockwise<T, cuda::Decoder8>(fn, "dequantize_8bit_kernel", A, absmax, out,
                                                                blocksize, n, {code}, cuda::to_stream(stream));
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(quantize_8bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(dequantize_8bit);

}  // namespace kbit::ops
