// kernels_optim8.h — the optimizer kernel table of the CPU backend (the idiom of every family:
// cpu_isa.h). ref::OptimKernels (ref_optim8.h, indexed [dtype][Kind], shared with the reference's
// run32 / run8, which fix the order of a call) is filled from the scalar reference, then overridden
// for the active ISA by the Highway kernels of kernels_optim8_simd.cpp. The drivers are in ops_optim8.cpp.
#pragma once

#include "cpu_isa.h"
#include "ref_optim8.h"

namespace kbit::cpu {

// The table of the active ISA, assembled once (kernels_optim8.cpp).
const ref::OptimKernels& optim_kernels();

// The overrides of the Highway source, per target (see cpu_isa.h).
KBIT_HWY_OVERRIDES(void OverrideOptim(ref::OptimKernels& table);)  // kernels_optim8_simd.cpp

}  // namespace kbit::cpu
