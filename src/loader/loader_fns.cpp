// Facts about each interface, and compile-time checks that the loader's tables (from abi/*.def) have
// exactly the layout of the public tables in kbit_loader_tables.h (generated from the same lists).
#include "loader_fns.h"

namespace kbit::loader {
namespace {

template <class D>
constexpr uint32_t since_of() {
    if constexpr (std::is_same_v<D, ListEnd>) return 0;
    else return D::since;
}

template <class... D>
constexpr uint32_t max_since(List<D...>) {
    uint32_t m = 0;
    ((m = since_of<D>() > m ? since_of<D>() : m), ...);
    return m;
}

template <class... D>
constexpr uint32_t count(List<D...>) {
    return ((std::is_same_v<D, ListEnd> ? 0u : 1u) + ...);
}

template <class T>
constexpr InterfaceInfo info_of(const char* name, const char* symbol, uint32_t major, uint32_t minor) {
    return InterfaceInfo{name, symbol, major, minor, count(typename T::Functions{})};
}

static_assert(max_since(core::All{}) <= core::kMinor, "abi/kbit_core.def is newer than the loader's minor");
static_assert(max_since(b4::All{}) <= b4::kMinor, "abi/kbit_4bit.def is newer than the loader's minor");
static_assert(max_since(b8::All{}) <= b8::kMinor, "abi/kbit_8bit.def is newer than the loader's minor");
static_assert(max_since(o8::All{}) <= o8::kMinor, "abi/kbit_optim8.def is newer than the loader's minor");

#ifndef KBIT_LOADER_TEST_ABI
// The public tables are generated from the same lists: same size, same member offsets.
#define KBIT_LOADER_SAME_OFFSET(ns, pub)                                                   \
    static_assert(offsetof(ns::Table, size) == offsetof(pub, size), "size first");          \
    static_assert(offsetof(ns::Table, version) == offsetof(pub, version), "version second"); \
    static_assert(sizeof(ns::Table) == sizeof(pub), #pub " matches abi/*.def (run scripts/abi_gen.py)");
KBIT_LOADER_SAME_OFFSET(core, kbit_core_table)
KBIT_LOADER_SAME_OFFSET(b4, kbit_4bit_table)
KBIT_LOADER_SAME_OFFSET(b8, kbit_8bit_table)
KBIT_LOADER_SAME_OFFSET(o8, kbit_optim8_table)
#undef KBIT_LOADER_SAME_OFFSET
#define KBIT_FN(minor, ret, name, params, args) \
    static_assert(offsetof(TABLE, name) == offsetof(PUBLIC, name), #name " has the same place in both tables");
#define TABLE core::Table
#define PUBLIC kbit_core_table
#include "kbit_core.def"
#undef TABLE
#undef PUBLIC
#define TABLE b4::Table
#define PUBLIC kbit_4bit_table
#include "kbit_4bit.def"
#undef TABLE
#undef PUBLIC
#define TABLE b8::Table
#define PUBLIC kbit_8bit_table
#include "kbit_8bit.def"
#undef TABLE
#undef PUBLIC
#define TABLE o8::Table
#define PUBLIC kbit_optim8_table
#include "kbit_optim8.def"
#undef TABLE
#undef PUBLIC
#undef KBIT_FN
#endif

const InterfaceInfo kInfo[kInterfaces] = {
    info_of<core::Traits>("core", core::kVersionSymbol, core::kMajor, core::kMinor),
    info_of<b4::Traits>("4bit", b4::kVersionSymbol, b4::kMajor, b4::kMinor),
    info_of<b8::Traits>("8bit", b8::kVersionSymbol, b8::kMajor, b8::kMinor),
    info_of<o8::Traits>("optim8", o8::kVersionSymbol, o8::kMajor, o8::kMinor),
};

}  // namespace

const InterfaceInfo& interface_info(int iface) { return kInfo[iface]; }

}  // namespace kbit::loader
