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

#define KBIT_INTERFACE(name, NAME, ns)                 \
    static_assert(max_since(ns::All{}) <= ns::kMinor, \
                  "abi/kbit_" #name ".def is newer than the loader's minor");
#include "interfaces.def"
#undef KBIT_INTERFACE

#ifndef KBIT_LOADER_TEST_ABI
// The public tables are generated from the same lists: same size, same member offsets.
#define KBIT_LOADER_SAME_OFFSET(ns, pub)                                                   \
    static_assert(offsetof(ns::Table, size) == offsetof(pub, size), "size first");          \
    static_assert(offsetof(ns::Table, version) == offsetof(pub, version), "version second"); \
    static_assert(sizeof(ns::Table) == sizeof(pub), #pub " matches abi/*.def (run scripts/abi_gen.py)");
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) KBIT_LOADER_SAME_OFFSET(ns, kbit_##name##_table)
#define KBIT_INTERFACE_END(name, NAME, ns)
#define KBIT_FN(minor, ret, name, params, args, variant)
#include "kbit_all.def"
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END
#undef KBIT_FN
#undef KBIT_LOADER_SAME_OFFSET
// Member by member: the current interface's tables are named by KBIT_INTERFACE_BEGIN.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) namespace same_offsets_##ns { using Ours = ns::Table; using Public = kbit_##name##_table;
#define KBIT_INTERFACE_END(name, NAME, ns) }
#define KBIT_FN(minor, ret, name, params, args, variant) \
    static_assert(offsetof(Ours, name) == offsetof(Public, name), #name " has the same place in both tables");
#include "kbit_all.def"
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END
#undef KBIT_FN
#endif

const InterfaceInfo kInfo[kInterfaces] = {
#define KBIT_INTERFACE(name, NAME, ns) info_of<ns::Traits>(ns::kName, ns::kVersionSymbol, ns::kMajor, ns::kMinor),
#include "interfaces.def"
#undef KBIT_INTERFACE
};

}  // namespace

const InterfaceInfo& interface_info(int iface) { return kInfo[iface]; }

}  // namespace kbit::loader
