// cpu_supports_shim.h — forced into the fuzz build's copy of the backend sources that call
// __builtin_cpu_supports("f16c") when the compiler is clang < 16: clang 14 rejects that feature name
// ("invalid cpu feature string for builtin"; GCC and clang 16 accept it), so F16C is read from CPUID
// here and every other feature goes to the builtin as before. The normal (GCC) build is unaffected.
#pragma once

#include <cpuid.h>

#include <cstdio>
#include <cstring>

static inline bool kbit_fuzz_cpu_supports(const char* feature) {
    if (std::strcmp(feature, "f16c") == 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
    }
#define KBIT_FUZZ_FEATURE(name) \
    if (std::strcmp(feature, name) == 0) return __builtin_cpu_supports(name);
    KBIT_FUZZ_FEATURE("avx2")
    KBIT_FUZZ_FEATURE("fma")
    KBIT_FUZZ_FEATURE("avx512f")
    KBIT_FUZZ_FEATURE("avx512vl")
    KBIT_FUZZ_FEATURE("avx512dq")
    KBIT_FUZZ_FEATURE("avx512bw")
    KBIT_FUZZ_FEATURE("avx512vnni")
    KBIT_FUZZ_FEATURE("avx512vbmi")
    KBIT_FUZZ_FEATURE("avx512bf16")
#undef KBIT_FUZZ_FEATURE
    std::fprintf(stderr, "cpu_supports_shim.h: feature \"%s\" unknown to the fuzz build's shim, taken as absent\n",
                 feature);
    return false;
}

#define __builtin_cpu_supports(feature) kbit_fuzz_cpu_supports(feature)
