#include "cpu_isa.h"

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace kbit::cpu {
namespace {

struct IsaChoice {
    Isa detected = Isa::Ref;
    Isa active = Isa::Ref;
    std::string cap;
    bool cap_valid = true;
};

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // Highway's AVX3 target (our avx512 kernels) needs F, VL, DQ and BW.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        return __builtin_cpu_supports("avx512vbmi") ? Isa::Avx512Vbmi : Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return Isa::Avx2;
#elif defined(__aarch64__)
    // The kernel's hardware capabilities (what it enables for this process), with the features
    // Highway's targets are compiled for: NEON (its A64 target assumes AES), SVE ("+sve"), SVE2
    // ("+sve2-aes"). Constants from <asm/hwcap.h>, spelled out so that any C library's headers do.
    constexpr unsigned long kHwcapAes = 1ul << 3, kHwcapAsimd = 1ul << 1, kHwcapSve = 1ul << 22;
    constexpr unsigned long kHwcap2Sve2 = 1ul << 1, kHwcap2SveAes = 1ul << 2;
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if ((hw & kHwcapAsimd) == 0 || (hw & kHwcapAes) == 0) return Isa::Ref;
    if ((hw & kHwcapSve) == 0) return Isa::Neon;
    return (hw2 & kHwcap2Sve2) != 0 && (hw2 & kHwcap2SveAes) != 0 ? Isa::Sve2 : Isa::Sve;
#endif
    return Isa::Ref;
}

// KBIT_CPU_ISA's names of this architecture's levels (the other architecture's are not understood).
bool parse_cap(const char* s, Isa* isa) {
#if defined(__aarch64__)
    constexpr Isa kLevels[] = {Isa::Ref, Isa::Neon, Isa::Sve, Isa::Sve2};
#else
    constexpr Isa kLevels[] = {Isa::Ref, Isa::Avx2, Isa::Avx512, Isa::Avx512Vbmi};
#endif
    for (Isa level : kLevels)
        if (std::strcmp(s, isa_name(level)) == 0) {
            *isa = level;
            return true;
        }
    return false;
}

const IsaChoice& choice() {
    static const IsaChoice c = [] {
        IsaChoice r;
        r.detected = detect();
        r.active = r.detected;
        const char* env = std::getenv("KBIT_CPU_ISA");
        if (env != nullptr && env[0] != '\0') {
            r.cap = env;
            Isa cap;
            if (!parse_cap(env, &cap)) {
                r.cap_valid = false;
                return r;
            }
            if (static_cast<int>(cap) < static_cast<int>(r.active)) r.active = cap;
        }
        return r;
    }();
    return c;
}

}  // namespace

#if defined(__aarch64__)
bool cpu_has_arm_dotprod() {
    constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP of <asm/hwcap.h>
    static const bool has = (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
    return has;
}
#endif

Isa active_isa() { return choice().active; }
Isa detected_isa() { return choice().detected; }
const char* isa_cap_setting() { return choice().cap.c_str(); }
bool isa_cap_valid() { return choice().cap_valid; }

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Avx512Vbmi: return "avx512vbmi";
        case Isa::Avx512: return "avx512";
        case Isa::Avx2: return "avx2";
        case Isa::Neon: return "neon";
        case Isa::Sve: return "sve";
        case Isa::Sve2: return "sve2";
        default: return "ref";
    }
}

}  // namespace kbit::cpu
