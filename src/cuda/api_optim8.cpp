// The optimizer interface of libkbit_cuda.so: argument validation (kbit_validate_optim8.h, shared with
// every backend), then the kernels of optim32.cu / optim8_blockwise.cu and the paged-memory helpers of
// paged.cu. bitsandbytes' optimizer functions have no stream parameter: like bitsandbytes, they run
// on the legacy default stream (so do cfill_* and cprefetch).
#include "cuda_ops.h"
#include "kbit/kbit_optim8.h"
#include "kbit_error.h"
#include "kbit_half.h"
#include "kbit_validate_optim8.h"

namespace {

using kbit::optim::Hyper;
using kbit::optim::Kind;

template <class T>
kbit_status optim32(const char* fn, Kind kind, T* g, T* p, float* state1, float* state2, float* unorm,
                    float max_unorm, float param_norm, float beta1, float beta2, float beta3, float alpha, float eps,
                    float weight_decay, int step, float lr, float gnorm_scale, bool skip_zeros, int n) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_optim32(fn, kind, g, p, state1, state2, unorm, max_unorm, step, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const Hyper h{beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale, step, skip_zeros};
        const kbit::cuda::Optim32Args m{g,      p,         state1,     kbit::optim::two_state(kind) ? state2 : nullptr,
                                        unorm,  max_unorm, param_norm, n};
        return kbit::cuda::optim32(fn, kbit::Elem<T>::dtype, kind, h, m, nullptr);
    });
}

template <class T>
kbit_status optim8(const char* fn, Kind kind, T* p, T* g, unsigned char* state1, unsigned char* state2, float beta1,
                   float beta2, float beta3, float alpha, float eps, int step, float lr, float* quantiles1,
                   float* quantiles2, float* absmax1, float* absmax2, float weight_decay, float gnorm_scale,
                   bool skip_zeros, int n) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_optim8_blockwise(fn, kind, p, g, state1, state2, quantiles1, quantiles2,
                                                              absmax1, absmax2, step, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const bool two = kbit::optim::two_state(kind);
        const Hyper h{beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale, step, skip_zeros};
        const kbit::cuda::Optim8Args m{p,       g,       state1,  two ? state2 : nullptr, quantiles1,
                                       two ? quantiles2 : nullptr, absmax1, two ? absmax2 : nullptr, n};
        return kbit::cuda::optim8_blockwise(fn, kbit::Elem<T>::dtype, kind, h, m, nullptr);
    });
}

}  // namespace

// Every exported update, forwarding to the templates above.
#include "kbit_export_optim8.h"

extern "C" {

KBIT_API void* cget_managed_ptr(size_t bytes) {
    static const char* fn = "cget_managed_ptr";
    void* result = nullptr;
    kbit::guarded(fn, [&] {
        if (kbit_status s = kbit::validate_managed_alloc(fn, bytes); s != KBIT_STATUS_SUCCESS) return s;
        return kbit::cuda::get_managed_ptr(fn, bytes, &result);
    });
    return result;
}

KBIT_API kbit_status kbit_free_managed_ptr(void* ptr) {
    static const char* fn = "kbit_free_managed_ptr";
    return kbit::guarded(fn, [&] {
        if (ptr == nullptr) return KBIT_STATUS_SUCCESS;
        return kbit::cuda::free_managed_ptr(fn, ptr);
    });
}

KBIT_API kbit_status cprefetch(void* ptr, size_t bytes, int device) {
    static const char* fn = "cprefetch";
    return kbit::guarded(fn, [&] {
        const kbit_status s = kbit::validate_prefetch(fn, ptr, bytes, device);
        if (s != KBIT_STATUS_SUCCESS || bytes == 0) return s;
        return kbit::cuda::prefetch(fn, ptr, bytes, device);
    });
}

KBIT_API kbit_status cfill_fp32(float* A, float* /*B*/, float value, int64_t n) {
    static const char* fn = "cfill_fp32";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_fill(fn, A, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::fill_fp32(fn, A, value, n, nullptr);
    });
}

KBIT_API kbit_status cfill_uint8(unsigned char* A, unsigned char* /*B*/, unsigned char value, int64_t n) {
    static const char* fn = "cfill_uint8";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_fill(fn, A, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return kbit::cuda::fill_uint8(fn, A, value, n, nullptr);
    });
}

}  // extern "C"
