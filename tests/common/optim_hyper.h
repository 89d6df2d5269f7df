// optim_hyper.h — the hyperparameters bitsandbytes' optimizers use by default, for the conformance
// suite and the CUDA host checks.
#pragma once

#include "kbit_optim_math.h"

namespace kbit_test {

// Hyperparameters bitsandbytes uses for each optimizer (§5.1), with weight decay wd.
inline kbit::optim::Hyper default_hyper(kbit::optim::Kind kind, int step, float wd = 0.0f) {
    using kbit::optim::Kind;
    kbit::optim::Hyper h{0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, wd, 1e-3f, 1.0f, step, false};
    switch (kind) {
        case Kind::Momentum: h.beta1 = 0.9f, h.beta2 = 0.0f, h.eps = 0.0f, h.lr = 1e-2f; break;
        case Kind::RMSprop: h.beta1 = 0.99f, h.beta2 = 0.0f, h.lr = 1e-3f; break;
        case Kind::Adagrad: h.beta1 = 0.0f, h.beta2 = 0.0f, h.eps = 1e-10f, h.lr = 1e-2f; break;
        case Kind::Lion: h.beta1 = 0.9f, h.beta2 = 0.99f, h.lr = 1e-4f; break;
        case Kind::AdEMAMix: h.beta3 = 0.9999f, h.alpha = 5.0f; break;
        default: break;
    }
    return h;
}

}  // namespace kbit_test
