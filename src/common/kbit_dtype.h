// kbit_dtype.h — the one switch from a runtime kbit dtype (KBIT_DTYPE_FP32 / FP16 / BF16) to the
// element type, for host code of every backend (the export layer, CUDA's launchers).
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit_half.h"

namespace kbit {

// The element type T as a value, for generic lambdas: [](auto tag) { using T = typename decltype(tag)::type; }.
template <class T>
struct ElemTag {
    using type = T;
};

// Returns f(ElemTag<T>{}) for the element type of a validated dtype (KBIT_DTYPE_FP16, KBIT_DTYPE_BF16,
// else fp32).
template <class F>
decltype(auto) with_dtype(int32_t dtype, F&& f) {
    switch (dtype) {
        case KBIT_DTYPE_FP16: return f(ElemTag<kbit_half>{});
        case KBIT_DTYPE_BF16: return f(ElemTag<kbit_bf16>{});
        default: return f(ElemTag<float>{});
    }
}

}  // namespace kbit

// Explicitly instantiates the function template `op` of the enclosing namespace for the three element
// types, for callers compiled in another file (a backend's typed operations of kbit_ops_<iface>.h, the
// CPU backend's kernel tables and overrides).
#define KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(op)   \
    template decltype(op<float>) op<float>;         \
    template decltype(op<kbit_half>) op<kbit_half>; \
    template decltype(op<kbit_bf16>) op<kbit_bf16>
