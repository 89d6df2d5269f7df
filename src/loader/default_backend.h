// default_backend.h — the backend behind the trampolines, chosen once per process on first use.
#pragma once

#include <string>

#include "backend.h"

namespace kbit::loader {

// The default backend: chosen on the first call (thread-safe), never NULL. When no backend can be
// used it is a stand-in whose functions are stubs reporting why.
const kbit_backend& default_backend();

// The default backend if it has been chosen already, otherwise NULL (never triggers the choice).
const kbit_backend* default_backend_if_chosen();

// Why there is no default backend ("" when there is one). Triggers the choice.
const std::string& default_backend_problem();

}  // namespace kbit::loader
