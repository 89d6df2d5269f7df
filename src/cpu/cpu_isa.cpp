#include "cpu_isa.h"

#include <cstdlib>
#include <cstring>
#include <string>

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
#endif
    return Isa::Ref;
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
            if (std::strcmp(env, "ref") == 0) cap = Isa::Ref;
            else if (std::strcmp(env, "avx2") == 0) cap = Isa::Avx2;
            else if (std::strcmp(env, "avx512") == 0) cap = Isa::Avx512;
            else if (std::strcmp(env, "avx512vbmi") == 0) cap = Isa::Avx512Vbmi;
            else {
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

Isa active_isa() { return choice().active; }
Isa detected_isa() { return choice().detected; }
const char* isa_cap_setting() { return choice().cap.c_str(); }
bool isa_cap_valid() { return choice().cap_valid; }

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Avx512Vbmi: return "avx512vbmi";
        case Isa::Avx512: return "avx512";
        case Isa::Avx2: return "avx2";
        default: return "ref";
    }
}

}  // namespace kbit::cpu
