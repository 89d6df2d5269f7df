// The optimizer interface of libkbit_cpu.so: argument checks, kernel choice (scalar reference or
// Highway per KBIT_CPU_ISA) and OpenMP threads over independent ranges (chunks of 4096 elements for
// the 32-bit optimizers, 256-element blocks for the 8-bit ones), so results do not depend on the
// thread count.
#include "cpu_optim8.h"
#include "kbit/kbit_optim8.h"
#include "kbit_error.h"
#include "kbit_half.h"
#include "kbit_validate_optim8.h"
#include "parallel_range.h"
#include "ref_optim8.h"

namespace {

using kbit::optim::Hyper;
using kbit::optim::Kind;

const kbit::ref::OptimKernels& kernels() {
    static const kbit::ref::OptimKernels* k = [] {
        const auto* simd = kbit::cpu::optim_kernels_simd();
        return simd != nullptr ? simd : &kbit::ref::optim_kernels();
    }();
    return *k;
}

// Runs fn(i0, i1) over [0, count) on OpenMP threads with at least `grain` units each (smaller calls
// stay on the caller's thread: a fork costs about as much as 10-20K elements' work).
auto parallel(int64_t grain) {
    return [grain](int64_t count, auto&& fn) { kbit::cpu::parallel_range(count, grain, fn); };
}

template <class T>
kbit_status optim32(const char* fn, Kind kind, T* g, T* p, float* state1, float* state2, float* unorm,
                    float max_unorm, float param_norm, float beta1, float beta2, float beta3, float alpha,
                    float eps, float weight_decay, int step, float lr, float gnorm_scale, bool skip_zeros,
                    int n) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s =
            kbit::validate_optim32(fn, kind, g, p, state1, state2, unorm, max_unorm, step, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const Hyper h{beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale, step, skip_zeros};
        const kbit::ref::Mem32 m{g, p, state1, kbit::optim::two_state(kind) ? state2 : nullptr, n};
        kbit::ref::run32(kernels(), kbit::Elem<T>::dtype, kind, h, m, unorm, max_unorm, param_norm, parallel(16));
        return KBIT_STATUS_SUCCESS;
    });
}

template <class T>
kbit_status optim8(const char* fn, Kind kind, T* p, T* g, unsigned char* state1, unsigned char* state2,
                   float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
                   float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
                   float gnorm_scale, bool skip_zeros, int n) {
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_optim8_blockwise(fn, kind, p, g, state1, state2, quantiles1,
                                                              quantiles2, absmax1, absmax2, step, n, &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const bool two = kbit::optim::two_state(kind);
        const Hyper h{beta1, beta2, beta3, alpha, eps, weight_decay, lr, gnorm_scale, step, skip_zeros};
        const kbit::ref::Mem8 m{p,          g,          state1,  two ? state2 : nullptr, quantiles1,
                                two ? quantiles2 : nullptr, absmax1, two ? absmax2 : nullptr, n};
        kbit::ref::run8(kernels(), kbit::Elem<T>::dtype, kind, h, m, parallel(64));
        return KBIT_STATUS_SUCCESS;
    });
}

}  // namespace

// One exported function per optimizer and type, each forwarding to the templates above.
#define KBIT_OPTIM32(name, T, kind)                                                                   \
    KBIT_API kbit_status name(T* g, T* p, float* state1, float* state2, float* unorm, float max_unorm, \
                              float param_norm, const float beta1, const float beta2, const float beta3, \
                              const float alpha, const float eps, const float weight_decay, const int step, \
                              const float lr, const float gnorm_scale, bool skip_zeros, const int n) {    \
        return optim32<T>(#name, Kind::kind, g, p, state1, state2, unorm, max_unorm, param_norm, beta1,  \
                          beta2, beta3, alpha, eps, weight_decay, step, lr, gnorm_scale, skip_zeros, n);  \
    }

#define KBIT_OPTIM8(name, T, kind)                                                                         \
    KBIT_API kbit_status name(T* p, T* g, unsigned char* state1, unsigned char* state2, float beta1,        \
                              float beta2, float beta3, float alpha, float eps, int step, float lr,         \
                              float* quantiles1, float* quantiles2, float* absmax1, float* absmax2,         \
                              float weight_decay, const float gnorm_scale, bool skip_zeros, int n) {        \
        return optim8<T>(#name, Kind::kind, p, g, state1, state2, beta1, beta2, beta3, alpha, eps, step, lr, \
                         quantiles1, quantiles2, absmax1, absmax2, weight_decay, gnorm_scale, skip_zeros, n); \
    }

extern "C" {

KBIT_API uint32_t kbit_optim8_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_OPTIM8_VERSION_MAJOR, KBIT_OPTIM8_VERSION_MINOR);
}

KBIT_OPTIM32(cadam32bit_grad_fp32, float, Adam)
KBIT_OPTIM32(cadam32bit_grad_fp16, kbit_half, Adam)
KBIT_OPTIM32(cadam32bit_grad_bf16, kbit_bf16, Adam)
KBIT_OPTIM32(cademamix32bit_grad_fp32, float, AdEMAMix)
KBIT_OPTIM32(cademamix32bit_grad_fp16, kbit_half, AdEMAMix)
KBIT_OPTIM32(cademamix32bit_grad_bf16, kbit_bf16, AdEMAMix)
KBIT_OPTIM32(clion32bit_grad_fp32, float, Lion)
KBIT_OPTIM32(clion32bit_grad_fp16, kbit_half, Lion)
KBIT_OPTIM32(clion32bit_grad_bf16, kbit_bf16, Lion)
KBIT_OPTIM32(cmomentum32bit_grad_32, float, Momentum)
KBIT_OPTIM32(cmomentum32bit_grad_16, kbit_half, Momentum)
KBIT_OPTIM32(crmsprop32bit_grad_32, float, RMSprop)
KBIT_OPTIM32(crmsprop32bit_grad_16, kbit_half, RMSprop)
KBIT_OPTIM32(cadagrad32bit_grad_32, float, Adagrad)
KBIT_OPTIM32(cadagrad32bit_grad_16, kbit_half, Adagrad)
KBIT_OPTIM32(kbit_momentum32bit_grad_bf16, kbit_bf16, Momentum)
KBIT_OPTIM32(kbit_rmsprop32bit_grad_bf16, kbit_bf16, RMSprop)
KBIT_OPTIM32(kbit_adagrad32bit_grad_bf16, kbit_bf16, Adagrad)

KBIT_OPTIM8(cadam_8bit_blockwise_grad_fp32, float, Adam)
KBIT_OPTIM8(cadam_8bit_blockwise_grad_fp16, kbit_half, Adam)
KBIT_OPTIM8(cadam_8bit_blockwise_grad_bf16, kbit_bf16, Adam)
KBIT_OPTIM8(cmomentum_8bit_blockwise_grad_fp32, float, Momentum)
KBIT_OPTIM8(cmomentum_8bit_blockwise_grad_fp16, kbit_half, Momentum)
KBIT_OPTIM8(cmomentum_8bit_blockwise_grad_bf16, kbit_bf16, Momentum)
KBIT_OPTIM8(crmsprop_8bit_blockwise_grad_fp32, float, RMSprop)
KBIT_OPTIM8(crmsprop_8bit_blockwise_grad_fp16, kbit_half, RMSprop)
KBIT_OPTIM8(crmsprop_8bit_blockwise_grad_bf16, kbit_bf16, RMSprop)
KBIT_OPTIM8(clion_8bit_blockwise_grad_fp32, float, Lion)
KBIT_OPTIM8(clion_8bit_blockwise_grad_fp16, kbit_half, Lion)
KBIT_OPTIM8(clion_8bit_blockwise_grad_bf16, kbit_bf16, Lion)
KBIT_OPTIM8(cadagrad_8bit_blockwise_grad_fp32, float, Adagrad)
KBIT_OPTIM8(cadagrad_8bit_blockwise_grad_fp16, kbit_half, Adagrad)
KBIT_OPTIM8(cadagrad_8bit_blockwise_grad_bf16, kbit_bf16, Adagrad)
KBIT_OPTIM8(cademamix_8bit_blockwise_grad_fp32, float, AdEMAMix)
KBIT_OPTIM8(cademamix_8bit_blockwise_grad_fp16, kbit_half, AdEMAMix)
KBIT_OPTIM8(cademamix_8bit_blockwise_grad_bf16, kbit_bf16, AdEMAMix)

}  // extern "C"
