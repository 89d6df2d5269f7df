// The grouped (mixture-of-experts) 4-bit GEMM of the CUDA backend: the shared composition of the backend's
// own operations (src/common/kbit_grouped_device.h: ids read to the host, each chosen expert's rows
// gathered and multiplied by its slice in one gemm_4bit of gemm_4bit.cu), so it equals the loop of
// cgemm_4bit calls over the experts byte for byte. Host code only; the call synchronizes `stream`.
#include "kbit_dtype.h"
#include "kbit_grouped_device.h"

namespace kbit::ops {

template <class T>
kbit_status gemm_4bit_grouped(const char* fn, const T* A, int64_t a_rows_per_token, const uint8_t* B,
                              const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                              const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize,
                              QuantType qt, const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine,
                              T* out, void* stream) {
    return grouped_device::gemm_4bit_grouped<T>(fn, A, a_rows_per_token, B, absmax, absmax_8bit, absmax_code,
                                                absmax_offset, experts, N, K, blocksize, qt, ids, tokens, top_k,
                                                combine, out, stream);
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit_grouped);

}  // namespace kbit::ops
