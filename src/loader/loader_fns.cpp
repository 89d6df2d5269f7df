// Facts about each interface (name, version symbol, versions, function count), with a compile-time
// check that no list entry is newer than the loader's minor.
#include "loader_fns.h"

namespace kbit::loader {
namespace {

template <class... D>
constexpr uint32_t max_since(List<D...>) {
    uint32_t m = 0;
    ((m = D::since > m ? D::since : m), ...);
    return m;
}

template <class... D>
constexpr uint32_t count(List<D...>) {
    return sizeof...(D);
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

const InterfaceInfo kInfo[kInterfaces] = {
#define KBIT_INTERFACE(name, NAME, ns) info_of<ns::Traits>(ns::kName, ns::kVersionSymbol, ns::kMajor, ns::kMinor),
#include "interfaces.def"
#undef KBIT_INTERFACE
};

}  // namespace

const InterfaceInfo& interface_info(int iface) { return kInfo[iface]; }

}  // namespace kbit::loader
