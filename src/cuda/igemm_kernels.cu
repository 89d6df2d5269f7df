// Kernels around cuBLASLt's int8 GEMM: the exact fallback product and the int8 output stage. Integer
// arithmetic only, except the row-scale product of int8_scale_saturate_rn (kbit_int8_rules.h: one
// IEEE fp32 multiplication, no contraction possible: nothing is added to it).
#include "cuda_check.h"
#include "igemm_kernels.h"
#include "kbit_int8_rules.h"

namespace kbit::cuda {
namespace {

constexpr int kTile = 16;    // outputs per CTA side
constexpr int kDepth = 64;   // inner-dimension slice held in shared memory

// One CTA computes a kTile x kTile tile of C (t rows, o columns); each thread one element. The sum
// wraps modulo 2^32 (unsigned arithmetic), which is the exact sum wrapped to int32.
__global__ void __launch_bounds__(kTile * kTile)
igemm_s32_exact_kernel(int m, int n, int k, const int8_t* __restrict__ A, int lda, const int8_t* __restrict__ B,
                       int ldb, int32_t* __restrict__ C, int ldc) {
    __shared__ int8_t sa[kTile][kDepth + 4];
    __shared__ int8_t sb[kTile][kDepth + 4];
    const int t0 = blockIdx.x * kTile, o0 = blockIdx.y * kTile;
    const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
    uint32_t acc = 0;
    for (int i0 = 0; i0 < m; i0 += kDepth) {
        for (int e = threadIdx.x; e < kTile * kDepth; e += kTile * kTile) {
            const int r = e / kDepth, i = i0 + e % kDepth;
            const int o = o0 + r, t = t0 + r;
            sa[r][e % kDepth] = (o < k && i < m) ? A[int64_t{o} * lda + i] : int8_t{0};
            sb[r][e % kDepth] = (t < n && i < m) ? B[int64_t{t} * ldb + i] : int8_t{0};
        }
        __syncthreads();
#pragma unroll 16
        for (int i = 0; i < kDepth; ++i)
            acc += static_cast<uint32_t>(int32_t{sa[tx][i]} * int32_t{sb[ty][i]});
        __syncthreads();
    }
    const int o = o0 + tx, t = t0 + ty;
    if (o < k && t < n) C[int64_t{t} * ldc + o] = static_cast<int32_t>(acc);
}

__global__ void igemm_int8_epilogue_kernel(const int32_t* __restrict__ acc, int ld, int n, int k,
                                           const float* __restrict__ row_scale, int8_t* __restrict__ C, int ldc) {
    const int64_t total = int64_t{n} * k;
    for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
        const int64_t t = e / k, o = e % k;
        const int32_t v = acc[t * ld + o];
        C[t * ldc + o] = row_scale != nullptr ? int8_scale_saturate_rn(v, row_scale[o]) : int8_saturate(v);
    }
}

}  // namespace

kbit_status igemm_s32_exact(const char* fn, int m, int n, int k, const int8_t* A, int lda, const int8_t* B, int ldb,
                            int32_t* C, int ldc, void* stream) {
    const dim3 grid((n + kTile - 1) / kTile, (k + kTile - 1) / kTile);
    if (grid.y > 65535u)
        return set_error(KBIT_STATUS_NOT_SUPPORTED, fn, "k = %d is too large for the exact int8 GEMM (at most %d)", k,
                         65535 * kTile);
    igemm_s32_exact_kernel<<<grid, kTile * kTile, 0, to_stream(stream)>>>(m, n, k, A, lda, B, ldb, C, ldc);
    return check_launch(fn, "igemm_s32_exact_kernel");
}

kbit_status igemm_int8_epilogue(const char* fn, const int32_t* acc, int ld, int n, int k, const float* row_scale,
                                int8_t* C, int ldc, void* stream) {
    const unsigned grid = grid_for((int64_t{n} * k + 255) / 256);
    igemm_int8_epilogue_kernel<<<grid, 256, 0, to_stream(stream)>>>(acc, ld, n, k, row_scale, C, ldc);
    return check_launch(fn, "igemm_int8_epilogue_kernel");
}

}  // namespace kbit::cuda
