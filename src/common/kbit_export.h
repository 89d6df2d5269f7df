// kbit_export.h — what every exported function of every backend does before the backend's own code
// runs, written once: the exception barrier (guarded), the argument checks of kbit_validate_*.h, the
// empty-input rule (a valid call with nothing to do returns success and touches nothing), and the
// switch from a runtime dtype to the element type. The per-interface export headers
// (kbit_export_<iface>.h) define the exported functions from abi/generated/kbit_<iface>_exports.def
// (each entry names its family, which picks the wrapper) and call the backend's operations
// (namespace kbit::ops, declared there) only with validated, typed arguments.
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

// Variant tokens of the generated export lists (the fmt= attribute of abi/kbit_4bit.def entries).
constexpr QuantType variant_fp4 = QuantType::FP4;
constexpr QuantType variant_nf4 = QuantType::NF4;

}  // namespace exports
}  // namespace kbit

// Expands a parenthesized argument list of a .def entry.
#define KBIT_EXPORT_ARGS(...) __VA_ARGS__
// The shapes of an exported function: kbit::exports::<family>(name, arguments...), and for the
// families whose functions differ by a variant (format, optimizer, output stage),
// kbit::exports::<family>(name, variant, arguments...). Each kbit_export_<iface>.h maps every family
// of its list to one of them (KBIT_EXPORT_<family>); an entry whose family has no mapping stops the
// build.
#define KBIT_EXPORT_PLAIN(family, variant, ret, name, params, args) \
    KBIT_API ret name params { return kbit::exports::family(#name, KBIT_EXPORT_ARGS args); }
// A function without parameters: kbit::exports::<family>(name).
#define KBIT_EXPORT_NOARGS(family, variant, ret, name, params, args) \
    KBIT_API ret name params { return kbit::exports::family(#name); }
#define KBIT_EXPORT_WITH_VARIANT(family, variant, ret, name, params, args)                                 \
    KBIT_API ret name params {                                                                              \
        return kbit::exports::family(#name, kbit::exports::variant_##variant, KBIT_EXPORT_ARGS args);       \
    }
#define KBIT_EXPORT(family, variant, since_minor, ret, name, params, args) \
    KBIT_EXPORT_##family(family, variant, ret, name, params, args)
