// loader_state.h — the loader's per-thread error bookkeeping.
//
// Three kinds of failure can be "the last one" in a thread: a loader API call, a loader stub, or the
// default backend called through a trampoline. kbit_last_error_message() of libkbit.so (and the
// kbit_last_error_message member of an explicit core table) must report whichever came last, so
// the loader remembers which source failed last. Everything here is
// trivially destructible: a thread_local with a destructor would pin libkbit.so in memory until the
// thread exits and defeat dlclose().
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"

namespace kbit::loader {

enum class Source : uint8_t { None, Loader, Backend };

struct ThreadState {
    Source last = Source::None;  // who failed last in this thread (trampolines and loader API)
    // The most recent stub failure: its slot, the slot's generation, and the vendor's own
    // message at that moment (to tell whether the vendor failed since).
    int stub_slot = -1;
    uint64_t stub_generation = 0;
    char vendor_snapshot[512] = "";
    // > 0 while this thread runs a backend's code for the loader (its constructors, version
    // functions, probe, destructors). Choosing or opening backends from there would recurse.
    int vendor_depth = 0;
};

ThreadState& thread_state() noexcept;

inline bool in_vendor_code() noexcept { return thread_state().vendor_depth > 0; }

// Marks a scope that runs a backend's code (validate(), and dlclose(), which runs its destructors).
struct VendorCode {
    VendorCode() noexcept { ++thread_state().vendor_depth; }
    ~VendorCode() { --thread_state().vendor_depth; }
    VendorCode(const VendorCode&) = delete;
    VendorCode& operator=(const VendorCode&) = delete;
};

// Records "fn: <message>" as the thread's error (kbit::set_error), marks the loader as the last
// failure source, and returns `status`.
kbit_status fail(kbit_status status, const char* fn, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

// "MAJOR.MINOR" of a packed version.
struct VersionText {
    char text[24];
};
VersionText version_text(uint32_t version) noexcept;

}  // namespace kbit::loader
