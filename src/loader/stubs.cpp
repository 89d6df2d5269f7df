#include "stubs.h"

#include <cstring>
#include <mutex>
#include <utility>

#include "backend.h"
#include "kbit_error.h"
#include "loader_state.h"

namespace kbit::loader {
namespace {

constexpr int kNullSlot = kSlots;
constexpr int kReentrySlot = kSlots + 1;

struct Slot {
    bool used = false;
    int refs = 0;
    uint64_t generation = 0;
    void* handle = nullptr;
    std::string name, path;
    std::string info;  // kbit_backend_info() when the backend lacks it, or the "no backend" reason
    int32_t state[kInterfaces] = {};
    uint32_t version[kInterfaces] = {};
    const char* (*vendor_last_error)() = nullptr;
};

Slot g_slots[kSlots + 2];
std::mutex g_mutex;

int acquire_slot(const kbit_backend& b) {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (int i = 0; i < kSlots; ++i) {
        Slot& s = g_slots[i];
        if (s.used && s.handle == b.handle && s.name == b.record.name() && s.path == b.record.path()) {
            ++s.refs;
            return i;
        }
    }
    for (int i = 0; i < kSlots; ++i) {
        Slot& s = g_slots[i];
        if (s.used) continue;
        s.used = true;
        s.refs = 1;
        ++s.generation;
        s.handle = b.handle;
        s.name = b.record.name();
        s.path = b.record.path();
        s.info = "backend " + s.name + " (" + s.path + ") does not implement kbit_backend_info()";
        for (int k = 0; k < kInterfaces; ++k) {
            s.state[k] = b.record.ifaces[k].state;
            s.version[k] = b.record.ifaces[k].version;
        }
        s.vendor_last_error = b.vendor_last_error;
        return i;
    }
    return -1;
}

// Sets the thread's error for a stub call of `fn` (interface iface, since-minor since) in slot s.
void stub_failed(int slot, int iface, const char* fn, uint32_t since) noexcept {
    const Slot& s = g_slots[slot];
    ThreadState& t = thread_state();
    const char* vendor = s.vendor_last_error != nullptr ? s.vendor_last_error() : "";
    std::strncpy(t.vendor_snapshot, vendor != nullptr ? vendor : "", sizeof t.vendor_snapshot - 1);
    t.vendor_snapshot[sizeof t.vendor_snapshot - 1] = '\0';
    t.stub_slot = slot;
    t.stub_generation = s.generation;
    if (slot == kNullSlot || slot == kReentrySlot) {
        fail(slot == kReentrySlot ? KBIT_STATUS_NOT_SUPPORTED : KBIT_STATUS_NOT_IMPLEMENTED, fn, "%s", s.info.c_str());
        return;
    }
    const InterfaceInfo& info = interface_info(iface);
    const char* name = s.name.c_str();
    const char* path = s.path.c_str();
    switch (s.state[iface]) {
        case KBIT_INTERFACE_ACCEPTED:
            if (since > KBIT_VERSION_MINOR_OF(s.version[iface])) {
                fail(KBIT_STATUS_NOT_IMPLEMENTED, fn,
                     "not implemented by backend %s (%s), whose %s interface is %s (%s is %s %u.%u)", name, path,
                     info.name, version_text(s.version[iface]).text, fn, info.name, static_cast<unsigned>(info.major),
                     static_cast<unsigned>(since));
            } else {
                fail(KBIT_STATUS_NOT_IMPLEMENTED, fn, "not implemented by backend %s (%s)", name, path);
            }
            return;
        case KBIT_INTERFACE_REJECTED:
            fail(KBIT_STATUS_NOT_IMPLEMENTED, fn,
                 "not implemented by backend %s (%s), whose %s interface %s was rejected (this loader expects major %u)",
                 name, path, info.name, version_text(s.version[iface]).text, static_cast<unsigned>(info.major));
            return;
        default:
            fail(KBIT_STATUS_NOT_IMPLEMENTED, fn, "not implemented by backend %s (%s), which does not export the %s interface",
                 name, path, info.name);
    }
}

// The backend's last error, unless a stub of this slot failed later in this thread. A stub failure
// is "later" while the vendor's message is still the one it had when the stub ran.
const char* merged_last_error(int slot) noexcept {
    const Slot& s = g_slots[slot];
    const ThreadState& t = thread_state();
    const char* vendor = s.vendor_last_error != nullptr ? s.vendor_last_error() : nullptr;
    if (vendor == nullptr) vendor = "";
    if (slot == kNullSlot || slot == kReentrySlot) return kbit::last_error_message();
    if (t.stub_slot == slot && t.stub_generation == s.generation &&
        std::strncmp(vendor, t.vendor_snapshot, sizeof t.vendor_snapshot - 1) == 0)
        return kbit::last_error_message();
    return vendor;
}

template <class D, int S, class P = typename D::Ptr>
struct Stub;

template <class D, int S, class R, class... A>
struct Stub<D, S, R (*)(A...)> {
    static R call(A... args) noexcept {
        if constexpr (same(D::id, "kbit_backend_probe")) {
            return 0;  // "cannot run here"; only the null backend lacks a probe
        } else if constexpr (same(D::id, "kbit_backend_name")) {
            return g_slots[S].name.c_str();
        } else if constexpr (same(D::id, "kbit_backend_info")) {
            return g_slots[S].info.c_str();
        } else if constexpr (same(D::id, "kbit_status_string")) {
            return kbit::status_name(args...);
        } else if constexpr (same(D::id, "kbit_last_error_message")) {
            return merged_last_error(S);
        } else {
            ((void)args, ...);
            stub_failed(S, D::iface, D::id, D::since);
            if constexpr (D::kind == Result::Status)
                return S == kReentrySlot ? KBIT_STATUS_NOT_SUPPORTED : KBIT_STATUS_NOT_IMPLEMENTED;
            else if constexpr (D::kind == Result::Pointer || D::kind == Result::String) return nullptr;
            else return R{};
        }
    }
};

template <class D, size_t... S>
typename D::Ptr stub_at(int slot, std::index_sequence<S...>) {
    static constexpr typename D::Ptr all[] = {&Stub<D, static_cast<int>(S)>::call...};
    return all[slot];
}

template <class D>
typename D::Ptr stub_for(int slot) {
    return stub_at<D>(slot, std::make_index_sequence<kSlots + 2>{});
}

struct Guard {
    bool used = false;
    int refs = 0;
    void* handle = nullptr;
    std::string name, path;
    std::string info;  // what kbit_backend_info() returns instead of NULL
    const char* (*vendor_name)() = nullptr;
    const char* (*vendor_info)() = nullptr;
    const char* (*vendor_status_string)(kbit_status) = nullptr;
    const char* (*vendor_last_error)() = nullptr;
};

Guard g_guards[kGuards];

// The core table's string functions of guard identity G: the vendor's answer, or a fixed string for NULL.
template <int G>
struct Guarded {
    static const char* name() noexcept {
        const char* s = g_guards[G].vendor_name();
        return s != nullptr ? s : g_guards[G].name.c_str();
    }
    static const char* info() noexcept {
        const char* s = g_guards[G].vendor_info();
        return s != nullptr ? s : g_guards[G].info.c_str();
    }
    static const char* status_string(kbit_status status) noexcept {
        const char* s = g_guards[G].vendor_status_string(status);
        return s != nullptr ? s : kbit::status_name(status);
    }
    static const char* last_error() noexcept {
        const char* s = g_guards[G].vendor_last_error();
        return s != nullptr ? s : "";
    }
};

template <size_t... G>
void set_guards(core::Table& t, int g, std::index_sequence<G...>) {
    static constexpr decltype(t.kbit_backend_name) names[] = {&Guarded<static_cast<int>(G)>::name...};
    static constexpr decltype(t.kbit_backend_info) infos[] = {&Guarded<static_cast<int>(G)>::info...};
    static constexpr decltype(t.kbit_status_string) statuses[] = {&Guarded<static_cast<int>(G)>::status_string...};
    static constexpr decltype(t.kbit_last_error_message) errors[] = {&Guarded<static_cast<int>(G)>::last_error...};
    t.kbit_backend_name = names[g];
    t.kbit_backend_info = infos[g];
    t.kbit_status_string = statuses[g];
    t.kbit_last_error_message = errors[g];
}

bool needs_stubs(const kbit_backend& b) {
    bool need = false;
    for_each_interface([&](auto traits) {
        using T = decltype(traits);
        if (!b.accepted(T::id)) need = true;
        const auto& table = table_of<T::id>(b.tables);
        for_each(typename T::Functions{}, [&](auto* d) {
            using D = std::remove_pointer_t<decltype(d)>;
            if (table.*D::member == nullptr) need = true;
        });
    });
    return need;
}

}  // namespace

bool install_stubs(kbit_backend& b, std::string* error) {
    if (b.slot < 0) {
        if (!needs_stubs(b)) return true;
        b.slot = acquire_slot(b);
        if (b.slot < 0) {
            *error = b.record.path() + ": cannot be opened now: " + std::to_string(kSlots) +
                     " other backend files with missing functions are open (close one first)";
            return false;
        }
    }
    for_each_interface([&](auto traits) {
        using T = decltype(traits);
        auto& table = table_of<T::id>(b.tables);
        for_each(typename T::Functions{}, [&](auto* d) {
            using D = std::remove_pointer_t<decltype(d)>;
            if (table.*D::member == nullptr) table.*D::member = stub_for<D>(b.slot);
        });
    });
    b.tables.core.kbit_last_error_message = stub_for<functions::kbit_last_error_message>(b.slot);
    return true;
}

bool install_guards(kbit_backend& b, std::string* error) {
    if (b.guard >= 0) return true;
    core::Table& t = b.tables.core;
    std::lock_guard<std::mutex> lock(g_mutex);
    int found = -1;
    for (int i = 0; i < kGuards && found < 0; ++i)
        if (g_guards[i].used && g_guards[i].handle == b.handle && g_guards[i].name == b.record.name() &&
            g_guards[i].path == b.record.path())
            found = i;
    for (int i = 0; i < kGuards && found < 0; ++i) {
        Guard& g = g_guards[i];
        if (g.used) continue;
        g.used = true;
        g.handle = b.handle;
        g.name = b.record.name();
        g.path = b.record.path();
        g.info = "(kbit_backend_info() of " + g.path + " returned NULL)";
        g.vendor_name = t.kbit_backend_name;
        g.vendor_info = t.kbit_backend_info;
        g.vendor_status_string = t.kbit_status_string;
        g.vendor_last_error = t.kbit_last_error_message;
        found = i;
    }
    if (found < 0) {
        *error = b.record.path() + ": cannot be opened now: " + std::to_string(kGuards) +
                 " other backend files are open (close one first)";
        return false;
    }
    ++g_guards[found].refs;
    b.guard = found;
    set_guards(t, found, std::make_index_sequence<kGuards>{});
    return true;
}

void release_guard(int guard) {
    if (guard < 0) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    Guard& g = g_guards[guard];
    if (--g.refs == 0) {
        g.used = false;
        g.handle = nullptr;
    }
}

void release_slot(int slot) {
    if (slot < 0 || slot >= kSlots) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    Slot& s = g_slots[slot];
    if (--s.refs == 0) {
        s.used = false;
        s.handle = nullptr;
        s.vendor_last_error = nullptr;
    }
}

int null_slot(const std::string& reason) {
    std::lock_guard<std::mutex> lock(g_mutex);
    Slot& s = g_slots[kNullSlot];
    s.used = true;
    ++s.generation;
    s.name = "none";
    s.info = "no kbit backend is available: " + reason;
    return kNullSlot;
}

int reentry_slot() {
    std::lock_guard<std::mutex> lock(g_mutex);
    Slot& s = g_slots[kReentrySlot];
    if (!s.used) {
        s.used = true;
        ++s.generation;
        s.name = "(choosing)";
        s.info = "called from a backend's probe, constructor or destructor before libkbit.so has chosen its "
                 "default backend";
    }
    return kReentrySlot;
}

}  // namespace kbit::loader
