// kbit_error.h — the thread-local error state and the exception barrier every exported function uses.
#pragma once

#include <new>
#include <stdexcept>

#include "kbit/kbit_core.h"

namespace kbit {

// Name of a status ("KBIT_STATUS_INVALID_ARGUMENT"); "KBIT_STATUS_UNKNOWN" for other values.
const char* status_name(kbit_status status) noexcept;

// Records "fn: <formatted message>" as this thread's last error (and logs it to stderr when the
// environment variable KBIT_LOG=1), then returns `status` so callers can `return set_error(...)`.
kbit_status set_error(kbit_status status, const char* fn, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

// This thread's last error message ("" if none).
const char* last_error_message() noexcept;

// Runs `body` (returning kbit_status) so that no C++ exception crosses the C boundary.
template <class F>
kbit_status guarded(const char* fn, F&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "out of host memory");
    } catch (const std::exception& e) {
        return set_error(KBIT_STATUS_INTERNAL_ERROR, fn, "internal error: %s", e.what());
    } catch (...) {
        return set_error(KBIT_STATUS_INTERNAL_ERROR, fn, "internal error: unknown exception");
    }
}

}  // namespace kbit
