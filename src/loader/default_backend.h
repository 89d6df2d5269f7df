// default_backend.h — the backend behind the trampolines, chosen once per process on first use.
#pragma once

#include <atomic>
#include <string>

#include "backend.h"

namespace kbit::loader {

// Set once the default backend is chosen (NULL before).
extern std::atomic<const kbit_backend*> g_default_backend;

// The default backend: chosen on the first call (thread-safe), never NULL, never closed. When no
// backend can be used it is a stand-in whose functions are stubs reporting why. Called from a
// backend's probe, constructor or destructor before the choice is made, it is a stand-in too
// (make_reentry_backend).
const kbit_backend& default_backend();

// The default backend if it has been chosen already, otherwise NULL (never triggers the choice).
inline const kbit_backend* default_backend_if_chosen() { return g_default_backend.load(std::memory_order_acquire); }

// default_backend() with the common case (already chosen) inlined into the trampolines.
inline const kbit_backend& default_backend_fast() {
    const kbit_backend* b = default_backend_if_chosen();
    return b != nullptr ? *b : default_backend();
}

// Why there is no default backend ("" when there is one). Triggers the choice: not from vendor code.
const std::string& default_backend_problem();

}  // namespace kbit::loader
