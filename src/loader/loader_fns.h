// loader_fns.h — compile-time descriptions of every interface function, generated from abi/*.def
// through X-macros, so the loader never lists a function by hand.
//
// For each interface: a table struct with the layout of the public kbit_<iface>_table, one
// descriptor type per function (signature, name, since-minor, result kind, table member), and a type
// list of all descriptors in list order. A test build can put a longer .def on the include path and
// raise the loader's minor with -DKBIT_LOADER_<IFACE>_MINOR=N (tests/loader: older-minor backends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kbit/kbit_loader.h"

#ifndef KBIT_LOADER_CORE_MINOR
#define KBIT_LOADER_CORE_MINOR KBIT_CORE_VERSION_MINOR
#endif
#ifndef KBIT_LOADER_4BIT_MINOR
#define KBIT_LOADER_4BIT_MINOR KBIT_4BIT_VERSION_MINOR
#endif
#ifndef KBIT_LOADER_8BIT_MINOR
#define KBIT_LOADER_8BIT_MINOR KBIT_8BIT_VERSION_MINOR
#endif
#ifndef KBIT_LOADER_OPTIM8_MINOR
#define KBIT_LOADER_OPTIM8_MINOR KBIT_OPTIM8_VERSION_MINOR
#endif

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

#define KBIT_LOADER_TABLE_MEMBER(minor, ret, name, params, args) ret(*name) params;
#define KBIT_LOADER_DESCRIPTOR(minor, ret, name, params, args)                     \
    struct name {                                                                  \
        using Ptr = ret(*) params;                                                 \
        static constexpr const char* id = #name;                                   \
        static constexpr uint32_t since = minor;                                   \
        static constexpr Result kind = result_kind(#ret);                          \
        static constexpr int iface = kIface;                                       \
        static constexpr Ptr Table::*member = &Table::name;                        \
    };
#define KBIT_LOADER_LIST_ITEM(minor, ret, name, params, args) name,

// ---- one namespace per interface (loader_interface.inc) ----------------------------------------
#define KBIT_IFACE_NS core
#define KBIT_IFACE_ID KBIT_INTERFACE_CORE
#define KBIT_IFACE_MINOR KBIT_LOADER_CORE_MINOR
#define KBIT_IFACE_MAJOR KBIT_CORE_VERSION_MAJOR
#define KBIT_IFACE_SYMBOL "kbit_core_interface_version"
#define KBIT_IFACE_TABLE kbit_core_table
#define KBIT_IFACE_DEF "kbit_core.def"
#include "loader_interface.inc"

#define KBIT_IFACE_NS b4
#define KBIT_IFACE_ID KBIT_INTERFACE_4BIT
#define KBIT_IFACE_MINOR KBIT_LOADER_4BIT_MINOR
#define KBIT_IFACE_MAJOR KBIT_4BIT_VERSION_MAJOR
#define KBIT_IFACE_SYMBOL "kbit_4bit_interface_version"
#define KBIT_IFACE_TABLE kbit_4bit_table
#define KBIT_IFACE_DEF "kbit_4bit.def"
#include "loader_interface.inc"

#define KBIT_IFACE_NS b8
#define KBIT_IFACE_ID KBIT_INTERFACE_8BIT
#define KBIT_IFACE_MINOR KBIT_LOADER_8BIT_MINOR
#define KBIT_IFACE_MAJOR KBIT_8BIT_VERSION_MAJOR
#define KBIT_IFACE_SYMBOL "kbit_8bit_interface_version"
#define KBIT_IFACE_TABLE kbit_8bit_table
#define KBIT_IFACE_DEF "kbit_8bit.def"
#include "loader_interface.inc"

#define KBIT_IFACE_NS o8
#define KBIT_IFACE_ID KBIT_INTERFACE_OPTIM8
#define KBIT_IFACE_MINOR KBIT_LOADER_OPTIM8_MINOR
#define KBIT_IFACE_MAJOR KBIT_OPTIM8_VERSION_MAJOR
#define KBIT_IFACE_SYMBOL "kbit_optim8_interface_version"
#define KBIT_IFACE_TABLE kbit_optim8_table
#define KBIT_IFACE_DEF "kbit_optim8.def"
#include "loader_interface.inc"

#undef KBIT_LOADER_TABLE_MEMBER
#undef KBIT_LOADER_DESCRIPTOR
#undef KBIT_LOADER_LIST_ITEM

// Calls f(Ns::Traits{}) for each interface, in interface-id order.
template <class F>
void for_each_interface(F&& f) {
    f(core::Traits{});
    f(b4::Traits{});
    f(b8::Traits{});
    f(o8::Traits{});
}

// Every backend interface's tables, in one object per opened backend.
struct Tables {
    core::Table core;
    b4::Table t4;
    b8::Table t8;
    o8::Table o8;
};

template <int I> auto& table_of(Tables& t);
template <> inline auto& table_of<KBIT_INTERFACE_CORE>(Tables& t) { return t.core; }
template <> inline auto& table_of<KBIT_INTERFACE_4BIT>(Tables& t) { return t.t4; }
template <> inline auto& table_of<KBIT_INTERFACE_8BIT>(Tables& t) { return t.t8; }
template <> inline auto& table_of<KBIT_INTERFACE_OPTIM8>(Tables& t) { return t.o8; }

template <int I> const auto& table_of(const Tables& t) { return table_of<I>(const_cast<Tables&>(t)); }

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
