// int8_rules.h — the float -> int8 conversions of the 8-bit interface as host/device functions, so the
// CUDA kernels evaluate exactly the rules of the CPU reference (src/ref/ref_8bit.cpp) and the
// host test (tests/cuda/host_logic.cpp) can compare the two on every float pattern class.
#pragma once

#include <math.h>

#include <cstdint>

#include "kbit_formats.h"  // KBIT_HD

namespace kbit {

// cint8_vector_quant's store: CUDA's __float2int_rn (round half to even, saturate to int32, NaN -> 0)
// written into int8 (the low 8 bits). Equals ref::int8_from_float_rn.
KBIT_HD int8_t int8_low_byte_rn(float v) {
    int32_t q;
    if (v != v) q = 0;
    else if (v >= 2147483648.0f) q = INT32_MAX;
    else if (v <= -2147483648.0f) q = INT32_MIN;
    else q = static_cast<int32_t>(rintf(v));  // exact: |rintf(v)| < 2^31 here
    return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(q) & 0xFFu));
}

// cigemmlt_8_rowscale's store: round half to even, saturate to [-128, 127], NaN -> 0. Equals
// ref::saturate_int8_rn.
KBIT_HD int8_t int8_saturate_rn(float v) {
    if (v != v) return 0;
    const float r = rintf(v);
    return static_cast<int8_t>(r >= 127.0f ? 127.0f : (r <= -128.0f ? -128.0f : r));
}

// cigemmlt_8's store: the int32 sum saturated to int8.
KBIT_HD int8_t int8_saturate(int32_t v) { return static_cast<int8_t>(v > 127 ? 127 : (v < -128 ? -128 : v)); }

}  // namespace kbit
