/* C99 check of kbit_loader.h and the generated kbit_loader_tables.h against the ABI lists: takes the
 * address of every loader API function through a pointer typed from abi/kbit_loader.def, stores every
 * interface function into its table member (a type mismatch fails to compile with -Werror), and checks
 * that the members follow `size` and `version` in list order. Links against libkbit.so. */
#include <stdio.h>

#include "kbit/kbit_loader.h"

#define KBIT_FN(minor, ret, name, params, args, variant) static ret(*const p_##name) params = &name;
#include "kbit_loader.def"
#undef KBIT_FN

static int failures = 0;

/* The member `name` of the local `table` sits at `expected`, the next free pointer slot. */
#define CHECK_ORDER(name)                                                                   \
    do {                                                                                    \
        const size_t at = (size_t)((const char*)&table.name - (const char*)&table);         \
        if (at != expected) {                                                               \
            printf("%s at offset %u, expected %u\n", #name, (unsigned)at, (unsigned)expected); \
            ++failures;                                                                     \
        }                                                                                   \
        expected += sizeof(void*);                                                          \
        ++members;                                                                          \
    } while (0)

int main(void) {
    kbit_4bit_table t4;
    size_t expected, members = 0;
    const size_t first = offsetof(kbit_core_table, kbit_backend_probe);

    if (offsetof(kbit_core_table, size) != 0 || offsetof(kbit_core_table, version) != sizeof(size_t)) ++failures;

    /* Every interface of abi/interfaces.def, each in a block with its own `table`. */
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) \
    {                                        \
        kbit_##name##_table table;           \
        expected = first;
#define KBIT_INTERFACE_END(name, NAME, ns)              \
        if (expected != sizeof table) ++failures;       \
        (void)table.size;                               \
    }
#define KBIT_FN(minor, ret, name, params, args, variant) \
    table.name = &name;                         \
    CHECK_ORDER(name);
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN

    t4.size = sizeof t4;
    if (!KBIT_TABLE_HAS(kbit_4bit_table, &t4, kbit_dequantize_nf4_torchao_bf16)) ++failures;
    t4.size = offsetof(kbit_4bit_table, kbit_dequantize_nf4_torchao_bf16);
    if (KBIT_TABLE_HAS(kbit_4bit_table, &t4, kbit_dequantize_nf4_torchao_bf16)) ++failures;
    if (p_kbit_loader_interface_name(KBIT_INTERFACE_4BIT)[0] != '4') ++failures;
    if (kbit_loader_interface_version() != KBIT_MAKE_VERSION(KBIT_LOADER_VERSION_MAJOR, KBIT_LOADER_VERSION_MINOR)) {
        printf("kbit_loader_interface_version() differs from the header\n");
        ++failures;
    }
    printf("%u table members checked, %d failures\n", (unsigned)members, failures);
    return failures != 0;
}
