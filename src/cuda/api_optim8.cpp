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

// One exported function per optimizer and type, each forwarding to the templates above.
#define KBIT_CUDA_OPTIM32(name, T, kind)                                                                  \
    KBIT_API kbit_status name(T* g, T* p, float* state1, float* state2, float* unorm, float max_unorm,     \
                              float param_norm, const float beta1, const float beta2, const float beta3,   \
                              const float alpha, const float eps, const float weight_decay, const int step, \
                              const float lr, const float gnorm_scale, bool skip_zeros, const int n) {      \
        return optim32<T>(#name, Kind::kind, g, p, state1, state2, unorm, max_unorm, param_norm, beta1,    \
                          beta2, beta3, alpha, eps, weight_decay, step, lr, gnorm_scale, skip_zeros, n);    \
    }

#define KBIT_CUDA_OPTIM8(name, T, kind)                                                                      \
    KBIT_API kbit_status name(T* p, T* g, unsigned char* state1, unsigned char* state2, float beta1,          \
                              float beta2, float beta3, float alpha, float eps, int step, float lr,           \
                              float* quantiles1, float* quantiles2, float* absmax1, float* absmax2,           \
                              float weight_decay, const float gnorm_scale, bool skip_zeros, int n) {          \
        return optim8<T>(#name, Kind::kind, p, g, state1, state2, beta1, beta2, beta3, alpha, eps, step, lr,   \
                         quantiles1, quantiles2, absmax1, absmax2, weight_decay, gnorm_scale, skip_zeros, n);  \
    }

extern "C" {

KBIT_API uint32_t kbit_optim8_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_OPTIM8_VERSION_MAJOR, KBIT_OPTIM8_VERSION_MINOR);
}

KBIT_CUDA_OPTIM32(cadam32bit_grad_fp32, float, Adam)
KBIT_CUDA_OPTIM32(cadam32bit_grad_fp16, kbit_half, Adam)
KBIT_CUDA_OPTIM32(cadam32bit_grad_bf16, kbit_bf16, Adam)
KBIT_CUDA_OPTIM32(cademamix32bit_grad_fp32, float, AdEMAMix)
KBIT_CUDA_OPTIM32(cademamix32bit_grad_fp16, kbit_half, AdEMAMix)
KBIT_CUDA_OPTIM32(cademamix32bit_grad_bf16, kbit_bf16, AdEMAMix)
KBIT_CUDA_OPTIM32(clion32bit_grad_fp32, float, Lion)
KBIT_CUDA_OPTIM32(clion32bit_grad_fp16, kbit_half, Lion)
KBIT_CUDA_OPTIM32(clion32bit_grad_bf16, kbit_bf16, Lion)
KBIT_CUDA_OPTIM32(cmomentum32bit_grad_32, float, Momentum)
KBIT_CUDA_OPTIM32(cmomentum32bit_grad_16, kbit_half, Momentum)
KBIT_CUDA_OPTIM32(crmsprop32bit_grad_32, float, RMSprop)
KBIT_CUDA_OPTIM32(crmsprop32bit_grad_16, kbit_half, RMSprop)
KBIT_CUDA_OPTIM32(cadagrad32bit_grad_32, float, Adagrad)
KBIT_CUDA_OPTIM32(cadagrad32bit_grad_16, kbit_half, Adagrad)
KBIT_CUDA_OPTIM32(kbit_momentum32bit_grad_bf16, kbit_bf16, Momentum)
KBIT_CUDA_OPTIM32(kbit_rmsprop32bit_grad_bf16, kbit_bf16, RMSprop)
KBIT_CUDA_OPTIM32(kbit_adagrad32bit_grad_bf16, kbit_bf16, Adagrad)

KBIT_CUDA_OPTIM8(cadam_8bit_blockwise_grad_fp32, float, Adam)
KBIT_CUDA_OPTIM8(cadam_8bit_blockwise_grad_fp16, kbit_half, Adam)
KBIT_CUDA_OPTIM8(cadam_8bit_blockwise_grad_bf16, kbit_bf16, Adam)
KBIT_CUDA_OPTIM8(cmomentum_8bit_blockwise_grad_fp32, float, Momentum)
KBIT_CUDA_OPTIM8(cmomentum_8bit_blockwise_grad_fp16, kbit_half, Momentum)
KBIT_CUDA_OPTIM8(cmomentum_8bit_blockwise_grad_bf16, kbit_bf16, Momentum)
KBIT_CUDA_OPTIM8(crmsprop_8bit_blockwise_grad_fp32, float, RMSprop)
KBIT_CUDA_OPTIM8(crmsprop_8bit_blockwise_grad_fp16, kbit_half, RMSprop)
KBIT_CUDA_OPTIM8(crmsprop_8bit_blockwise_grad_bf16, kbit_bf16, RMSprop)
KBIT_CUDA_OPTIM8(clion_8bit_blockwise_grad_fp32, float, Lion)
KBIT_CUDA_OPTIM8(clion_8bit_blockwise_grad_fp16, kbit_half, Lion)
KBIT_CUDA_OPTIM8(clion_8bit_blockwise_grad_bf16, kbit_bf16, Lion)
KBIT_CUDA_OPTIM8(cadagrad_8bit_blockwise_grad_fp32, float, Adagrad)
KBIT_CUDA_OPTIM8(cadagrad_8bit_blockwise_grad_fp16, kbit_half, Adagrad)
KBIT_CUDA_OPTIM8(cadagrad_8bit_blockwise_grad_bf16, kbit_bf16, Adagrad)
KBIT_CUDA_OPTIM8(cademamix_8bit_blockwise_grad_fp32, float, AdEMAMix)
KBIT_CUDA_OPTIM8(cademamix_8bit_blockwise_grad_fp16, kbit_half, AdEMAMix)
KBIT_CUDA_OPTIM8(cademamix_8bit_blockwise_grad_bf16, kbit_bf16, AdEMAMix)

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
