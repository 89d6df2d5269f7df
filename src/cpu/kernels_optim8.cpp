// The optimizer kernel table of the active ISA, assembled once: the reference fills every slot, the
// SIMD source overrides them (see kernels_optim8.h and cpu_isa.h).
#include "kernels_optim8.h"

namespace kbit::cpu {

const ref::OptimKernels& optim_kernels() {
    static const ref::OptimKernels table = [] {
        ref::OptimKernels t = ref::optim_kernels();
        override_for_active_isa(t, KBIT_HWY_SIZED_HOOKS(OverrideOptim));
        return t;
    }();
    return table;
}

}  // namespace kbit::cpu
