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

}  // namespace kbit::cpu
