// cpu_optim8.h — the CPU backend's optimizer kernel tables.
#pragma once

#include "ref_optim8.h"

namespace kbit::cpu {

// The Highway kernels of the active ISA (AVX2 or AVX-512); nullptr under Isa::Ref.
const ref::OptimKernels* optim_kernels_simd();

}  // namespace kbit::cpu
