// The optimizer interface of libkbit_cpu.so: argument checks, kernel choice (scalar reference or
// Highway per KBIT_CPU_ISA) and OpenMP threads over independent ranges (chunks of 4096 elements for
// the 32-bit optimizers, 256-element blocks for the 8-bit ones), so results do not depend on the
// thread count.
#include "kbit/kbit_optim8.h"
#include "kbit_error.h"
#include "kbit_half.h"
#include "kbit_validate_optim8.h"
#include "kernels_optim8.h"
#include "parallel_range.h"
#include "ref_optim8.h"

namespace {

using kbit::optim::Hyper;
using kbit::optim::Kind;

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
        kbit::ref::run32(kbit::cpu::optim_kernels(), kbit::Elem<T>::dtype, kind, h, m, unorm, max_unorm, param_norm,
                         parallel(16));
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
        kbit::ref::run8(kbit::cpu::optim_kernels(), kbit::Elem<T>::dtype, kind, h, m, parallel(64));
        return KBIT_STATUS_SUCCESS;
    });
}

}  // namespace

// Every exported update, forwarding to the templates above.
#include "kbit_export_optim8.h"
