// cpu_isa.h — the instruction set the CPU backend's kernels use, chosen once per process from cpuid
// and capped by the environment variable KBIT_CPU_ISA=ref|avx2|avx512.
#pragma once

namespace kbit::cpu {

enum class Isa { Ref = 0, Avx2 = 1, Avx512 = 2 };

// The ISA in use (computed on first call, thread-safe, never changes afterwards).
Isa active_isa();

// Lower-case name: "ref", "avx2", "avx512".
const char* isa_name(Isa isa);

// Best ISA this CPU supports, ignoring KBIT_CPU_ISA.
Isa detected_isa();

// KBIT_CPU_ISA as read at start-up ("" when unset), and whether it was understood.
const char* isa_cap_setting();
bool isa_cap_valid();

// Highway kernel files compile their kernels for two targets only, the AVX2 target (namespace
// N_AVX2) for Isa::Avx2 and the AVX3 target (N_AVX3) for Isa::Avx512: `#if KBIT_HWY_KERNEL_TARGET`
// around the kernels, and for_active_isa in the HWY_ONCE part to pick the instance.
#define KBIT_HWY_KERNEL_TARGET (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3)

// The instance (kernel or kernel table) for the active ISA; nullptr under Isa::Ref.
template <class T>
T* for_active_isa(T* avx512, T* avx2) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512;
        case Isa::Avx2: return avx2;
        default: return nullptr;
    }
}

}  // namespace kbit::cpu
