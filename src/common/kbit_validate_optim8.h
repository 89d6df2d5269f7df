// kbit_validate_optim8.h — argument rules of the optimizer interface, shared by every backend so that
// the same bad input gets the same status and message everywhere. Each returns KBIT_STATUS_SUCCESS or
// the failure (already recorded); `*empty` says the call has nothing to do. Scalars that only shape
// the arithmetic (betas, lr, eps, ...) are not checked, as in bitsandbytes; the code tables are not
// read (any non-decreasing table is valid).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kbit_args.h"
#include "kbit_optim_math.h"

namespace kbit {

// c{adam,ademamix,lion,momentum,rmsprop,adagrad}32bit_grad_* and kbit_*32bit_grad_bf16.
inline kbit_status validate_optim32(const char* fn, optim::Kind kind, const void* g, const void* p,
                                    const float* state1, const float* state2, const float* unorm,
                                    float max_unorm, int step, int n, bool* empty) {
    Args a(fn);
    a.nonneg("n", n).require(step >= 1, "step is %d, must be >= 1", step);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("g", g).not_null("p", p).not_null("state1", state1);
    if (optim::two_state(kind)) a.not_null("state2", state2);
    a.require(!(max_unorm > 0.0f) || unorm != nullptr, "unorm is NULL but max_unorm is %g > 0",
              static_cast<double>(max_unorm));
    return a.status();
}

// c{adam,momentum,rmsprop,lion,adagrad,ademamix}_8bit_blockwise_grad_*.
inline kbit_status validate_optim8_blockwise(const char* fn, optim::Kind kind, const void* p, const void* g,
                                             const uint8_t* state1, const uint8_t* state2,
                                             const float* quantiles1, const float* quantiles2,
                                             const float* absmax1, const float* absmax2, int step, int n,
                                             bool* empty) {
    const bool two = optim::two_state(kind);
    Args a(fn);
    a.nonneg("n", n).require(step >= 1, "step is %d, must be >= 1", step);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("p", p).not_null("g", g).not_null("state1", state1);
    if (two) a.not_null("state2", state2);
    a.not_null("quantiles1", quantiles1);
    if (two) a.not_null("quantiles2", quantiles2);
    a.not_null("absmax1", absmax1);
    if (two) a.not_null("absmax2", absmax2);
    return a.status();
}

// cget_managed_ptr.
inline kbit_status validate_managed_alloc(const char* fn, size_t bytes) {
    Args a(fn);
    a.require(bytes > 0, "bytes is 0, must be > 0");
    return a.status();
}

// cprefetch.
inline kbit_status validate_prefetch(const char* fn, const void* ptr, size_t bytes, int device) {
    Args a(fn);
    a.require(device >= -1, "device is %d, must be >= -1 (-1 = host)", device);
    if (bytes > 0) a.not_null("ptr", ptr);
    return a.status();
}

// cfill_fp32 / cfill_uint8.
inline kbit_status validate_fill(const char* fn, const void* A, int64_t n, bool* empty) {
    Args a(fn);
    a.nonneg("n", n);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("A", A);
    return a.status();
}

}  // namespace kbit
