// optim_dispatch.h — the switch from a call's element type and optimizer to the kernel instantiation
// of the CUDA optimizer launchers (optim32.cu, optim8_blockwise.cu): each optimizer x type is its own
// kernel, chosen once per call on the host.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kbit/kbit_core.h"
#include "kbit_dtype.h"
#include "kbit_half.h"
#include "kbit_optim_math.h"

namespace kbit::cuda {

template <optim::Kind K>
using KindTag = std::integral_constant<optim::Kind, K>;

template <class T, class Launch>
kbit_status launch_for_kind(optim::Kind kind, Launch&& launch) {
    using optim::Kind;
    switch (kind) {
        case Kind::Adam: return launch(ElemTag<T>{}, KindTag<Kind::Adam>{});
        case Kind::Momentum: return launch(ElemTag<T>{}, KindTag<Kind::Momentum>{});
        case Kind::RMSprop: return launch(ElemTag<T>{}, KindTag<Kind::RMSprop>{});
        case Kind::Lion: return launch(ElemTag<T>{}, KindTag<Kind::Lion>{});
        case Kind::Adagrad: return launch(ElemTag<T>{}, KindTag<Kind::Adagrad>{});
        default: return launch(ElemTag<T>{}, KindTag<Kind::AdEMAMix>{});
    }
}

// Returns launch(ElemTag<T>{}, KindTag<K>{}) for the T of dtype (validated by the caller: fp16, bf16,
// else fp32) and K = kind.
template <class Launch>
kbit_status launch_for(int32_t dtype, optim::Kind kind, Launch&& launch) {
    return with_dtype(dtype, [&](auto tag) { return launch_for_kind<typename decltype(tag)::type>(kind, launch); });
}

}  // namespace kbit::cuda
