// cuda_ops.h — the CUDA backend's internal operations, one per exported family, called by the
// kbit::ops functions (api_*.cpp) after argument validation. Plain
// C++ (no CUDA types): `stream` is the caller's opaque cudaStream_t. Each returns a kbit_status and
// reports device failures as "fn: ..." through kbit::set_error. Callers guarantee validated,
// non-empty arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kbit/kbit_4bit.h"
#include "kbit/kbit_8bit.h"
#include "kbit_dtype.h"
#include "kbit_formats.h"
#include "kbit_optim_math.h"

namespace kbit::cuda {

// ---- 8-bit (blockwise_8bit.cu, int8_llm.cu, igemmlt.cpp) -----------------------------------------
kbit_status quantize_blockwise_8bit(const char* fn, int32_t dtype, const float* code, const void* A,
                                    float* absmax, uint8_t* out, int64_t blocksize, int64_t n, void* stream);
kbit_status dequantize_blockwise_8bit(const char* fn, int32_t dtype, const float* code, const uint8_t* A,
                                      const float* absmax, void* out, int64_t blocksize, int64_t n, void* stream);
// The centred variant used by nested absmax: quantizes (A[i] - *center) (fp32 only).
kbit_status quantize_blockwise_8bit_centred(const char* fn, const float* code, const float* A, const float* center,
                                            float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                                            void* stream);

// LLM.int8 row-wise quantization; with outlier_cols != NULL also the outlier-column flags, and the
// outlier columns of `out` zeroed when rows > 1 (kbit_int8_vectorwise_quant).
kbit_status int8_vector_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats,
                              uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void* stream);
kbit_status dequant_mm_int32_fp16(const char* fn, const int32_t* A, const float* rowStats, const float* colStats,
                                  kbit_half* out, const kbit_half* bias, int64_t rows, int64_t cols, void* stream);
kbit_status int8_outlier_matmul_fp16(const char* fn, const kbit_half* A, const int8_t* W, const float* W_stats,
                                     const uint8_t* outlier_cols, kbit_half* out, int64_t rows,
                                     int64_t out_features, int64_t in_features, void* stream);

enum class IgemmltOutput { Int32, Int8, Int8RowScale };
kbit_context* create_context(const char* fn);
// Whether `context` (non-NULL) was made by create_context() and not destroyed.
bool is_context(const kbit_context* context);
kbit_status destroy_context(const char* fn, kbit_context* context);
kbit_status igemmlt(const char* fn, kbit_context* context, IgemmltOutput output, int m, int n, int k,
                    const int8_t* A, const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc,
                    void* stream);

// ---- optimizers (optim32.cu, optim8_blockwise.cu): the order of kbit_optim_math.h ----------------
// Memory of a 32-bit call: g, p of the call's dtype (n elements); s1 n floats (AdEMAMix 2n); s2 n
// floats or NULL (1-state); unorm one float (read and/or written when max_unorm > 0).
struct Optim32Args {
    const void* g;
    void* p;
    float* s1;
    float* s2;
    float* unorm;
    float max_unorm, param_norm;
    int64_t n;
};
kbit_status optim32(const char* fn, int32_t dtype, optim::Kind kind, const optim::Hyper& h, const Optim32Args& m,
                    void* stream);

// Memory of an 8-bit blockwise call (ref::Mem8's layout): AdEMAMix keeps m2's codes at s1 + n and
// its scales at a1 + ceil(n / 256).
struct Optim8Args {
    void* p;
    const void* g;
    uint8_t* s1;
    uint8_t* s2;
    const float* q1;
    const float* q2;
    float* a1;
    float* a2;
    int64_t n;
};
kbit_status optim8_blockwise(const char* fn, int32_t dtype, optim::Kind kind, const optim::Hyper& h,
                             const Optim8Args& m, void* stream);

// ---- paged memory and fills (paged.cu) ------------------------------------------------------------
kbit_status get_managed_ptr(const char* fn, size_t bytes, void** ptr);
kbit_status free_managed_ptr(const char* fn, void* ptr);
kbit_status prefetch(const char* fn, void* ptr, size_t bytes, int device);
kbit_status fill_fp32(const char* fn, float* A, float value, int64_t n, void* stream);
kbit_status fill_uint8(const char* fn, uint8_t* A, uint8_t value, int64_t n, void* stream);

}  // namespace kbit::cuda
