// cpu_optim8.h — the CPU backend's optimizer kernel tables.
#pragma once

#include "cpu_isa.h"
#include "ref_optim8.h"

namespace kbit::cpu {

// The Highway kernels for `isa` (AVX2 or AVX-512); nullptr for Isa::Ref.
const ref::OptimKernels* optim_kernels_simd(Isa isa);

}  // namespace kbit::cpu
