// kbit_live_set.h — the handles a backend has handed out and not yet taken back (get_context() /
// kbit_context_destroy()). A handle is checked against this set before anything reads through it,
// so a destroyed, foreign or made-up pointer gets KBIT_STATUS_INVALID_ARGUMENT instead of a read of
// freed memory (a magic number inside the object cannot tell: reading it is the use after free).
#pragma once

#include <mutex>
#include <unordered_set>

namespace kbit {

template <class T>
class LiveSet {
public:
    // Records a new handle (may throw std::bad_alloc; callers are inside guarded()).
    void add(const T* p) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.insert(p);
    }
    // Whether p was added and not yet removed.
    bool contains(const T* p) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return live_.count(p) != 0;
    }
    // Removes p; false if it was not live (destroyed twice, or never made here).
    bool remove(const T* p) {
        std::lock_guard<std::mutex> lock(mutex_);
        return live_.erase(p) != 0;
    }

private:
    mutable std::mutex mutex_;
    std::unordered_set<const T*> live_;
};

// The message of a handle that is not live, for set_error.
constexpr const char* kNotLiveContext =
    "context is not a live context of this backend (already destroyed, or not made by its get_context())";

}  // namespace kbit
