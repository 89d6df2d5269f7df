// kbit_export_core.h — the front end of the core interface: one checked wrapper per family of
// abi/kbit_core.def, called by the generated exported functions (src/common/generated/kbit_core_exports.cpp)
// with the function's name. A wrapper runs the argument checks of kbit_validate_core.h inside the exception
// barrier (kbit_export.h) and calls the backend's operation (kbit_ops_core.h) only for a valid, non-empty
// call.
#pragma once

#include <cstddef>
#include <string>

#include "kbit_export.h"
#include "kbit_ops_core.h"
#include "kbit_validate_core.h"

// The core interface minor this backend implements (its version symbol): the header's, unless the backend's
// build defines KBIT_BACKEND_CORE_MINOR lower.
#ifndef KBIT_BACKEND_CORE_MINOR
#define KBIT_BACKEND_CORE_MINOR KBIT_CORE_VERSION_MINOR
#endif
static_assert(KBIT_BACKEND_CORE_MINOR <= KBIT_CORE_VERSION_MINOR,
              "a backend cannot implement a newer minor than its header");

namespace kbit::exports {

// ---- one wrapper per family of abi/kbit_core.def ------------------------------------------------

inline int32_t backend_probe(const char*) noexcept {
    try {
        return ops::backend_probe();
    } catch (...) {
        return 0;  // a probe that fails means "not usable here"
    }
}

inline const char* backend_name(const char*) noexcept { return ops::backend_name(); }

// Never NULL: a description that cannot be made reads "unknown".
inline const char* backend_info(const char*) noexcept {
    try {
        static const std::string info = ops::backend_info();
        return info.c_str();
    } catch (...) {
        return "unknown";
    }
}

inline const char* status_string(const char*, kbit_status status) noexcept { return status_name(status); }

inline const char* last_error_message(const char*) noexcept { return kbit::last_error_message(); }

// A request for 0 bytes gives NULL and success.
inline kbit_status device_malloc(const char* fn, void** ptr, size_t bytes) {
    return guarded(fn, [&] {
        if (ptr == nullptr) return set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "ptr is NULL");
        if (bytes > 0) return ops::device_malloc(fn, ptr, bytes);  // writes *ptr only on success
        *ptr = nullptr;
        return KBIT_STATUS_SUCCESS;
    });
}

// NULL is a no-op, as free(NULL).
inline kbit_status device_free(const char* fn, void* ptr) {
    if (ptr == nullptr) return KBIT_STATUS_SUCCESS;
    return guarded(fn, [&] { return ops::device_free(fn, ptr); });
}

inline kbit_status memcpy(const char* fn, void* dst, const void* src, size_t bytes, int32_t kind) {
    return checked_call(
        fn, [&](bool* empty) { return validate_memcpy(fn, dst, src, bytes, kind, empty); },
        [&] { return ops::memcpy(fn, dst, src, bytes, kind); });
}

inline kbit_status stream_synchronize(const char* fn, void* stream) {
    return guarded(fn, [&] { return ops::stream_synchronize(fn, stream); });
}

}  // namespace kbit::exports
