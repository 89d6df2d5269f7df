// LLM.int8 pieces, the kbit::ops functions of kbit_ops_8bit.h other than the blockwise quantizers and
// the int8 GEMM: row-wise int8 quantization with outliers (int8_vector_quant, int8_vectorwise_quant,
// clear_bytes), dequantization of the int32 product (dequant_mm_int32_fp16) and the fp16 outlier
// product (int8_outlier_matmul_fp16), on the caller's stream. IEEE fp32 (--fmad=false), NaN results
// with x86 bits, so outputs equal the CPU backend's byte for byte.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "kbit_int8_rules.h"
#include "kbit_ops_8bit.h"

namespace kbit::cuda {
namespace {

constexpr int kRowThreads = 256;

// One CTA per row: the row statistic (int8_row_stat_fold per thread, combined by max: every folded
// value is a non-NaN magnitude), then each element's int8_quantize_element, and 0 in outlier columns
// when `zero_cols` (kbit_int8_vectorwise_quant with rows > 1). The rules are kbit_int8_rules.h, the
// ones ref::int8_vector_quant calls.
__global__ void __launch_bounds__(kRowThreads)
int8_row_quant_kernel(const kbit_half* __restrict__ A, int8_t* __restrict__ out, float* __restrict__ rowStats,
                      const uint8_t* __restrict__ outlier_cols, bool zero_cols, float threshold, float threshold_h,
                      int64_t rows, int64_t cols) {
    using Reduce = cub::BlockReduce<float, kRowThreads>;
    __shared__ typename Reduce::TempStorage temp;
    __shared__ float s_amax;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const kbit_half* a = A + r * cols;
        float amax = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
            amax = int8_row_stat_fold(amax, fabsf(Dev<kbit_half>::load(a[c])), threshold, threshold_h);
        }
        amax = Reduce(temp).Reduce(amax, [](float x, float y) { return fmaxf(x, y); });
        if (threadIdx.x == 0) {
            s_amax = amax;
            rowStats[r] = amax;
        }
        __syncthreads();
        const float scale = int8_row_scale(s_amax);
        for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
            const int8_t q = int8_quantize_element(Dev<kbit_half>::load(a[c]), scale, threshold);
            out[r * cols + c] = (zero_cols && outlier_cols[c] != 0) ? int8_t{0} : q;
        }
        __syncthreads();  // temp and s_amax are reused by the next row
    }
}

// outlier_cols[c] = 1 when some element of column c is int8_is_outlier.
__global__ void outlier_cols_kernel(const kbit_half* __restrict__ A, uint8_t* __restrict__ flags, float threshold_h,
                                    int64_t rows, int64_t cols) {
    for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < cols; c += int64_t{gridDim.x} * blockDim.x) {
        uint8_t f = 0;
        for (int64_t r = 0; r < rows && f == 0; ++r)
            if (int8_is_outlier(fabsf(Dev<kbit_half>::load(A[r * cols + c])), threshold_h)) f = 1;
        flags[c] = f;
    }
}

__global__ void __launch_bounds__(256)
dequant_mm_kernel(const int32_t* __restrict__ A, const float* __restrict__ rowStats, const float* __restrict__ colStats,
                  kbit_half* __restrict__ out, const kbit_half* __restrict__ bias, int64_t rows, int64_t cols) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float rs = rowStats[r];
        for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < cols; c += int64_t{gridDim.x} * blockDim.x) {
            const float v = mul_rn(mul_rn(static_cast<float>(A[r * cols + c]), rs), colStats[c]);
            const float b = bias != nullptr ? Elem<kbit_half>::load(bias[c]) : 0.0f;
            out[r * cols + c] = Dev<kbit_half>::store(fma_rn(v, kMmDequantScale, b));
        }
    }
}

// Ordered list of the outlier columns (one CTA): list[0..count) ascending, count at list[in_features].
__global__ void __launch_bounds__(1024)
compact_outliers_kernel(const uint8_t* __restrict__ flags, int32_t* __restrict__ list, int64_t in_features) {
    using Scan = cub::BlockScan<int, 1024>;
    __shared__ typename Scan::TempStorage temp;
    int base = 0;
    for (int64_t c0 = 0; c0 < in_features; c0 += 1024) {
        const int64_t c = c0 + threadIdx.x;
        const int f = (c < in_features && flags[c] != 0) ? 1 : 0;
        int pos = 0, total = 0;
        Scan(temp).ExclusiveSum(f, pos, total);
        if (f) list[base + pos] = static_cast<int32_t>(c);
        base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) list[in_features] = base;
}

// out[t][o] = RN_fp16(out[t][o] + sum over outlier columns c (ascending) of A[t][c] * fp16(W[o][c] *
// W_stats[o] * fp32(1/127))), the sum in fp32 starting from -0.0 (ref::int8_outlier_matmul_fp16).
// Without outlier columns nothing is written (out + -0.0 == out, as the CPU backend skips it).
__global__ void __launch_bounds__(256)
outlier_matmul_kernel(const kbit_half* __restrict__ A, const int8_t* __restrict__ W, const float* __restrict__ W_stats,
                      const int32_t* __restrict__ list, kbit_half* __restrict__ out, int64_t rows, int64_t out_features,
                      int64_t in_features) {
    const int count = list[in_features];
    if (count == 0) return;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < out_features;
             o += int64_t{gridDim.x} * blockDim.x) {
            const float stat = W_stats[o];
            float sum = -0.0f;
            for (int i = 0; i < count; ++i) {
                const int64_t c = list[i];
                const float w = mul_rn(mul_rn(static_cast<float>(W[o * in_features + c]), stat), kInv127);
                const float wh = Elem<kbit_half>::load(Elem<kbit_half>::store(w));
                sum = add_rn(sum, mul_rn(Elem<kbit_half>::load(A[t * in_features + c]), wh));
            }
            const int64_t i = t * out_features + o;
            out[i] = Dev<kbit_half>::store(add_rn(Elem<kbit_half>::load(out[i]), sum));
        }
    }
}

dim3 grid_2d(int64_t rows, int64_t cols, int threads) {
    const unsigned gx = grid_for((cols + threads - 1) / threads, 4);
    return dim3(gx, static_cast<unsigned>(rows < 65535 ? rows : 65535));
}

// Row-wise quantization; with outlier_cols != NULL also the outlier-column flags, and the outlier
// columns of `out` zeroed when rows > 1.
kbit_status vector_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats, uint8_t* outlier_cols,
                         float threshold, int64_t rows, int64_t cols, cudaStream_t s) {
    const float threshold_h = int8_threshold_fp16(threshold);
    bool zero_cols = false;
    if (outlier_cols != nullptr) {
        if (int8_has_outliers(threshold)) {
            outlier_cols_kernel<<<grid_for((cols + 255) / 256), 256, 0, s>>>(A, outlier_cols, threshold_h, rows, cols);
            if (kbit_status st = check_launch(fn, "outlier_cols_kernel"); st != KBIT_STATUS_SUCCESS) return st;
            zero_cols = rows > 1;
        } else {
            KBIT_CUDA_TRY(fn, "cudaMemsetAsync (outlier_cols)", cudaMemsetAsync(outlier_cols, 0, cols, s));
        }
    }
    int8_row_quant_kernel<<<grid_for(rows, 32), kRowThreads, 0, s>>>(A, out, rowStats, outlier_cols, zero_cols,
                                                                     threshold, threshold_h, rows, cols);
    return check_launch(fn, "int8_row_quant_kernel");
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

kbit_status int8_vector_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats, float threshold,
                              int64_t rows, int64_t cols, void* stream) {
    return cuda::vector_quant(fn, A, out, rowStats, nullptr, threshold, rows, cols, cuda::to_stream(stream));
}

kbit_status int8_vectorwise_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats,
                                  uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void* stream) {
    return cuda::vector_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, cuda::to_stream(stream));
}

kbit_status clear_bytes(const char* fn, uint8_t* p, int64_t n, void* stream) {
    KBIT_CUDA_TRY(fn, "cudaMemsetAsync", cudaMemsetAsync(p, 0, static_cast<size_t>(n), cuda::to_stream(stream)));
    return KBIT_STATUS_SUCCESS;
}

kbit_status dequant_mm_int32_fp16(const char* fn, const int32_t* A, const float* rowStats, const float* colStats,
                                  kbit_half* out, const kbit_half* bias, int numRows, int numCols, void* stream) {
    cuda::dequant_mm_kernel<<<cuda::grid_2d(numRows, numCols, 256), 256, 0, cuda::to_stream(stream)>>>(
        A, rowStats, colStats, out, bias, numRows, numCols);
    return cuda::check_launch(fn, "dequant_mm_kernel");
}

kbit_status int8_outlier_matmul_fp16(const char* fn, const kbit_half* A, const int8_t* W, const float* W_stats,
                                     const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                                     int64_t in_features, void* stream) {
    const cudaStream_t s = cuda::to_stream(stream);
    int32_t* list = nullptr;
    KBIT_CUDA_TRY(fn, "cudaMallocAsync (outlier list)",
                  cudaMallocAsync(reinterpret_cast<void**>(&list), (in_features + 1) * sizeof(int32_t), s));
    cuda::compact_outliers_kernel<<<1, 1024, 0, s>>>(outlier_cols, list, in_features);
    kbit_status st = cuda::check_launch(fn, "compact_outliers_kernel");
    if (st == KBIT_STATUS_SUCCESS) {
        cuda::outlier_matmul_kernel<<<cuda::grid_2d(rows, out_features, 256), 256, 0, s>>>(
            A, W, W_stats, list, out, rows, out_features, in_features);
        st = cuda::check_launch(fn, "outlier_matmul_kernel");
    }
    const cudaError_t freed = cudaFreeAsync(list, s);
    if (st == KBIT_STATUS_SUCCESS && freed != cudaSuccess)
        return cuda::device_error(fn, "cudaFreeAsync (outlier list)", freed);
    return st;
}

}  // namespace kbit::ops
