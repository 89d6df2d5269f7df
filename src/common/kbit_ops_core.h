// kbit_ops_core.h — the operations every backend defines for the core interface: identity and device memory,
// called only by the wrappers of kbit_export_core.h (status strings and the thread-local error message are
// the same for every backend and need none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kbit/kbit_core.h"
#include "kbit_error.h"

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
