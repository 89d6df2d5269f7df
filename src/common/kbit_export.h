// kbit_export.h — what every exported function of every backend does before the backend's own code
// runs, written once: the exception barrier (guarded), the argument checks of kbit_validate_*.h, the
// empty-input rule (a valid call with nothing to do returns success and touches nothing), and the
// switch from a runtime dtype to the element type. The per-interface front ends (kbit_export_<iface>.h)
// build their family wrappers on checked_call; the generated exported functions
// (src/common/generated/kbit_<iface>_exports.cpp) call those wrappers.
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit_args.h"  // dtype_bytes
#include "kbit_dtype.h"
#include "kbit_error.h"
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

// The element type of a blockwise call: fixed by the exported function's name (ElementOf<T>, the
// bitsandbytes names) or a kbit_dtype argument (DtypeElement, the 64-bit functions), which the checks
// see (dtype(), NULL for a fixed type) before it selects T. with_type(f) returns f(ElemTag<T>{}).
template <class T>
struct ElementOf {
    const int32_t* dtype() const { return nullptr; }
    int64_t bytes() const { return sizeof(T); }
    template <class F>
    kbit_status with_type(F&& f) const {
        return f(ElemTag<T>{});
    }
};

struct DtypeElement {
    int32_t value;
    const int32_t* dtype() const { return &value; }
    int64_t bytes() const { return dtype_bytes(value); }
    template <class F>
    kbit_status with_type(F&& f) const {
        return with_dtype(value, f);
    }
};

}  // namespace exports
}  // namespace kbit
