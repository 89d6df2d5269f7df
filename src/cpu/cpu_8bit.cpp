// The 8-bit interface of libkbit_cpu.so: argument checks (kbit_validate_8bit.h, shared with every
// backend), then the SIMD kernels split over OpenMP threads, or the scalar reference when
// KBIT_CPU_ISA=ref. No exported function calls another one.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu_isa.h"
#include "igemm_8bit.h"
#include "kbit/kbit_8bit.h"
#include "kbit_error.h"
#include "kbit_half.h"
#include "kbit_live_set.h"
#include "kbit_validate_8bit.h"
#include "kernels_8bit.h"
#include "parallel_range.h"
#include "ref_8bit.h"

struct kbit_context {};  // the CPU needs no BLAS handle; live contexts are in live_contexts()

namespace kbit::cpu {
namespace {

LiveSet<kbit_context>& live_contexts() {
    static LiveSet<kbit_context> live;  // trivially destructible: usable during exit too
    return live;
}
// Work per thread below which a parallel region costs more than it saves.
constexpr int64_t kGrainElements = int64_t{1} << 16;
// Outputs at least this large are written with non-temporal stores: they cannot stay in cache, and
// streaming avoids reading every output line before it is overwritten.
constexpr int64_t kStreamBytes = int64_t{4} << 20;
// Below this many elements, quantizing with a table that is not cached yet takes the scalar search
// rather than building the table's lookup structure (which costs about as much as 8K searches).
constexpr int64_t kLutBuildElements = int64_t{1} << 14;

template <class T> constexpr int slot_of();
template <> constexpr int slot_of<float>() { return kSlotF32; }
template <> constexpr int slot_of<kbit_half>() { return kSlotF16; }
template <> constexpr int slot_of<kbit_bf16>() { return kSlotBF16; }

int64_t block_count(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }

template <class T>
void quantize(const float* code, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n) {
    const Blockwise8Kernels* k = blockwise8_kernels();
    const auto lut = k != nullptr ? code8_lut(code, false, n >= kLutBuildElements) : nullptr;
    if (lut == nullptr) return ref::quantize_blockwise_8bit(code, A, absmax, out, blocksize, n);
    const auto fn = k->quantize[slot_of<T>()];
    const bool stream = n >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
    parallel_range(block_count(n, blocksize), std::max<int64_t>(1, kGrainElements / blocksize),
                   [&](int64_t b0, int64_t b1) { fn(*lut, A, absmax, out, blocksize, n, b0, b1, stream); });
}

template <class T>
void dequantize(const float* code, const uint8_t* A, const float* absmax, T* out, int64_t blocksize, int64_t n) {
    const Blockwise8Kernels* k = blockwise8_kernels();
    if (k == nullptr) return ref::dequantize_blockwise_8bit(code, A, absmax, out, blocksize, n);
    const auto fn = k->dequantize[slot_of<T>()];
    const bool stream = n * static_cast<int64_t>(sizeof(T)) >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
    parallel_range(block_count(n, blocksize), std::max<int64_t>(1, kGrainElements / blocksize),
                   [&](int64_t b0, int64_t b1) {
                       fn(code, A, absmax, out, blocksize, b0 * blocksize, std::min(b1 * blocksize, n), stream);
                   });
}

template <class T>
kbit_status quantize_entry(const char* fn, const int32_t* dtype, const float* code, const T* A, float* absmax,
                           uint8_t* out, int64_t blocksize, int64_t n) {
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s = validate_blockwise_8bit(fn, Blockwise::Quantize, dtype, code, A, absmax, out, blocksize, n,
                                                    sizeof(T), &empty))
            return s;
        if (!empty) quantize(code, A, absmax, out, blocksize, n);
        return KBIT_STATUS_SUCCESS;
    });
}

template <class T>
kbit_status dequantize_entry(const char* fn, const int32_t* dtype, const float* code, const uint8_t* A,
                             const float* absmax, T* out, int64_t blocksize, int64_t n) {
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s = validate_blockwise_8bit(fn, Blockwise::Dequantize, dtype, code, A, absmax, out, blocksize,
                                                    n, sizeof(T), &empty))
            return s;
        if (!empty) dequantize(code, A, absmax, out, blocksize, n);
        return KBIT_STATUS_SUCCESS;
    });
}

void vector_quant(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t rows, int64_t cols) {
    const Int8Kernels* k = int8_kernels();
    if (k == nullptr) return ref::int8_vector_quant(A, out, rowStats, threshold, rows, cols);
    parallel_range(rows, std::max<int64_t>(1, kGrainElements / cols),
                   [&](int64_t r0, int64_t r1) { k->vector_quant(A, out, rowStats, threshold, cols, r0, r1); });
}

// Exact int32 product in bitsandbytes' convention (see igemm_8bit.h).
void igemm_s32(int64_t m, int64_t n, int64_t k, const int8_t* A, int64_t lda, const int8_t* B, int64_t ldb, int32_t* C,
               int64_t ldc) {
    if (igemm_onednn(m, n, k, A, lda, B, ldb, C, ldc)) return;
    if (IgemmFn fn = igemm_s32_kernel()) return fn(m, n, k, A, lda, B, ldb, C, ldc);
    ref::igemm_s32(m, n, k, A, B, C, lda, ldb, ldc);
}

// cigemmlt_32 / _8 / _8_rowscale share their checks and differ in the output stage.
enum class IgemmOut { Int32, Int8, Int8RowScale };

kbit_status igemmlt_entry(const char* fn, IgemmOut kind, kbit_context* context, int m, int n, int k, const int8_t* A,
                          const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc) {
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s = validate_igemmlt(fn, context, m, n, k, A, B, C, row_scale, kind == IgemmOut::Int8RowScale,
                                             lda, ldb, ldc, &empty))
            return s;
        if (!live_contexts().contains(context)) return set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", kNotLiveContext);
        if (empty) return KBIT_STATUS_SUCCESS;
        if (kind == IgemmOut::Int32) {
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
                    c8[t * ldc + o] = kind == IgemmOut::Int8RowScale ? int8_scale_saturate_rn(v, row_scale[o])
                                                                     : int8_saturate(v);
                }
        });
        return KBIT_STATUS_SUCCESS;
    });
}

}  // namespace
}  // namespace kbit::cpu

using namespace kbit;
using namespace kbit::cpu;

extern "C" {

KBIT_API uint32_t kbit_8bit_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_8BIT_VERSION_MAJOR, KBIT_8BIT_VERSION_MINOR);
}

// ---- Blockwise dynamic 8-bit (bitsandbytes names) ---------------------------------------------

KBIT_API kbit_status cquantize_blockwise_fp32(float* code, float* A, float* absmax, unsigned char* out,
                                              int blocksize, const int n) {
    return quantize_entry("cquantize_blockwise_fp32", nullptr, code, A, absmax, out, blocksize, n);
}
KBIT_API kbit_status cquantize_blockwise_fp16(float* code, kbit_half* A, float* absmax, unsigned char* out,
                                              int blocksize, const int n) {
    return quantize_entry("cquantize_blockwise_fp16", nullptr, code, A, absmax, out, blocksize, n);
}
KBIT_API kbit_status cquantize_blockwise_bf16(float* code, kbit_bf16* A, float* absmax, unsigned char* out,
                                              int blocksize, const int n) {
    return quantize_entry("cquantize_blockwise_bf16", nullptr, code, A, absmax, out, blocksize, n);
}
KBIT_API kbit_status cdequantize_blockwise_fp32(float* code, unsigned char* A, float* absmax, float* out,
                                                int blocksize, const int n, void* /*stream*/) {
    return dequantize_entry("cdequantize_blockwise_fp32", nullptr, code, A, absmax, out, blocksize, n);
}
KBIT_API kbit_status cdequantize_blockwise_fp16(float* code, unsigned char* A, float* absmax, kbit_half* out,
                                                int blocksize, const int n, void* /*stream*/) {
    return dequantize_entry("cdequantize_blockwise_fp16", nullptr, code, A, absmax, out, blocksize, n);
}
KBIT_API kbit_status cdequantize_blockwise_bf16(float* code, unsigned char* A, float* absmax, kbit_bf16* out,
                                                int blocksize, const int n, void* /*stream*/) {
    return dequantize_entry("cdequantize_blockwise_bf16", nullptr, code, A, absmax, out, blocksize, n);
}

KBIT_API kbit_status kbit_quantize_blockwise_8bit(int32_t dtype, const float* code, const void* A, float* absmax,
                                                  uint8_t* out, int64_t blocksize, int64_t n, void* /*stream*/) {
    static const char* fn = "kbit_quantize_blockwise_8bit";
    switch (dtype) {
        case KBIT_DTYPE_FP16:
            return quantize_entry(fn, &dtype, code, static_cast<const kbit_half*>(A), absmax, out, blocksize, n);
        case KBIT_DTYPE_BF16:
            return quantize_entry(fn, &dtype, code, static_cast<const kbit_bf16*>(A), absmax, out, blocksize, n);
        default:  // KBIT_DTYPE_FP32, or a bad dtype that the validation reports
            return quantize_entry(fn, &dtype, code, static_cast<const float*>(A), absmax, out, blocksize, n);
    }
}

KBIT_API kbit_status kbit_dequantize_blockwise_8bit(int32_t dtype, const float* code, const uint8_t* A,
                                                    const float* absmax, void* out, int64_t blocksize, int64_t n,
                                                    void* /*stream*/) {
    static const char* fn = "kbit_dequantize_blockwise_8bit";
    switch (dtype) {
        case KBIT_DTYPE_FP16:
            return dequantize_entry(fn, &dtype, code, A, absmax, static_cast<kbit_half*>(out), blocksize, n);
        case KBIT_DTYPE_BF16:
            return dequantize_entry(fn, &dtype, code, A, absmax, static_cast<kbit_bf16*>(out), blocksize, n);
        default:
            return dequantize_entry(fn, &dtype, code, A, absmax, static_cast<float*>(out), blocksize, n);
    }
}

// ---- LLM.int8 (bitsandbytes names) --------------------------------------------------------------

KBIT_API kbit_status cint8_vector_quant(kbit_half* A, int8_t* out, float* rowStats, float threshold, int rows, int cols,
                                        void* /*stream*/) {
    static const char* fn = "cint8_vector_quant";
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s = validate_int8_vector_quant(fn, A, out, rowStats, threshold, rows, cols, &empty)) return s;
        if (!empty) vector_quant(A, out, rowStats, threshold, rows, cols);
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_context* get_context(void) {
    kbit_context* c = nullptr;
    guarded("get_context", [&] {
        auto made = std::make_unique<kbit_context>();
        if (!live_contexts().add(made.get()))
            return set_error(KBIT_STATUS_OUT_OF_MEMORY, "get_context", "%zu contexts are live already",
                             live_contexts().capacity());
        c = made.release();
        return KBIT_STATUS_SUCCESS;
    });
    return c;
}

KBIT_API kbit_status kbit_context_destroy(kbit_context* context) {
    static const char* fn = "kbit_context_destroy";
    if (context == nullptr) return KBIT_STATUS_SUCCESS;
    return guarded(fn, [&] {
        if (!live_contexts().remove(context)) return set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", kNotLiveContext);
        delete context;
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status cigemmlt_32(kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B, void* C,
                                 float* row_scale, int lda, int ldb, int ldc, void* /*stream*/) {
    return igemmlt_entry("cigemmlt_32", IgemmOut::Int32, context, m, n, k, A, B, C, row_scale, lda, ldb, ldc);
}
KBIT_API kbit_status cigemmlt_8(kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B, void* C,
                                float* row_scale, int lda, int ldb, int ldc, void* /*stream*/) {
    return igemmlt_entry("cigemmlt_8", IgemmOut::Int8, context, m, n, k, A, B, C, row_scale, lda, ldb, ldc);
}
KBIT_API kbit_status cigemmlt_8_rowscale(kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B,
                                         void* C, float* row_scale, int lda, int ldb, int ldc, void* /*stream*/) {
    return igemmlt_entry("cigemmlt_8_rowscale", IgemmOut::Int8RowScale, context, m, n, k, A, B, C, row_scale, lda, ldb,
                         ldc);
}

KBIT_API kbit_status cdequant_mm_int32_fp16(int* A, float* rowStats, float* colStats, kbit_half* out, kbit_half* bias,
                                            int numRows, int numCols, void* /*stream*/) {
    static const char* fn = "cdequant_mm_int32_fp16";
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s = validate_dequant_mm(fn, A, rowStats, colStats, out, numRows, numCols, &empty)) return s;
        if (empty) return KBIT_STATUS_SUCCESS;
        const Int8Kernels* k = int8_kernels();
        if (k == nullptr) {
            ref::dequant_mm_int32_fp16(A, rowStats, colStats, out, bias, numRows, numCols);
            return KBIT_STATUS_SUCCESS;
        }
        parallel_range(numRows, std::max<int64_t>(1, kGrainElements / numCols), [&](int64_t r0, int64_t r1) {
            k->dequant_mm(A, rowStats, colStats, out, bias, numCols, r0, r1);
        });
        return KBIT_STATUS_SUCCESS;
    });
}

// ---- kbit additions: the host-side parts of LLM.int8 --------------------------------------------

KBIT_API kbit_status kbit_int8_vectorwise_quant(const kbit_half* A, int8_t* out, float* rowStats,
                                                uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols,
                                                void* /*stream*/) {
    static const char* fn = "kbit_int8_vectorwise_quant";
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s =
                validate_int8_vectorwise_quant(fn, A, out, rowStats, outlier_cols, threshold, rows, cols, &empty))
            return s;
        if (empty) {
            if (outlier_cols != nullptr && cols > 0) std::memset(outlier_cols, 0, static_cast<size_t>(cols));
            return KBIT_STATUS_SUCCESS;
        }
        vector_quant(A, out, rowStats, threshold, rows, cols);
        const Int8Kernels* k = int8_kernels();
        if (k == nullptr) {
            ref::int8_outlier_columns(A, out, outlier_cols, threshold, rows, cols);
            return KBIT_STATUS_SUCCESS;
        }
        std::vector<uint8_t> flags(static_cast<size_t>(cols), 0);
        if (threshold > 0.0f) k->outlier_flags(A, flags.data(), threshold, cols, 0, rows);
        if (outlier_cols != nullptr) std::memcpy(outlier_cols, flags.data(), flags.size());
        if (rows > 1)
            for (int64_t c = 0; c < cols; ++c)
                if (flags[c])
                    for (int64_t r = 0; r < rows; ++r) out[r * cols + c] = 0;
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_int8_outlier_matmul_fp16(const kbit_half* A, const int8_t* W, const float* W_stats,
                                                   const uint8_t* outlier_cols, kbit_half* out, int64_t rows,
                                                   int64_t out_features, int64_t in_features, void* /*stream*/) {
    static const char* fn = "kbit_int8_outlier_matmul_fp16";
    return guarded(fn, [&] {
        bool empty = false;
        if (kbit_status s = validate_outlier_matmul(fn, A, W, W_stats, outlier_cols, out, rows, out_features,
                                                    in_features, &empty))
            return s;
        if (empty) return KBIT_STATUS_SUCCESS;
        const Int8Kernels* k = int8_kernels();
        if (k == nullptr) {
            ref::int8_outlier_matmul_fp16(A, W, W_stats, outlier_cols, out, rows, out_features, in_features);
            return KBIT_STATUS_SUCCESS;
        }
        std::vector<int64_t> cols;
        for (int64_t c = 0; c < in_features; ++c)
            if (outlier_cols[c] != 0) cols.push_back(c);
        if (cols.empty()) return KBIT_STATUS_SUCCESS;  // out + (-0.0) == out
        // The outlier columns of W, dequantized and rounded to fp16 as bitsandbytes does, transposed
        // to [column][out_features] so that the kernel vectorizes over outputs.
        const int64_t count = static_cast<int64_t>(cols.size());
        std::vector<float> w(static_cast<size_t>(count * out_features));
        for (int64_t o = 0; o < out_features; ++o)
            for (int64_t j = 0; j < count; ++j) {
                const float v = static_cast<float>(W[o * in_features + cols[j]]) * W_stats[o] * kInv127;
                w[j * out_features + o] = half_to_float(float_to_half(v));
            }
        parallel_range(rows, std::max<int64_t>(1, kGrainElements / (out_features * count)),
                       [&](int64_t r0, int64_t r1) {
                           k->outlier_matmul(A, in_features, cols.data(), count, w.data(), out, out_features, r0, r1);
                       });
        return KBIT_STATUS_SUCCESS;
    });
}

}  // extern "C"
