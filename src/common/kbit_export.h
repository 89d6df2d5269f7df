// kbit_export.h — what every exported function of every backend does before the backend's own code
// runs, written once: the exception barrier (guarded), the argument checks of kbit_validate_*.h, the
// empty-input rule (a valid call with nothing to do returns success and touches nothing), and the
// switch from a runtime dtype to the element type. The per-interface front ends (kbit_export_<iface>.h)
// build their family wrappers on checked_call; the generated exported functions
// (src/common/generated/kbit_<iface>_exports.cpp) call those wrappers.
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit_error.h"
#include "kbit_dtype.h"
#include "kbit_formats.h"

namespace kbit {

namespace exports {

// Runs one exported call: validate(&empty) checks every argument (and sets empty when the call has
// nothing to do); only a valid, non-empty call runs op(). No exception leaves it.
template <class Validate, class Op>
kbit_status checked_call(const char* fn, Validate&& validate, Op&& op) noexcept {
    return guarded(fn, [&]() -> kbit_status {
        bool empty = false;
        const kbit_status s = validate(&empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        return op();
    });
}

}  // namespace exports
}  // namespace kbit
