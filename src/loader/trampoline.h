// trampoline.h — how libkbit.so's exports forward a call to the default backend. Every function of
// every backend interface is exported by libkbit.so under its own name, spelled out in
// src/loader/generated/kbit_<iface>_trampolines.cpp (generated from abi/kbit_<iface>.def), whose body
// is forward<functions::<name>>(arguments...). The version symbols there report the interface versions
// this loader implements (every function exists here; those the default backend lacks are stubs).
#pragma once

#include <dlfcn.h>

#include "default_backend.h"
#include "kbit_error.h"
#include "loader_state.h"

namespace kbit::loader {
namespace trampoline_detail {

// The last failure in this thread: the default backend's own message when a trampoline saw it fail
// last, otherwise the loader's (stubs, loader API; "" before any failure).
inline const char* last_error() noexcept {
    if (thread_state().last == Source::Backend)
        if (const kbit_backend* b = default_backend_if_chosen(); b != nullptr && b->vendor_last_error != nullptr)
            if (const char* m = b->vendor_last_error()) return m;
    return kbit::last_error_message();
}

template <class D, class R>
bool failed(R r) {
    if constexpr (D::kind == Result::Status) return r != KBIT_STATUS_SUCCESS;
    else if constexpr (D::kind == Result::Pointer) return r == nullptr;
    else return false;
}

// True for a function of libkbit.so itself (a stub, which reported its failure already), false for
// the backend's. Only asked after a failure, so its cost (dladdr) stays off the fast path.
inline bool is_loader_function(const void* fn) noexcept {
    Dl_info self{}, target{};
    return dladdr(reinterpret_cast<void*>(&is_loader_function), &self) != 0 && dladdr(fn, &target) != 0 &&
           self.dli_fbase == target.dli_fbase;
}

}  // namespace trampoline_detail

// Calls function D of the default backend's table with `args`; after a failure, remembers that the
// backend (not the loader) has this thread's last message.
template <class D, class... A>
auto forward(A... args) {
    if constexpr (same(D::id, "kbit_last_error_message")) {
        return trampoline_detail::last_error();
    } else {
        const auto fn = table_of<D::iface>(default_backend_fast().tables).*D::member;
        auto result = fn(args...);
        using namespace trampoline_detail;
        if (failed<D>(result) && !is_loader_function(reinterpret_cast<const void*>(fn)))
            thread_state().last = Source::Backend;
        return result;
    }
}

}  // namespace kbit::loader
