// Every function of every backend interface, exported by libkbit.so under its own name, forwarding
// to the default backend (generated from abi/*.def). The version symbols report the interface
// versions this loader implements (every function exists here; those the default backend lacks
// are stubs).
#include <dlfcn.h>

#include "default_backend.h"
#include "kbit_error.h"
#include "loader_state.h"

namespace kbit::loader {
namespace {

// The last failure in this thread: the default backend's own message when a trampoline saw it fail
// last, otherwise the loader's (stubs, loader API; "" before any failure).
const char* last_error() noexcept {
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
bool is_loader_function(const void* fn) noexcept {
    Dl_info self{}, target{};
    return dladdr(reinterpret_cast<void*>(&is_loader_function), &self) != 0 && dladdr(fn, &target) != 0 &&
           self.dli_fbase == target.dli_fbase;
}

template <class D, class... A>
auto forward(A... args) {
    if constexpr (same(D::id, "kbit_last_error_message")) {
        return last_error();
    } else {
        const auto fn = table_of<D::iface>(default_backend_fast().tables).*D::member;
        auto result = fn(args...);
        if (failed<D>(result) && !is_loader_function(reinterpret_cast<const void*>(fn)))
            thread_state().last = Source::Backend;
        return result;
    }
}

}  // namespace
}  // namespace kbit::loader

extern "C" {

// Every function of every interface, forwarded to the default backend's table, and each interface's
// version symbol (the loader's own minor).
#define KBIT_INTERFACE_BEGIN(name, NAME, ns)                                \
    KBIT_API uint32_t kbit_##name##_interface_version(void) {               \
        return KBIT_MAKE_VERSION(kbit::loader::ns::kMajor, kbit::loader::ns::kMinor); \
    }
#define KBIT_INTERFACE_END(name, NAME, ns)
#define KBIT_FN(minor, ret, name, params, args, variant) \
    KBIT_API ret name params { return kbit::loader::forward<kbit::loader::functions::name> args; }
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END

}  // extern "C"
