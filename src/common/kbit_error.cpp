#include "kbit_error.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kbit {
namespace {

thread_local char t_message[512] = "";

bool log_enabled() {
    static const bool enabled = [] {
        const char* v = secure_getenv("KBIT_LOG");  // ignored by set-user-ID programs
        return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
    }();
    return enabled;
}

}  // namespace

const char* status_name(kbit_status status) noexcept {
    switch (status) {
        case KBIT_STATUS_SUCCESS: return "KBIT_STATUS_SUCCESS";
        case KBIT_STATUS_INVALID_ARGUMENT: return "KBIT_STATUS_INVALID_ARGUMENT";
        case KBIT_STATUS_DEVICE_ERROR: return "KBIT_STATUS_DEVICE_ERROR";
        case KBIT_STATUS_OUT_OF_MEMORY: return "KBIT_STATUS_OUT_OF_MEMORY";
        case KBIT_STATUS_NOT_IMPLEMENTED: return "KBIT_STATUS_NOT_IMPLEMENTED";
        case KBIT_STATUS_INTERNAL_ERROR: return "KBIT_STATUS_INTERNAL_ERROR";
        case KBIT_STATUS_NOT_SUPPORTED: return "KBIT_STATUS_NOT_SUPPORTED";
        default: return "KBIT_STATUS_UNKNOWN";
    }
}

kbit_status set_error(kbit_status status, const char* fn, const char* fmt, ...) noexcept {
    int used = std::snprintf(t_message, sizeof t_message, "%s: ", fn);
    if (used < 0 || static_cast<size_t>(used) >= sizeof t_message) used = 0;
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(t_message + used, sizeof t_message - static_cast<size_t>(used), fmt, args);
    va_end(args);
    if (log_enabled()) std::fprintf(stderr, "kbit: %s (%s)\n", t_message, status_name(status));
    return status;
}

const char* last_error_message() noexcept { return t_message; }

}  // namespace kbit
