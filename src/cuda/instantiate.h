// instantiate.h — KBIT_CUDA_INSTANTIATE(op): the explicit instantiations of the kbit::ops template `op`
// (kbit_ops_<iface>.h) for the three element types, written in namespace kbit::ops of the file that
// defines it: the exported functions that call it are compiled in another translation unit
// (src/common/generated/kbit_<iface>_exports.cpp).
#pragma once

#include "kbit_half.h"

#define KBIT_CUDA_INSTANTIATE(op)                   \
    template decltype(op<float>) op<float>;         \
    template decltype(op<kbit_half>) op<kbit_half>; \
    template decltype(op<kbit_bf16>) op<kbit_bf16>
