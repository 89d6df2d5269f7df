// kbit_export_core.h — the exported functions of the core interface, defined once for every backend
// from abi/generated/kbit_core_exports.def. A backend's api_core.cpp includes it once at file scope
// and defines the operations declared below (namespace kbit::ops); status strings and the
// thread-local error message are the same for every backend and need none.
#pragma once

#include <cstddef>
#include <string>

#include "kbit/kbit_core.h"
#include "kbit_export.h"
#include "kbit_validate_core.h"

namespace kbit::ops {

// Identity: the probe's score (0 = unusable here), the backend's short name, and a one-line
// description (computed once, at the first kbit_backend_info call).
int32_t backend_probe();
const char* backend_name();
std::string backend_info();
// Memory: `bytes` > 0 and `ptr` valid; the rest as kbit_core.h says.
kbit_status device_malloc(const char* fn, void** ptr, size_t bytes);
kbit_status device_free(const char* fn, void* ptr);
kbit_status memcpy(const char* fn, void* dst, const void* src, size_t bytes, int32_t kind);
kbit_status stream_synchronize(const char* fn, void* stream);

}  // namespace kbit::ops

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

// ---- the exported symbols -----------------------------------------------------------------------

#define KBIT_EXPORT_backend_probe KBIT_EXPORT_NOARGS
#define KBIT_EXPORT_backend_name KBIT_EXPORT_NOARGS
#define KBIT_EXPORT_backend_info KBIT_EXPORT_NOARGS
#define KBIT_EXPORT_last_error_message KBIT_EXPORT_NOARGS
#define KBIT_EXPORT_status_string KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_device_malloc KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_device_free KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_memcpy KBIT_EXPORT_PLAIN
#define KBIT_EXPORT_stream_synchronize KBIT_EXPORT_PLAIN

extern "C" {

KBIT_API uint32_t kbit_core_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_CORE_VERSION_MAJOR, KBIT_CORE_VERSION_MINOR);
}

#include "kbit_core_exports.def"

}  // extern "C"
