// kbit_ops_8bit.h — the operations every backend defines for the 8-bit interface: typed functions of
// namespace kbit::ops, called only by the checked wrappers of kbit_export_8bit.h, with arguments that passed
// kbit_validate_8bit.h and a non-empty problem. Each returns KBIT_STATUS_SUCCESS or an error it has recorded
// with set_error. A backend defines the templates in its own files and instantiates them there for the
// element types of the interface (`template decltype(op<T>) op<T>;`), since the exported functions that call
// them are compiled separately (src/common/generated/kbit_8bit_exports.cpp).
#pragma once

#include "kbit/kbit_8bit.h"
#include "kbit_error.h"

namespace kbit {
// The output stage of cigemmlt_<variant> (the out= attribute of its abi/kbit_8bit.def entries).
enum class IgemmOutput { Int32, Int8, Int8RowScale };
}  // namespace kbit

namespace kbit::ops {

template <class T>
kbit_status quantize_8bit(const char* fn, const float* code, const T* A, float* absmax, uint8_t* out,
                          int64_t blocksize, int64_t n, void* stream);
template <class T>
kbit_status dequantize_8bit(const char* fn, const float* code, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream);
// bitsandbytes' row-wise quantization (cint8_vector_quant): no outlier handling beyond the threshold.
kbit_status int8_vector_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats, float threshold,
                              int64_t rows, int64_t cols, void* stream);
// kbit_int8_vectorwise_quant: also the outlier-column flags (when outlier_cols != NULL) and the
// outlier columns of `out` zeroed when rows > 1.
kbit_status int8_vectorwise_quant(const char* fn, const kbit_half* A, int8_t* out, float* rowStats,
                                  uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void* stream);
// Sets n bytes of device memory to 0 (the outlier flags of a call with no element).
kbit_status clear_bytes(const char* fn, uint8_t* p, int64_t n, void* stream);
// A new context (NULL after set_error when none can be made), and its destruction: INVALID_ARGUMENT
// for a pointer that is not a live context of this backend (of two threads destroying one context,
// exactly one succeeds).
kbit_context* context_create(const char* fn);
kbit_status context_destroy(const char* fn, kbit_context* context);
bool context_is_live(const kbit_context* context);
kbit_status igemmlt(const char* fn, IgemmOutput output, kbit_context* context, int m, int n, int k, const int8_t* A,
                    const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc, void* stream);
kbit_status dequant_mm_int32_fp16(const char* fn, const int32_t* A, const float* rowStats, const float* colStats,
                                  kbit_half* out, const kbit_half* bias, int numRows, int numCols, void* stream);
kbit_status int8_outlier_matmul_fp16(const char* fn, const kbit_half* A, const int8_t* W, const float* W_stats,
                                     const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features,
                                     int64_t in_features, void* stream);

}  // namespace kbit::ops
