// The bitsandbytes-CPU kernel table of the active ISA, assembled once: the reference fills the slot,
// the SIMD source overrides it (see kernels_bnb_cpu.h and cpu_isa.h).
#include "kernels_bnb_cpu.h"

#include "ref_bnb_cpu.h"

namespace kbit::cpu {

const BnbCpuKernels& bnb_cpu_kernels() {
    static const BnbCpuKernels table = [] {
        BnbCpuKernels t{&ref::bnb_cpu_gemv_4bit_groups};
#if !KBIT_CPU_ARM64  // x86-only kernels (cpu_isa.h); AArch64 keeps the reference's slot
        override_for_active_isa(t, &N_AVX3::OverrideBnbGemv, &N_AVX2::OverrideBnbGemv);
#endif
        return t;
    }();
    return table;
}

}  // namespace kbit::cpu
