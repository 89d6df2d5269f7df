// kbit_validate_core.h — argument rules of the core interface's memory functions, shared by every
// backend so that the same bad input gets the same status and message everywhere.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit_args.h"

namespace kbit {

// kbit_memcpy; `*empty` says there is nothing to copy (bytes == 0, where the pointers may be NULL).
inline kbit_status validate_memcpy(const char* fn, const void* dst, const void* src, size_t bytes, int32_t kind,
                                   bool* empty) {
    Args a(fn);
    a.require(kind == KBIT_MEMCPY_HOST_TO_DEVICE || kind == KBIT_MEMCPY_DEVICE_TO_HOST ||
                  kind == KBIT_MEMCPY_DEVICE_TO_DEVICE,
              "kind %d is not a KBIT_MEMCPY_* value", static_cast<int>(kind));
    *empty = a.ok() && bytes == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null("dst", dst);
    a.not_null("src", src);
    return a.status();
}

}  // namespace kbit
