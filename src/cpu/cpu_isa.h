// cpu_isa.h — the instruction set the CPU backend's kernels use, chosen once per process from cpuid
// and capped by the environment variable KBIT_CPU_ISA=ref|avx2|avx512|avx512vbmi.
#pragma once

namespace kbit::cpu {

// Ordered levels: each runs every kernel of the levels below it that it does not replace.
// Avx512Vbmi is Avx512 (Highway's AVX3 kernels) plus the kernels that need AVX-512 VBMI's byte
// permutes (Ice Lake, Zen 4 and later); its own level so that KBIT_CPU_ISA=avx512 still runs, and
// tests, the AVX3 kernels those replace, which AVX-512 CPUs without VBMI (Skylake-SP, Cascade Lake) use.
enum class Isa { Ref = 0, Avx2 = 1, Avx512 = 2, Avx512Vbmi = 3 };

// The ISA in use (computed on first call, thread-safe, never changes afterwards).
Isa active_isa();

// Lower-case name: "ref", "avx2", "avx512", "avx512vbmi" (KBIT_CPU_ISA's spelling).
const char* isa_name(Isa isa);

// Best ISA this CPU supports, ignoring KBIT_CPU_ISA.
Isa detected_isa();

// KBIT_CPU_ISA as read at start-up ("" when unset), and whether it was understood.
const char* isa_cap_setting();
bool isa_cap_valid();

// Kernel tables. Each kernel family has a typed table struct (kernels_<family>.h) whose every slot
// the scalar reference fills first; that table is the one under Isa::Ref. The SIMD sources then
// override the slots they implement for the active ISA. The table is assembled once per process (a
// function-local static in kernels_<family>.cpp), and callers call its slots without testing them. A
// kernel with a precondition says so through a named capability in its table (a `supports` predicate
// or a flag), never through a null slot.
//
// Highway kernel files compile their kernels for two targets only, the AVX2 target (namespace
// N_AVX2) for Isa::Avx2 and the AVX3 target (N_AVX3) for Isa::Avx512 and above (`#if
// KBIT_HWY_KERNEL_TARGET` or `#if HWY_TARGET == HWY_AVX2 / HWY_AVX3` around the kernels). Each target
// a file is compiled for defines `void kbit::cpu::N_<target>::Override<Part>(Table&)`, declared in
// kernels_<family>.h, which sets that target's slots; the table assembly applies the active ISA's with
// override_for_active_isa(table, &N_AVX3::Override<Part>, &N_AVX2::Override<Part>). Kernels of
// Isa::Avx512Vbmi are intrinsics under a target attribute (not Highway), applied after the AVX3 ones
// by a hook of their own, `void override_<family>_avx512vbmi(Table&)`, which checks
// isa_at_least(Isa::Avx512Vbmi) itself (and a library's, override_<family>_<library>, whether it may
// be used).
#define KBIT_HWY_KERNEL_TARGET (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3)

// Declares the overrides of Highway sources compiled for both kernel targets in both namespaces
// (kernels_<family>.h).
#define KBIT_HWY_OVERRIDES(...)      \
    namespace N_AVX2 { __VA_ARGS__ } \
    namespace N_AVX3 { __VA_ARGS__ }

// Whether the active ISA is `isa` or a level above it.
inline bool isa_at_least(Isa isa) { return static_cast<int>(active_isa()) >= static_cast<int>(isa); }

// Applies the overrides of the active ISA to `table`: avx512(table) (Isa::Avx512 and above) or
// avx2(table), either of which may be nullptr (that ISA keeps the slots it has); nothing under Isa::Ref.
template <class Table>
struct OverrideHook {
    using type = void (*)(Table&);  // a non-deduced context, so that nullptr can be passed
};
template <class Table>
void override_for_active_isa(Table& table, typename OverrideHook<Table>::type avx512,
                             typename OverrideHook<Table>::type avx2) {
    switch (active_isa()) {
        case Isa::Avx512:
        case Isa::Avx512Vbmi:
            if (avx512 != nullptr) avx512(table);
            break;
        case Isa::Avx2:
            if (avx2 != nullptr) avx2(table);
            break;
        default: break;
    }
}

}  // namespace kbit::cpu
