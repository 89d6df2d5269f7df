#include "loader_state.h"

#include <cstdarg>
#include <cstdio>

#include "kbit_error.h"

namespace kbit::loader {

ThreadState& thread_state() noexcept {
    static thread_local ThreadState state;
    return state;
}

kbit_status fail(kbit_status status, const char* fn, const char* fmt, ...) noexcept {
    char message[480];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    thread_state().last = Source::Loader;
    return kbit::set_error(status, fn, "%s", message);
}

VersionText version_text(uint32_t version) noexcept {
    VersionText v;
    std::snprintf(v.text, sizeof v.text, "%u.%u", static_cast<unsigned>(KBIT_VERSION_MAJOR_OF(version)),
                  static_cast<unsigned>(KBIT_VERSION_MINOR_OF(version)));
    return v;
}

}  // namespace kbit::loader
