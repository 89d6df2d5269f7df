// loader_fns.h — compile-time descriptions of every interface function, generated from abi/*.def
// through X-macros, so the loader never lists a function by hand.
//
// For each interface: a table struct with the layout of the public kbit_<iface>_table, one
// descriptor type per function (signature, name, since-minor, result kind, table member), and a type
// list of all descriptors in list order. A test build can put a longer .def on the include path and
// raise one interface's minor (KBIT_LOADER_TEST_INTERFACE below; tests/loader: older-minor backends).
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

#define KBIT_LOADER_STR_(x) #x
#define KBIT_LOADER_STR(x) KBIT_LOADER_STR_(x)

namespace kbit::loader {

constexpr int kInterfaces = KBIT_INTERFACE_COUNT;

// How a result tells failure apart, from the return type's spelling in the .def.
enum class Result { Status, Pointer, String, Value };

constexpr bool same(const char* a, const char* b) {
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
}

// Equality ignoring spaces ("const char *" == "const char*").
constexpr bool same_tokens(const char* a, const char* b) {
    for (;;) {
        while (*a == ' ') ++a;
        while (*b == ' ') ++b;
        if (*a != *b) return false;
        if (*a == '\0') return true;
        ++a, ++b;
    }
}

constexpr Result result_kind(const char* ret) {
    if (same_tokens(ret, "kbit_status")) return Result::Status;
    if (same_tokens(ret, "const char*")) return Result::String;
    size_t n = 0;
    while (ret[n] != '\0') ++n;
    while (n > 0 && ret[n - 1] == ' ') --n;
    return n > 0 && ret[n - 1] == '*' ? Result::Pointer : Result::Value;
}

static_assert(result_kind("const char *") == Result::String && result_kind("kbit_context*") == Result::Pointer &&
              result_kind("int32_t") == Result::Value && result_kind("kbit_status") == Result::Status);

template <class... T>
struct List {};
struct ListEnd {};  // terminates every list (the X-macro leaves a trailing comma)

template <class D, class F>
void visit_one(F& f) {
    if constexpr (!std::is_same_v<D, ListEnd>) f(static_cast<D*>(nullptr));
}

// Calls f(static_cast<D*>(nullptr)) for every descriptor D of a List, in list order.
template <class... D, class F>
void for_each(List<D...>, F&& f) {
    (visit_one<D>(f), ...);
}

#define KBIT_LOADER_TABLE_MEMBER(minor, ret, name, params, args, variant) ret(*name) params;
#define KBIT_LOADER_DESCRIPTOR(minor, ret, name, params, args, variant)                     \
    struct name {                                                                  \
        using Ptr = ret(*) params;                                                 \
        static constexpr const char* id = #name;                                   \
        static constexpr uint32_t since = minor;                                   \
        static constexpr Result kind = result_kind(#ret);                          \
        static constexpr int iface = kIface;                                       \
        static constexpr Ptr Table::*member = &Table::name;                        \
    };
#define KBIT_LOADER_LIST_ITEM(minor, ret, name, params, args, variant) name,

// ---- one namespace per interface, from abi/interfaces.def and its function lists ---------------
// Pass 1: constants and the table struct.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns)                                                     \
    namespace ns {                                                                               \
    constexpr int kIface = KBIT_INTERFACE_##NAME;                                                \
    constexpr uint32_t kMajor = KBIT_##NAME##_VERSION_MAJOR;                                     \
    constexpr uint32_t kMinor =                                                                  \
        kIface == KBIT_LOADER_TEST_INTERFACE ? KBIT_LOADER_TEST_MINOR : KBIT_##NAME##_VERSION_MINOR; \
    constexpr const char* kName = #name;                                                         \
    constexpr const char* kVersionSymbol = KBIT_LOADER_STR(kbit_##name##_interface_version);     \
    using PublicTable = kbit_##name##_table;                                                     \
    struct Table {                                                                               \
        size_t size;                                                                             \
        uint32_t version;
#define KBIT_INTERFACE_END(name, NAME, ns) \
    };                                     \
    }
#define KBIT_FN KBIT_LOADER_TABLE_MEMBER
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END

// Pass 2: one descriptor per function; loader::functions::<name> finds any of them (function names
// are unique across interfaces: they are C symbols).
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) namespace ns {
#define KBIT_INTERFACE_END(name, NAME, ns) \
    }                                      \
    namespace functions {                  \
    using namespace ::kbit::loader::ns;    \
    }
#define KBIT_FN KBIT_LOADER_DESCRIPTOR
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END

// Pass 3: the list of all descriptors in list order, and the interface's traits.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) \
    namespace ns {                           \
    using All = List<
#define KBIT_INTERFACE_END(name, NAME, ns) \
    ListEnd > ;                            \
    struct Traits {                        \
        using TableT = Table;              \
        using Functions = All;             \
        using Public = PublicTable;        \
        static constexpr int id = kIface;  \
    };                                     \
    }
#define KBIT_FN KBIT_LOADER_LIST_ITEM
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END

#undef KBIT_LOADER_TABLE_MEMBER
#undef KBIT_LOADER_DESCRIPTOR
#undef KBIT_LOADER_LIST_ITEM

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
