// kbit_ops_optim8.h — the operations every backend defines for the optimizer interface: typed functions of
// namespace kbit::ops, called only by the checked wrappers of kbit_export_optim8.h, with arguments that
// passed kbit_validate_optim8.h, a non-empty problem, the hyperparameters as one Hyper, and NULL for the
// second state of a one-state optimizer (whatever the caller passed). Each returns KBIT_STATUS_SUCCESS or an
// error it has recorded with set_error. A backend defines the templates in its own files and instantiates
// them there for the element types of the interface (`template decltype(op<T>) op<T>;`), since the exported
// functions that call them are compiled separately (src/common/generated/kbit_optim8_exports.cpp).
#pragma once

#include "kbit/kbit_optim8.h"
#include "kbit_error.h"
#include "kbit_optim_math.h"

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
