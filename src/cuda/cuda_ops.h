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
