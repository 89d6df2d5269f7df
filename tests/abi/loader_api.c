/* C99 check of kbit_loader.h and the generated kbit_loader_tables.h against the ABI lists: takes the
 * address of every loader API function through a pointer typed from abi/kbit_loader.def, stores every
 * interface function into its table member (a type mismatch fails to compile with -Werror), and checks
 * that the members follow `size` and `version` in list order. Links against libkbit.so. */
#include <stdio.h>

#include "kbit/kbit_loader.h"

#define KBIT_FN(minor, ret, name, params, args) static ret(*const p_##name) params = &name;
#include "kbit_loader.def"
#undef KBIT_FN

static int failures = 0;

#define CHECK_ORDER(table, name)                                                          \
    do {                                                                                  \
        if (offsetof(table, name) != expected) {                                          \
            printf("%s.%s at offset %u, expected %u\n", #table, #name,                    \
                   (unsigned)offsetof(table, name), (unsigned)expected);                  \
            ++failures;                                                                   \
        }                                                                                 \
        expected += sizeof(void*);                                                        \
        ++members;                                                                        \
    } while (0)

int main(void) {
    kbit_core_table core;
    kbit_4bit_table t4;
    kbit_8bit_table t8;
    kbit_optim8_table o8;
    size_t expected, members = 0;
    const size_t first = offsetof(kbit_core_table, kbit_backend_probe);

    if (offsetof(kbit_core_table, size) != 0 || offsetof(kbit_core_table, version) != sizeof(size_t)) ++failures;

#define KBIT_FN(minor, ret, name, params, args) TABLE_VAR.name = &name; CHECK_ORDER(TABLE_TYPE, name);
    expected = first;
#define TABLE_VAR core
#define TABLE_TYPE kbit_core_table
#include "kbit_core.def"
#undef TABLE_VAR
#undef TABLE_TYPE
    if (expected != sizeof(kbit_core_table)) ++failures;
    expected = first;
#define TABLE_VAR t4
#define TABLE_TYPE kbit_4bit_table
#include "kbit_4bit.def"
#undef TABLE_VAR
#undef TABLE_TYPE
    if (expected != sizeof(kbit_4bit_table)) ++failures;
    expected = first;
#define TABLE_VAR t8
#define TABLE_TYPE kbit_8bit_table
#include "kbit_8bit.def"
#undef TABLE_VAR
#undef TABLE_TYPE
    if (expected != sizeof(kbit_8bit_table)) ++failures;
    expected = first;
#define TABLE_VAR o8
#define TABLE_TYPE kbit_optim8_table
#include "kbit_optim8.def"
#undef TABLE_VAR
#undef TABLE_TYPE
    if (expected != sizeof(kbit_optim8_table)) ++failures;
#undef KBIT_FN

    t4.size = sizeof t4;
    if (!KBIT_TABLE_HAS(kbit_4bit_table, &t4, kbit_dequantize_nf4_torchao_bf16)) ++failures;
    t4.size = offsetof(kbit_4bit_table, kbit_dequantize_nf4_torchao_bf16);
    if (KBIT_TABLE_HAS(kbit_4bit_table, &t4, kbit_dequantize_nf4_torchao_bf16)) ++failures;
    if (p_kbit_loader_interface_name(KBIT_INTERFACE_4BIT)[0] != '4') ++failures;
    if (kbit_loader_interface_version() != KBIT_MAKE_VERSION(KBIT_LOADER_VERSION_MAJOR, KBIT_LOADER_VERSION_MINOR)) {
        printf("kbit_loader_interface_version() differs from the header\n");
        ++failures;
    }
    (void)core.size;
    (void)t8.size;
    (void)o8.size;
    printf("%u table members checked, %d failures\n", (unsigned)members, failures);
    return failures != 0;
}
