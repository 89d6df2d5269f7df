/* C99 check of the public headers against the ABI lists: takes the address of every function of the
 * interfaces of one backend through a pointer typed from abi/kbit_<iface>.def, so a header/list
 * mismatch fails to compile (-Werror) and a missing export fails to link. The interfaces come from
 * kbit_test_interfaces.h, which tests/CMakeLists.txt writes per backend: for each interface
 * KBIT_IFACE(<its version function>) and the #include of its list. */
#include <stdio.h>

#include "kbit/kbit.h"
#ifdef KBIT_TEST_BNB_CPU
#include "kbit/kbit_bnb_cpu.h"
#endif

typedef void (*any_fn)(void);

#define KBIT_IFACE(version)
#define KBIT_FN(minor, ret, name, params, args, variant) static ret(*const p_##name) params = &name;
#include "kbit_test_interfaces.h"
#undef KBIT_FN
#undef KBIT_IFACE

#define KBIT_IFACE(version) {#version, (any_fn)&version},
#define KBIT_FN(minor, ret, name, params, args, variant) {#name, (any_fn)p_##name},
static const struct {
    const char* name;
    any_fn fn;
} functions[] = {
#include "kbit_test_interfaces.h"
};
#undef KBIT_FN
#undef KBIT_IFACE

int main(void) {
    size_t i, count = sizeof functions / sizeof functions[0];
    for (i = 0; i < count; ++i) {
        if (functions[i].fn == NULL) {
            printf("missing: %s\n", functions[i].name);
            return 1;
        }
    }
    if (KBIT_VERSION_MAJOR_OF(kbit_core_interface_version()) != KBIT_CORE_VERSION_MAJOR) {
        printf("core major %u differs from the header's %d\n",
               (unsigned)KBIT_VERSION_MAJOR_OF(kbit_core_interface_version()), KBIT_CORE_VERSION_MAJOR);
        return 1;
    }
    printf("%u functions resolved\n", (unsigned)count);
    return 0;
}
