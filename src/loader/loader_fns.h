// loader_fns.h — compile-time descriptions of every interface function, so the loader never lists a
// function by hand. For each interface, a file generated from abi/kbit_<iface>.def by
// scripts/abi_gen.py (src/loader/generated/kbit_<iface>_functions.h) spells out a table struct with the
// layout of the public kbit_<iface>_table, one descriptor per function (its table member and so its
// type, name, since-minor, result kind) and the list of all descriptors in table order. A test
// build generates those files from a longer list and raises one interface's minor
// (KBIT_LOADER_TEST_INTERFACE below; tests/loader: older-minor backends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kbit/kbit_loader.h"

// A test loader of a made-up later minor of one interface: -DKBIT_LOADER_TEST_INTERFACE=<id>
// -DKBIT_LOADER_TEST_MINOR=<minor> (tests/loader). Every other interface has its header's minor.
#ifndef KBIT_LOADER_TEST_INTERFACE
#define KBIT_LOADER_TEST_INTERFACE (-1)
#define KBIT_LOADER_TEST_MINOR 0
#endif

namespace kbit::loader {

constexpr int kInterfaces = KBIT_INTERFACE_COUNT;

// How a result tells failure apart (scripts/abi_gen.py reads it from the return type's spelling).
enum class Result { Status, Pointer, String, Value };

constexpr bool same(const char* a, const char* b) {
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
}

template <class... D>
struct List {};

// Calls f(static_cast<D*>(nullptr)) for every descriptor D of a List, in list order.
template <class... D, class F>
void for_each(List<D...>, F&& f) {
    (f(static_cast<D*>(nullptr)), ...);
}

// The interface a function table belongs to (specialized for each table in kbit_loader_functions.h).
template <class TableT>
constexpr int interface_of = -1;

// What the loader knows of one function at compile time: its table member (and so its type and its
// interface), the minor that added it and how its result tells failure apart. Each function's
// descriptor, kbit::loader::functions::<name>, adds its name as `id`.
template <auto Member, uint32_t Since, Result Kind>
struct Descriptor;
template <class TableT, class P, P TableT::*Member, uint32_t Since, Result Kind>
struct Descriptor<Member, Since, Kind> {
    using Ptr = P;
    static constexpr uint32_t since = Since;
    static constexpr Result kind = Kind;
    static constexpr int iface = interface_of<TableT>;
    static constexpr Ptr TableT::*member = Member;
};

}  // namespace kbit::loader

// Generated from the lists by scripts/abi_gen.py: each interface's Table, descriptors and the list
// All of them (namespace kbit::loader::<ns>).
#include "kbit_loader_functions.h"

namespace kbit::loader {

// Each interface's constants and traits, from the registry.
#define KBIT_INTERFACE(name, NAME, ns)                                                               \
    namespace ns {                                                                                   \
    constexpr int kIface = KBIT_INTERFACE_##NAME;                                                    \
    constexpr uint32_t kMajor = KBIT_##NAME##_VERSION_MAJOR;                                         \
    /* the minor this loader implements (a test loader raises one interface's) */                   \
    constexpr uint32_t kMinor =                                                                      \
        kIface == KBIT_LOADER_TEST_INTERFACE ? KBIT_LOADER_TEST_MINOR : KBIT_##NAME##_VERSION_MINOR; \
    constexpr const char* kName = #name;                                                             \
    constexpr const char* kVersionSymbol = "kbit_" #name "_interface_version";                       \
    using PublicTable = kbit_##name##_table;                                                         \
    struct Traits {                                                                                  \
        using TableT = Table;                                                                        \
        using Functions = All;                                                                       \
        using Public = PublicTable;                                                                  \
        static constexpr int id = kIface;                                                            \
    };                                                                                               \
    }
#include "interfaces.def"
#undef KBIT_INTERFACE

// Calls f(Ns::Traits{}) for each interface, in interface-id order.
template <class F>
void for_each_interface(F&& f) {
#define KBIT_INTERFACE(name, NAME, ns) f(ns::Traits{});
#include "interfaces.def"
#undef KBIT_INTERFACE
}

// Every backend interface's tables, in one object per opened backend (member = the interface's ns).
struct Tables {
#define KBIT_INTERFACE(name, NAME, ns) ns::Table ns;
#include "interfaces.def"
#undef KBIT_INTERFACE
};

template <int I> auto& table_of(Tables& t);
#define KBIT_INTERFACE(name, NAME, ns) \
    template <>                         \
    inline auto& table_of<KBIT_INTERFACE_##NAME>(Tables & t) { return t.ns; }
#include "interfaces.def"
#undef KBIT_INTERFACE

template <int I> const auto& table_of(const Tables& t) { return table_of<I>(const_cast<Tables&>(t)); }

// The registry's order is the public interface ids' order.
namespace registry {
enum Order {
#define KBIT_INTERFACE(name, NAME, ns) ns,
#include "interfaces.def"
#undef KBIT_INTERFACE
    count
};
#define KBIT_INTERFACE(name, NAME, ns) \
    static_assert(ns == KBIT_INTERFACE_##NAME, "abi/interfaces.def is in KBIT_INTERFACE_<NAME> order");
#include "interfaces.def"
#undef KBIT_INTERFACE
static_assert(count == KBIT_INTERFACE_COUNT, "abi/interfaces.def lists every KBIT_INTERFACE_<NAME>");
}  // namespace registry

// Static facts about interface I, by id.
struct InterfaceInfo {
    const char* name;            // "core", "4bit", ...
    const char* version_symbol;  // kbit_<iface>_interface_version
    uint32_t major;
    uint32_t minor;              // this loader's minor (the highest since-minor it knows)
    uint32_t function_count;
};

const InterfaceInfo& interface_info(int iface);

}  // namespace kbit::loader
