// The 8-bit operations (kbit_ops_8bit.h) on OpenCL: blockwise 8-bit in kernels/blockwise_8bit.cl,
// LLM.int8 in kernels/int8.cl. Every function enqueues its kernels on the stream's queue and returns
// without waiting, as the CUDA backend does; the kit has validated the arguments and the problem is
// not empty. resolve() checks that each array lies inside one device allocation.
#include <algorithm>
#include <memory>

#include "device_memory.h"
#include "kbit_half.h"
#include "kbit_host_contexts.h"  // kbit_context and its three operations
#include "kbit_ops_8bit.h"
#include "programs.h"

// A context holds nothing: the int8 GEMM is a kernel of this backend, not a BLAS call. It exists so
// that get_context() hands out a handle that kbit_context_destroy() and cigemmlt_* can check.

namespace kbit::ops {

using namespace kbit::opencl;

namespace {

constexpr size_t kGroup = 256;        // GROUP of blockwise_8bit.cl
constexpr size_t kItemElems = 8;      // ITEM_ELEMS of blockwise_8bit.cl
constexpr size_t kRowGroup = 256;     // ROW_GROUP of int8.cl
constexpr size_t kTile = 16;          // TILE of int8.cl
constexpr size_t kScanGroup = 256;    // SCAN_GROUP of int8.cl
constexpr int32_t kStageInt32 = 0, kStageInt8 = 1, kStageInt8RowScale = 2;  // IGEMM_* of int8.cl

// cint8_vector_quant's kernel, shared by both row-wise quantizers.
void launch_vector_quant(const char* fn, cl_command_queue q, const DeviceArray& A, int8_t* out, float* rowStats,
                         float threshold, int64_t rows, int64_t cols) {
    launch(fn, q, Program::Int8, "int8_vector_quant", static_cast<size_t>(rows) * kRowGroup, kRowGroup, A,
           resolve_array(fn, out, rows * cols, "out"), resolve_array(fn, rowStats, rows, "rowStats"), threshold,
           cols);
}

}  // namespace

// ---- blockwise 8-bit ------------------------------------------------------------------------------

template <class T>
kbit_status quantize_8bit(const char* fn, const float* code, const T* A, float* absmax, uint8_t* out,
                          int64_t blocksize, int64_t n, void* stream) {
    return run([&] {
        const int64_t blocks = blocks_of(n, blocksize);
        // A segment of min(blocksize, kGroup) work-items per block, kGroup / segment blocks per group.
        const size_t per_group = kGroup / std::min(static_cast<size_t>(blocksize), kGroup);
        const size_t groups = (static_cast<size_t>(blocks) + per_group - 1) / per_group;
        launch(fn, queue_of(fn, stream), Program::Blockwise8bit, "quantize_8bit", groups * kGroup, kGroup,
               resolve_array(fn, code, 256, "code"), resolve_array(fn, A, n, "A"),
               resolve_array(fn, absmax, blocks, "absmax"), resolve_array(fn, out, n, "out"), Elem<T>::dtype,
               blocksize, n);
    });
}

template <class T>
kbit_status dequantize_8bit(const char* fn, const float* code, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return run([&] {
        const size_t groups = (static_cast<size_t>(n) + kGroup * kItemElems - 1) / (kGroup * kItemElems);
        launch(fn, queue_of(fn, stream), Program::Blockwise8bit, "dequantize_8bit", groups * kGroup, kGroup,
               resolve_array(fn, code, 256, "code"), resolve_array(fn, A, n, "A"),
               resolve_array(fn, absmax, blocks_of(n, blocksize), "absmax"), resolve_array(fn, out, n, "out"),
               Elem<T>::dtype, blocksize, n);
    });
}

#define KBIT_OPENCL_8BIT(T)                                    \
    template decltype(quantize_8bit<T>) quantize_8bit<T>;      \
    template decltype(dequantize_8bit<T>) dequantize_8bit<T>;
KBIT_OPENCL_8BIT(float)
KBIT_OPENCL_8BIT(kbit_half)
KBIT_OPENCL_8BIT(kbit_bf16)
#undef KBIT_OPENCL_8BIT

// ---- LLM.int8 row-wise quantization -----------------------------------------------------------------

kbit_status int8_vector_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats, float threshold,
                              int64_t rows, int64_t cols, void* stream) {
    return run([&] {
        launch_vector_quant(fn, queue_of(fn, stream), resolve_array(fn, A, rows * cols, "A"), out, rowStats,
                            threshold, rows, cols);
    });
}

kbit_status int8_vectorwise_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats,
                                  uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void* stream) {
    return run([&] {
        const cl_command_queue q = queue_of(fn, stream);
        const DeviceArray a = resolve_array(fn, A, rows * cols, "A");
        launch_vector_quant(fn, q, a, out, rowStats, threshold, rows, cols);
        const bool has_flags = outlier_cols != nullptr;
        if (threshold == 0.0f && !has_flags) return;  // no outliers and no flags to write
        // After the quantization on the same in-order queue: it zeroes the outlier columns of `out`.
        launch(fn, q, Program::Int8, "outlier_columns", static_cast<size_t>(cols), 0, a,
               resolve_array(fn, out, rows * cols, "out"),
               has_flags ? resolve_array(fn, outlier_cols, cols, "outlier_cols") : kNoArray,
               static_cast<int32_t>(has_flags), threshold, rows, cols);
    });
}

kbit_status clear_bytes(const char* fn, uint8_t* p, int64_t n, void* stream) {
    return run([&] {
        const DeviceArray d = resolve_array(fn, p, n, "outlier_cols");
        const cl_uchar zero = 0;  // copied by the call
        check(fn, "clEnqueueFillBuffer",
              clEnqueueFillBuffer(queue_of(fn, stream), d.buffer, &zero, 1, d.offset, static_cast<size_t>(n), 0,
                                  nullptr, nullptr));
    });
}

// ---- int8 GEMM --------------------------------------------------------------------------------------

// Exact for every shape (the kernel sums int8 products in 32 bits), so never KBIT_STATUS_NOT_SUPPORTED.
kbit_status igemmlt(const char* fn, IgemmOutput output, kbit_context*, int m, int n, int k, const int8_t* A,
                    const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc, void* stream) {
    return run([&] {
        // The last row of a matrix needs only its first m (or k) elements, not the whole leading dimension.
        const DeviceArray a = m > 0 ? resolve_array(fn, A, int64_t{k - 1} * lda + m, "A") : kNoArray;
        const DeviceArray b = m > 0 ? resolve_array(fn, B, int64_t{n - 1} * ldb + m, "B") : kNoArray;
        const int64_t c_count = int64_t{n - 1} * ldc + k;
        const DeviceArray c = output == IgemmOutput::Int32
                                  ? resolve_array(fn, static_cast<const int32_t*>(C), c_count, "C")
                                  : resolve_array(fn, static_cast<const int8_t*>(C), c_count, "C");
        const DeviceArray scale =
            output == IgemmOutput::Int8RowScale ? resolve_array(fn, row_scale, k, "row_scale") : kNoArray;
        const int32_t stage = output == IgemmOutput::Int32  ? kStageInt32
                              : output == IgemmOutput::Int8 ? kStageInt8
                                                            : kStageInt8RowScale;
        const int32_t tiles_o = static_cast<int32_t>((static_cast<size_t>(k) + kTile - 1) / kTile);
        const size_t tiles_t = (static_cast<size_t>(n) + kTile - 1) / kTile;
        launch(fn, queue_of(fn, stream), Program::Int8, "igemm", tiles_t * tiles_o * kTile * kTile, kTile * kTile, a,
               b, c, scale, stage, m, n, k, lda, ldb, ldc, tiles_o);
    });
}

// ---- dequantization of the int32 product and the outlier product -----------------------------------

kbit_status dequant_mm_int32_fp16(const char* fn, const int32_t* A, const float* rowStats, const float* colStats,
                                  kbit_half* out, const kbit_half* bias, int numRows, int numCols, void* stream) {
    return run([&] {
        const int64_t count = int64_t{numRows} * numCols;
        launch(fn, queue_of(fn, stream), Program::Int8, "dequant_mm_int32_fp16", static_cast<size_t>(count), 0,
               resolve_array(fn, A, count, "A"), resolve_array(fn, rowStats, numRows, "rowStats"),
               resolve_array(fn, colStats, numCols, "colStats"), resolve_array(fn, out, count, "out"),
               bias != nullptr ? resolve_array(fn, bias, numCols, "bias") : kNoArray,
               static_cast<int32_t>(bias != nullptr), numCols, count);
    });
}

kbit_status int8_outlier_matmul_fp16(const char* fn, const kbit_half* A, const int8_t* W, const float* W_stats,
                                     const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                                     int64_t in_features, void* stream) {
    return run([&] {
        const cl_command_queue q = queue_of(fn, stream);
        // The flagged columns as a list (and its length after it), so that each output sums over the
        // outlier columns only instead of testing every flag.
        const Scratch list(fn, static_cast<size_t>(in_features + 1) * sizeof(cl_long));
        launch(fn, q, Program::Int8, "outlier_column_list", kScanGroup, kScanGroup,
               resolve_array(fn, outlier_cols, in_features, "outlier_cols"), list.at(0), in_features);
        launch(fn, q, Program::Int8, "outlier_matmul_fp16", static_cast<size_t>(rows * out_features), 0,
               resolve_array(fn, A, rows * in_features, "A"), resolve_array(fn, W, out_features * in_features, "W"),
               resolve_array(fn, W_stats, out_features, "W_stats"), list.at(0),
               resolve_array(fn, out, rows * out_features, "out"), rows, out_features, in_features);
    });
}

}  // namespace kbit::ops
