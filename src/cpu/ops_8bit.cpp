// The 8-bit interface of libkbit_cpu.so: the operations behind the exported functions of
// kbit_export_8bit.h (which checks every argument first), as thread drivers over the kernel tables
// of the active ISA (kernels_8bit.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kbit_dtype.h"
#include "kbit_host_contexts.h"  // kbit_context and its three operations
#include "kbit_ops_8bit.h"
#include "kernels_8bit.h"
#include "parallel_range.h"
#include "ref_8bit.h"
#include "tuning.h"


namespace kbit::cpu {
namespace {

int64_t block_count(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }

void vector_quant(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t rows, int64_t cols) {
    const Int8Kernels& k = int8_kernels();
    parallel_range(rows, std::max<int64_t>(1, kGrainElements / cols),
                   [&](int64_t r0, int64_t r1) { k.vector_quant(A, out, rowStats, threshold, cols, r0, r1); });
}

// Exact int32 product in bitsandbytes' convention (see kernels_8bit.h): the library where it takes
// the call, else kbit's kernel.
void igemm_s32(int64_t m, int64_t n, int64_t k, const int8_t* A, int64_t lda, const int8_t* B, int64_t ldb, int32_t* C,
               int64_t ldc) {
    const IgemmKernels& kernels = igemm_kernels();
    if (!kernels.s32_library(m, n, k, A, lda, B, ldb, C, ldc)) kernels.s32(m, n, k, A, lda, B, ldb, C, ldc);
}

}  // namespace
}  // namespace kbit::cpu

// ------------------------------------------------------------------------------------------------
// Operations (kbit_export_8bit.h): arguments are valid and the problem is not empty. Each one is
// the thread driver over the kernel tables of the active ISA.
// ------------------------------------------------------------------------------------------------

namespace kbit::ops {

using namespace kbit::cpu;

template <class T>
kbit_status quantize_8bit(const char*, const float* code, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void*) {
    const auto& k = blockwise8_kernels<T>();
    const auto lut = k.quantize_uses_lut ? code8_lut(code, false, n >= kLutBuildElements) : nullptr;
    const bool stream = n >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
    parallel_range(block_count(n, blocksize), std::max<int64_t>(1, kGrainElements / blocksize),
                   [&](int64_t b0, int64_t b1) {
                       k.quantize(code, lut.get(), A, absmax, out, blocksize, n, b0, b1, stream);
                   });
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status dequantize_8bit(const char*, const float* code, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void*) {
    const auto& k = blockwise8_kernels<T>();
    const bool stream = n * static_cast<int64_t>(sizeof(T)) >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
    parallel_range(block_count(n, blocksize), std::max<int64_t>(1, kGrainElements / blocksize),
                   [&](int64_t b0, int64_t b1) {
                       const int64_t end = std::min(b1 * blocksize, n);
                       k.dequantize(code, A, absmax, out, blocksize, b0 * blocksize, end, stream);
                   });
    return KBIT_STATUS_SUCCESS;
}

kbit_status int8_vector_quant(const char*, const kbit_half* A, int8_t* out, float* rowStats, float threshold,
                              int64_t rows, int64_t cols, void*) {
    vector_quant(A, out, rowStats, threshold, rows, cols);
    return KBIT_STATUS_SUCCESS;
}

kbit_status int8_vectorwise_quant(const char*, const kbit_half* A, int8_t* out, float* rowStats,
                                  uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void*) {
    vector_quant(A, out, rowStats, threshold, rows, cols);
    std::vector<uint8_t> flags(static_cast<size_t>(cols), 0);
    if (int8_has_outliers(threshold)) int8_kernels().outlier_flags(A, flags.data(), threshold, cols, 0, rows);
    if (outlier_cols != nullptr) std::memcpy(outlier_cols, flags.data(), flags.size());
    if (rows > 1)
        for (int64_t c = 0; c < cols; ++c)
            if (flags[c])
                for (int64_t r = 0; r < rows; ++r) out[r * cols + c] = 0;
    return KBIT_STATUS_SUCCESS;
}

kbit_status clear_bytes(const char*, uint8_t* p, int64_t n, void*) {
    std::memset(p, 0, static_cast<size_t>(n));
    return KBIT_STATUS_SUCCESS;
}

kbit_status igemmlt(const char*, IgemmOutput output, kbit_context*, int m, int n, int k, const int8_t* A,
                    const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc, void*) {
    if (output == IgemmOutput::Int32) {
        igemm_s32(m, n, k, A, lda, B, ldb, static_cast<int32_t*>(C), ldc);
        return KBIT_STATUS_SUCCESS;
    }
    std::vector<int32_t> acc(static_cast<size_t>(n) * static_cast<size_t>(k));
    igemm_s32(m, n, k, A, lda, B, ldb, acc.data(), k);
    auto* c8 = static_cast<int8_t*>(C);
    parallel_range(n, std::max<int64_t>(1, kGrainElements / k), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t o = 0; o < k; ++o) {
                const int32_t v = acc[t * k + o];
                c8[t * ldc + o] = output == IgemmOutput::Int8RowScale ? int8_scale_saturate_rn(v, row_scale[o])
                                                                      : int8_saturate(v);
            }
    });
    return KBIT_STATUS_SUCCESS;
}

kbit_status dequant_mm_int32_fp16(const char*, const int32_t* A, const float* rowStats, const float* colStats,
                                  kbit_half* out, const kbit_half* bias, int numRows, int numCols, void*) {
    const Int8Kernels& k = int8_kernels();
    parallel_range(numRows, std::max<int64_t>(1, kGrainElements / numCols), [&](int64_t r0, int64_t r1) {
        k.dequant_mm(A, rowStats, colStats, out, bias, numCols, r0, r1);
    });
    return KBIT_STATUS_SUCCESS;
}

kbit_status int8_outlier_matmul_fp16(const char*, const kbit_half* A, const int8_t* W, const float* W_stats,
                                     const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                                     int64_t in_features, void*) {
    std::vector<int64_t> cols;
    for (int64_t c = 0; c < in_features; ++c)
        if (outlier_cols[c] != 0) cols.push_back(c);
    if (cols.empty()) return KBIT_STATUS_SUCCESS;  // out + (-0.0) == out
    // The outlier columns of W, dequantized and rounded to fp16 as bitsandbytes does, transposed to
    // [column][out_features] so that the kernel vectorizes over outputs.
    const int64_t count = static_cast<int64_t>(cols.size());
    std::vector<float> w(static_cast<size_t>(count * out_features));
    ref::int8_outlier_weights(W, W_stats, cols.data(), count, out_features, in_features, w.data());
    const Int8Kernels& k = int8_kernels();
    parallel_range(rows, std::max<int64_t>(1, kGrainElements / (out_features * count)), [&](int64_t r0, int64_t r1) {
        k.outlier_matmul(A, in_features, cols.data(), count, w.data(), out, out_features, r0, r1);
    });
    return KBIT_STATUS_SUCCESS;
}

// For every element type: the exported functions that call these are compiled in another file
// (src/common/generated/kbit_8bit_exports.cpp and kbit_bnb_cpu_exports.cpp).
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(quantize_8bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(dequantize_8bit);

}  // namespace kbit::ops
