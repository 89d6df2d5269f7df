// kbit_export_optim8.h — the exported functions of the optimizer interface, defined once for every
// backend from abi/generated/kbit_optim8_exports.def. A backend's api_optim8.cpp includes it once at
// file scope and defines the operations declared below (namespace kbit::ops). An update receives
// arguments that passed kbit_validate_optim8.h, a non-empty problem, the hyperparameters as one
// Hyper, and NULL for the second state of a one-state optimizer (whatever the caller passed).
#pragma once

#include <cstddef>

#include "kbit/kbit_optim8.h"
#include "kbit_export.h"
#include "kbit_optim_math.h"
#include "kbit_validate_optim8.h"

namespace kbit::exports {
// Variant tokens of the generated export list (the opt= attribute of abi/kbit_optim8.def).
constexpr optim::Kind variant_adam = optim::Kind::Adam;
constexpr optim::Kind variant_ademamix = optim::Kind::AdEMAMix;
constexpr optim::Kind variant_adagrad = optim::Kind::Adagrad;
constexpr optim::Kind variant_lion = optim::Kind::Lion;
constexpr optim::Kind variant_momentum = optim::Kind::Momentum;
constexpr optim::Kind variant_rmsprop = optim::Kind::RMSprop;
}  // namespace kbit::exports

namespace kbit::ops {

// One 32-bit-state step over n elements (g before p, as bitsandbytes' 32-bit kernels).
template <class T>
kbit_status optim32(const char* fn, optim::Kind kind, const optim::Hyper& h, T* g, T* p, float* state1,
                    float* state2, float* unorm, float max_unorm, float param_norm, int64_t n);
// One 8-bit blockwise step over n elements (p before g, as bitsandbytes' 8-bit kernels).
template <class T>
kbit_status optim8_blockwise(const char* fn, optim::Kind kind, const optim::Hyper& h, T* p, T* g,
                             unsigned char* state1, unsigned char* state2, float* quantiles1, float* quantiles2,
                             float* absmax1, float* absmax2, int64_t n);
// Paged memory: NULL after set_error when `bytes` cannot be had; freeing a non-NULL pointer of
// managed_alloc; prefetching bytes > 0 to `device` (a CPU backend has nothing to do).
void* managed_alloc(const char* fn, size_t bytes);
kbit_status managed_free(const char* fn, void* ptr);
kbit_status prefetch(const char* fn, void* ptr, size_t bytes, int device);
template <class T>
kbit_status fill(const char* fn, T* A, T value, int64_t n);

}  // namespace kbit::ops

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

// ---- the exported symbols -----------------------------------------------------------------------

#define KBIT_EXPORT_optim32 KBIT_EXPORT_WITH_VARIANT
#define KBIT_EXPORT_optim8_blockwise KBIT_EXPORT_WITH_VARIANT
#define KBIT_EXPORT_managed_ptr_alloc KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_managed_ptr_free KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_prefetch KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_fill KBIT_EXPORT_PLAIN

extern "C" {

KBIT_API uint32_t kbit_optim8_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_OPTIM8_VERSION_MAJOR, KBIT_OPTIM8_VERSION_MINOR);
}

#include "kbit_optim8_exports.def"

}  // extern "C"
