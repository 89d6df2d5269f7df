// cpu_isa.h — the instruction set the CPU backend's kernels use, chosen once per process from cpuid
// (x86-64) or the kernel's hardware capabilities (AArch64: getauxval) and capped by the environment
// variable KBIT_CPU_ISA=ref|avx2|avx512|avx512vbmi (x86-64) or ref|neon|sve|sve2 (AArch64).
#pragma once

namespace kbit::cpu {

// Ordered levels: each runs every kernel of the levels below it that it does not replace.
// Avx512Vbmi is Avx512 (Highway's AVX3 kernels) plus the kernels that need AVX-512 VBMI's byte
// permutes (Ice Lake, Zen 4 and later); its own level so that KBIT_CPU_ISA=avx512 still runs, and
// tests, the AVX3 kernels those replace, which AVX-512 CPUs without VBMI (Skylake-SP, Cascade Lake) use.
// AArch64 has its own ladder above Ref, in the high byte: Neon (Advanced SIMD, with AES as Highway's
// NEON target requires), Sve, Sve2 (Highway's targets of those names, vector-length agnostic). A level
// of one architecture is never "at least" a level of the other (isa_at_least).
enum class Isa { Ref = 0, Avx2 = 1, Avx512 = 2, Avx512Vbmi = 3, Neon = 0x101, Sve = 0x102, Sve2 = 0x103 };

// The ISA in use (computed on first call, thread-safe, never changes afterwards).
Isa active_isa();

// Lower-case name: "ref", "avx2", "avx512", "avx512vbmi", "neon", "sve", "sve2" (KBIT_CPU_ISA's spelling).
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
// override_for_active_isa(table, KBIT_HWY_HOOKS(Override<Part>)) (on x86-64 &N_AVX3::Override<Part>,
// &N_AVX2::Override<Part>). On AArch64 the vector-length-agnostic sources (ScalableTag) are compiled
// for Highway's NEON, SVE and SVE2 targets instead (N_NEON, N_SVE, N_SVE2 for Isa::Neon, Sve, Sve2);
// the 256-bit and x86-only sources are left out of that build, and their slots keep the reference
// (bit-identical by the contract of every quantize and dequantize kernel). Kernels of
// Isa::Avx512Vbmi are intrinsics under a target attribute (not Highway), applied after the AVX3 ones
// by a hook of their own, `void override_<family>_avx512vbmi(Table&)`, which checks
// isa_at_least(Isa::Avx512Vbmi) itself (and a library's, override_<family>_<library>, whether it may
// be used).
#if defined(__aarch64__)
#define KBIT_CPU_ARM64 1
#define KBIT_HWY_KERNEL_TARGET (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2)
// Declares the overrides of vector-length-agnostic Highway sources in the namespaces of the AArch64
// kernel targets (kernels_<family>.h); the 256-bit x86 sources are not built there (src/cpu/CMakeLists.txt).
#define KBIT_HWY_OVERRIDES(...)      \
    namespace N_NEON { __VA_ARGS__ } \
    namespace N_SVE { __VA_ARGS__ }  \
    namespace N_SVE2 { __VA_ARGS__ }
// The hooks of one override function, best level first, for override_for_active_isa.
#define KBIT_HWY_HOOKS(fn) &N_SVE2::fn, &N_SVE::fn, &N_NEON::fn
// Sources that keep vectors in structs (sized types only; SVE's are sizeless) are compiled for NEON
// alone; the SVE levels run those NEON kernels (a level runs the kernels of the levels below it).
#define KBIT_HWY_SIZED_KERNEL_TARGET (HWY_TARGET == HWY_NEON)
#define KBIT_HWY_SIZED_HOOKS(fn) nullptr, nullptr, &N_NEON::fn
#else
#define KBIT_CPU_ARM64 0
#define KBIT_HWY_KERNEL_TARGET (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3)

// Declares the overrides of Highway sources compiled for both kernel targets in both namespaces
// (kernels_<family>.h).
#define KBIT_HWY_OVERRIDES(...)      \
    namespace N_AVX2 { __VA_ARGS__ } \
    namespace N_AVX3 { __VA_ARGS__ }
#define KBIT_HWY_HOOKS(fn) &N_AVX3::fn, &N_AVX2::fn
#define KBIT_HWY_SIZED_KERNEL_TARGET KBIT_HWY_KERNEL_TARGET
#define KBIT_HWY_SIZED_HOOKS(fn) KBIT_HWY_HOOKS(fn)
#endif

#if KBIT_CPU_ARM64
// Whether the CPU has the dot-product extension (SDOT/UDOT, HWCAP_ASIMDDP), which no level requires:
// the int8 GEMM's SDOT kernel (kernels_igemm_dotprod.cpp) is used from Isa::Neon up where it is true.
bool cpu_has_arm_dotprod();
#endif

// Whether the active ISA is `isa` or a level above it on the same architecture (Ref: always).
inline bool isa_at_least(Isa isa) {
    const int want = static_cast<int>(isa), have = static_cast<int>(active_isa());
    return want == 0 || ((want >> 8) == (have >> 8) && have >= want);
}

// Applies the overrides of the active ISA to `table`. x86-64: avx512(table) (Isa::Avx512 and above)
// or avx2(table); AArch64: neon(table) from Isa::Neon up, then sve(table) from Isa::Sve up, then
// sve2(table) under Isa::Sve2. Any hook may be nullptr (that ISA keeps the slots it has); nothing
// under Isa::Ref. Callers name a Highway override by KBIT_HWY_HOOKS(Override<Part>).
template <class Table>
struct OverrideHook {
    using type = void (*)(Table&);  // a non-deduced context, so that nullptr can be passed
};
#if KBIT_CPU_ARM64
template <class Table>
void override_for_active_isa(Table& table, typename OverrideHook<Table>::type sve2,
                             typename OverrideHook<Table>::type sve, typename OverrideHook<Table>::type neon) {
    if (neon != nullptr && isa_at_least(Isa::Neon)) neon(table);
    if (sve != nullptr && isa_at_least(Isa::Sve)) sve(table);
    if (sve2 != nullptr && isa_at_least(Isa::Sve2)) sve2(table);
}
#else
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
#endif

}  // namespace kbit::cpu
