// kbit_export_optim8.h — the front end of the optimizer interface: one checked wrapper per family of
// abi/kbit_optim8.def, called by the generated exported functions
// (src/common/generated/kbit_optim8_exports.cpp) with the function's name and, for the update families, its
// optimizer (optim::Kind). A wrapper runs the argument checks of kbit_validate_optim8.h inside the exception
// barrier (kbit_export.h) and calls the backend's operation (kbit_ops_optim8.h) only for a valid, non-empty
// call.
#pragma once

#include <cstddef>

#include "kbit_export.h"
#include "kbit_ops_optim8.h"
#include "kbit_validate_optim8.h"

// The optim8 interface minor this backend implements (its version symbol): the header's, unless the backend's
// build defines KBIT_BACKEND_OPTIM8_MINOR lower.
#ifndef KBIT_BACKEND_OPTIM8_MINOR
#define KBIT_BACKEND_OPTIM8_MINOR KBIT_OPTIM8_VERSION_MINOR
#endif
static_assert(KBIT_BACKEND_OPTIM8_MINOR <= KBIT_OPTIM8_VERSION_MINOR,
              "a backend cannot implement a newer minor than its header");

namespace kbit::exports {

// ---- one wrapper per family of abi/kbit_optim8.def ----------------------------------------------

template <class T>
kbit_status optim32(const char* fn, optim::Kind kind, T* g, T* p, float* state1, float* state2, float* unorm,
                    float max_unorm, float param_norm, float beta1, float beta2, float beta3, float alpha, float eps,
                    float weight_decay, int step, float lr, float gnorm_scale, bool skip_zeros, int n) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_optim32(fn, kind, g, p, state1, state2, unorm, max_unorm, step, n, empty);
        },
        [&] {
            const optim::Hyper h{beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale, step, skip_zeros};
            return ops::optim32<T>(fn, kind, h, g, p, state1, optim::two_state(kind) ? state2 : nullptr, unorm,
                                   max_unorm, param_norm, n);
        });
}

template <class T>
kbit_status optim8_blockwise(const char* fn, optim::Kind kind, T* p, T* g, unsigned char* state1,
                             unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps,
                             int step, float lr, float* quantiles1, float* quantiles2, float* absmax1, float* absmax2,
                             float weight_decay, float gnorm_scale, bool skip_zeros, int n) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_optim8_blockwise(fn, kind, p, g, state1, state2, quantiles1, quantiles2, absmax1,
                                             absmax2, step, n, empty);
        },
        [&] {
            const bool two = optim::two_state(kind);
            const optim::Hyper h{beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale, step, skip_zeros};
            return ops::optim8_blockwise<T>(fn, kind, h, p, g, state1, two ? state2 : nullptr, quantiles1,
                                            two ? quantiles2 : nullptr, absmax1, two ? absmax2 : nullptr, n);
        });
}

inline void* managed_ptr_alloc(const char* fn, size_t bytes) {
    void* result = nullptr;
    guarded(fn, [&] {
        if (kbit_status s = validate_managed_alloc(fn, bytes); s != KBIT_STATUS_SUCCESS) return s;
        result = ops::managed_alloc(fn, bytes);
        return result != nullptr ? KBIT_STATUS_SUCCESS : KBIT_STATUS_OUT_OF_MEMORY;
    });
    return result;
}

// NULL is a no-op, as free(NULL).
inline kbit_status managed_ptr_free(const char* fn, void* ptr) {
    if (ptr == nullptr) return KBIT_STATUS_SUCCESS;
    return guarded(fn, [&] { return ops::managed_free(fn, ptr); });
}

// bitsandbytes' prefetch has no stream: device backends use the legacy default stream.
inline kbit_status prefetch(const char* fn, void* ptr, size_t bytes, int device) {
    return checked_call(
        fn,
        [&](bool* empty) {
            *empty = bytes == 0;
            return validate_prefetch(fn, ptr, bytes, device);
        },
        [&] { return ops::prefetch(fn, ptr, bytes, device); });
}

// B is bitsandbytes' and unused.
template <class T>
kbit_status fill(const char* fn, T* A, T* /*B*/, T value, int64_t n) {
    return checked_call(
        fn, [&](bool* empty) { return validate_fill(fn, A, n, empty); },
        [&] { return ops::fill<T>(fn, A, value, n); });
}

}  // namespace kbit::exports
