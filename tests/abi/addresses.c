/* C99 check of the public headers against the ABI lists: takes the address of every function of the
 * interfaces named by KBIT_TEST_<IFACE> macros through a pointer typed from abi/kbit_<iface>.def, so
 * a header/list mismatch fails to compile (-Werror) and a missing export fails to link. */
#include <stdio.h>

#include "kbit/kbit.h"
#ifdef KBIT_TEST_BNB_CPU
#include "kbit/kbit_bnb_cpu.h"
#endif

typedef void (*any_fn)(void);

#define KBIT_FN(minor, ret, name, params, args, variant) static ret(*const p_##name) params = &name;
#include "kbit_core.def"
#ifdef KBIT_TEST_4BIT
#include "kbit_4bit.def"
#endif
#ifdef KBIT_TEST_8BIT
#include "kbit_8bit.def"
#endif
#ifdef KBIT_TEST_OPTIM8
#include "kbit_optim8.def"
#endif
#ifdef KBIT_TEST_BNB_CPU
#include "kbit_bnb_cpu.def"
#endif
#undef KBIT_FN

#define KBIT_FN(minor, ret, name, params, args, variant) {#name, (any_fn)p_##name},
static const struct {
    const char* name;
    any_fn fn;
} functions[] = {
    {"kbit_core_interface_version", (any_fn)&kbit_core_interface_version},
#include "kbit_core.def"
#ifdef KBIT_TEST_4BIT
    {"kbit_4bit_interface_version", (any_fn)&kbit_4bit_interface_version},
#include "kbit_4bit.def"
#endif
#ifdef KBIT_TEST_8BIT
    {"kbit_8bit_interface_version", (any_fn)&kbit_8bit_interface_version},
#include "kbit_8bit.def"
#endif
#ifdef KBIT_TEST_OPTIM8
    {"kbit_optim8_interface_version", (any_fn)&kbit_optim8_interface_version},
#include "kbit_optim8.def"
#endif
#ifdef KBIT_TEST_BNB_CPU
    {"kbit_bnb_cpu_interface_version", (any_fn)&kbit_bnb_cpu_interface_version},
#include "kbit_bnb_cpu.def"
#endif
};
#undef KBIT_FN

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
