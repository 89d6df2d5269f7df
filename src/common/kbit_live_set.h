// kbit_live_set.h — the handles a backend has handed out and not yet taken back (get_context() /
// kbit_context_destroy()). A handle is checked against this set before anything reads through it,
// so a destroyed, foreign or made-up pointer gets KBIT_STATUS_INVALID_ARGUMENT instead of a read of
// freed memory (a magic number inside the object cannot tell: reading it is the use after free).
//
// A fixed array of atomic slots rather than a std::unordered_set: trivially destructible (so calls
// from atexit handlers after static destructors still work, and nothing is left on the heap when
// the backend is unloaded) and lock-free. Callers hold one context per device, not hundreds.
#pragma once

#include <atomic>
#include <cstddef>
#include <type_traits>

#include "kbit_error.h"

namespace kbit {

template <class T, size_t Capacity = 256>
class LiveSet {
public:
    // Records a new handle; false when Capacity handles are live already.
    bool add(const T* p) {
        for (auto& slot : slots_) {
            const T* empty = nullptr;
            if (slot.compare_exchange_strong(empty, p, std::memory_order_acq_rel)) return true;
        }
        return false;
    }
    // Whether p was added and not yet removed.
    bool contains(const T* p) const {
        if (p == nullptr) return false;
        for (const auto& slot : slots_)
            if (slot.load(std::memory_order_acquire) == p) return true;
        return false;
    }
    // Removes p; false if it was not live (destroyed twice, or never made here). Of two threads
    // destroying the same handle, exactly one succeeds.
    bool remove(const T* p) {
        if (p == nullptr) return false;
        for (auto& slot : slots_) {
            const T* expected = p;
            if (slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) return true;
        }
        return false;
    }
    static constexpr size_t capacity() { return Capacity; }

private:
    std::atomic<const T*> slots_[Capacity] = {};
};

// The message of a handle that is not live, for set_error.
constexpr const char* kNotLiveContext =
    "context is not a live context of this backend (already destroyed, or not made by its get_context())";

// Takes `context` out of `live`: KBIT_STATUS_SUCCESS, after which the caller releases it, or
// KBIT_STATUS_INVALID_ARGUMENT recorded when it is not live.
template <class T, size_t Capacity>
kbit_status forget_live_context(const char* fn, LiveSet<T, Capacity>& live, const T* context) {
    if (!live.remove(context)) return set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", kNotLiveContext);
    return KBIT_STATUS_SUCCESS;
}

}  // namespace kbit

static_assert(std::is_trivially_destructible_v<kbit::LiveSet<int>>, "a LiveSet must outlive static destructors");
