// blockwise_8bit.h — the blockwise 8-bit quantizer of blockwise_8bit.cu in the form the nested absmax
// of nested_absmax.cu uses: fp32 input, centred on a device value. Plain C++; `stream` is the
// caller's opaque cudaStream_t. Returns a kbit_status (failures recorded as "fn: ...").
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"

namespace kbit::cuda {

// Quantizes (A[i] - *center) with the rule and kernel of kbit::ops::quantize_8bit (fp32).
kbit_status quantize_blockwise_8bit_centred(const char* fn, const float* code, const float* A, const float* center,
                                            float* absmax, uint8_t* out, int64_t blocksize, int64_t n, void* stream);

}  // namespace kbit::cuda
