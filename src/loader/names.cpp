#include "names.h"

#include "kbit/kbit_loader.h"
#include "loader_fns.h"

namespace kbit::loader {

const char* interface_name(int32_t iface) noexcept {
    return iface >= 0 && iface < kInterfaces ? interface_info(iface).name : "unknown";
}

const char* interface_state_name(int32_t state) noexcept {
    switch (state) {
        case KBIT_INTERFACE_ABSENT: return "absent";
        case KBIT_INTERFACE_ACCEPTED: return "accepted";
        case KBIT_INTERFACE_REJECTED: return "rejected";
        default: return "unknown";
    }
}

const char* source_name(int32_t source) noexcept {
    switch (source) {
        case KBIT_SOURCE_EXPLICIT: return "explicit";
        case KBIT_SOURCE_KBIT_BACKEND: return "KBIT_BACKEND";
        case KBIT_SOURCE_KBIT_BACKEND_PATH: return "KBIT_BACKEND_PATH";
        case KBIT_SOURCE_LOADER_DIRECTORY: return "loader directory";
        default: return "unknown";
    }
}

const char* stage_name(int32_t stage) noexcept {
    switch (stage) {
        case KBIT_STAGE_FOUND: return "found";
        case KBIT_STAGE_FILE_CHECKED: return "file checked";
        case KBIT_STAGE_OPENED: return "opened";
        case KBIT_STAGE_VERSIONS_CHECKED: return "versions checked";
        case KBIT_STAGE_RESOLVED: return "resolved";
        case KBIT_STAGE_PROBED: return "probed";
        default: return "unknown";
    }
}

const char* verdict_name(int32_t verdict) noexcept {
    switch (verdict) {
        case KBIT_VERDICT_USABLE: return "usable";
        case KBIT_VERDICT_REJECTED: return "rejected";
        case KBIT_VERDICT_SHADOWED: return "shadowed";
        default: return "unknown";
    }
}

}  // namespace kbit::loader
