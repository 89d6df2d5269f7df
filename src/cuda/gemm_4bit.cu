// 4-bit GEMV / GEMM: kbit::ops::gemv_4bit (bitsandbytes' cgemm_4bit_inference_naive_*: M = 1, the
// caller's LUT) and gemm_4bit (cgemm_4bit_*: M rows, built-in NF4/FP4 table, optional nested absmax
// and bias), on the caller's stream. fp32 accumulation in an order of this backend's choosing (class
// F: tolerance-equal to the CPU backend).
//
// Two kernel bodies (gemm_4bit_kernels.cuh, shared with the grouped GEMM): skinny for M <= 4 with K and
// the row stride multiples of 32 and 16-byte aligned A and W (a CTA owns 4 weight rows, one 128-bit load of
// weights per 32-element chunk), tiled for everything else (64x64 output tiles through shared memory).
#include "gemm_4bit_kernels.cuh"
#include "kbit_dtype.h"
#include "kbit_ops_4bit.h"

namespace kbit::cuda {
namespace {

template <class T, int MT>
__global__ void __launch_bounds__(kSkinnyMaxThreads)
gemm_4bit_skinny_kernel(const T* __restrict__ A, int M, int K, int N, WeightArgs w, const T* __restrict__ bias,
                        T* __restrict__ out) {
    skinny_tile<T, MT>(A, M, K, N, w, bias, OutRows<T>{out, nullptr}, blockIdx.x * kSkinnyRows);
}

template <class T>
__global__ void __launch_bounds__(kTiledThreads)
gemm_4bit_tiled_kernel(const T* __restrict__ A, int M, int K, int N, WeightArgs w, const T* __restrict__ bias,
                       T* __restrict__ out) {
    tiled_tiles<T>(A, M, K, N, w, bias, OutRows<T>{out, nullptr}, blockIdx.x * kTile, blockIdx.y, gridDim.y);
}

// out[m][r] = sum_k A[m][k] * W[r][k] (+ bias[r]) for m < M, r < N; W as `w` describes it.
template <class T>
kbit_status run(const char* fn, const T* A, const WeightArgs& w, const T* bias, T* out, int M, int N, int K,
                cudaStream_t stream) {
    if (skinny_fits(M, K, w.row_elems, A, w.W)) {
        const int threads = skinny_threads(K);
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
