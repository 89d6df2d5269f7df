// optim_dispatch.h — the switch from a call's optimizer to the kernel instantiation of the CUDA
// optimizer launchers (optim32.cu, optim8_blockwise.cu): each optimizer x element type is its own
// kernel, chosen once per call on the host.
#pragma once

#include <type_traits>

#include "kbit/kbit_core.h"
#include "kbit_optim_math.h"

namespace kbit::cuda {

template <optim::Kind K>
using KindTag = std::integral_constant<optim::Kind, K>;

// Returns launch(KindTag<K>{}) for K = kind (validated by the caller: anything else is AdEMAMix).
template <class Launch>
kbit_status with_kind(optim::Kind kind, Launch&& launch) {
    using optim::Kind;
    switch (kind) {
        case Kind::Adam: return launch(KindTag<Kind::Adam>{});
        case Kind::Momentum: return launch(KindTag<Kind::Momentum>{});
        case Kind::RMSprop: return launch(KindTag<Kind::RMSprop>{});
        case Kind::Lion: return launch(KindTag<Kind::Lion>{});
        case Kind::Adagrad: return launch(KindTag<Kind::Adagrad>{});
        default: return launch(KindTag<Kind::AdEMAMix>{});
    }
}

}  // namespace kbit::cuda
