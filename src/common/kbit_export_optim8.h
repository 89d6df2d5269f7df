// kbit_export_optim8.h — the exported optimizer updates of a backend, defined once for all backends
// from the function list abi/kbit_optim8.def, so no backend writes the 36 names again. Include it
// once, at file scope, after defining the backend's two entry templates:
//   template <class T> kbit_status optim32(const char* fn, kbit::optim::Kind kind, T* g, T* p, ...);
//   template <class T> kbit_status optim8(const char* fn, kbit::optim::Kind kind, T* p, T* g, ...);
// each taking the parameters of its update functions in the list's order. It also defines
// kbit_optim8_interface_version(); the list's other functions (paged memory, fill) are each backend's
// own.
#pragma once

#include <cstddef>

#include "kbit/kbit_optim8.h"
#include "kbit_optim_math.h"

namespace kbit::optim {

constexpr bool export_name_starts(const char* s, const char* prefix) {
    for (; *prefix != '\0'; ++s, ++prefix)
        if (*s != *prefix) return false;
    return true;
}

// The optimizer of an exported update, read from its name: c<optimizer>32bit_grad_<t>,
// c<optimizer>_8bit_blockwise_grad_<t> or kbit_<optimizer>32bit_grad_<t>. Evaluated at compile time,
// so a name that fits none stops the build (the throw is not a constant expression).
constexpr Kind kind_of_export(const char* name) {
    struct Word {
        const char* text;
        size_t length;
        Kind kind;
    };
    constexpr Word kWords[] = {{"adam", 4, Kind::Adam},         {"ademamix", 8, Kind::AdEMAMix},
                               {"adagrad", 7, Kind::Adagrad},   {"lion", 4, Kind::Lion},
                               {"momentum", 8, Kind::Momentum}, {"rmsprop", 7, Kind::RMSprop}};
    const char* s = export_name_starts(name, "kbit_") ? name + 5 : name + 1;
    for (const Word& w : kWords)
        if (export_name_starts(s, w.text) && (s[w.length] == '3' || s[w.length] == '_')) return w.kind;
    throw "not an optimizer update name";
}

}  // namespace kbit::optim

// The list's entries are told apart by their parameter count: 18 is a 32-bit-state update, 19 an
// 8-bit blockwise one, 1, 3 and 4 the backend's own functions. An entry of any other count has no
// KBIT_OPTIM8_EXPORT_<count> and stops the build.
#define KBIT_OPTIM8_ARGS(...) __VA_ARGS__
#define KBIT_OPTIM8_COUNT(...) \
    KBIT_OPTIM8_COUNT_(__VA_ARGS__, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define KBIT_OPTIM8_COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, \
                           a20, count, ...)                                                                      \
    count
#define KBIT_OPTIM8_CAT(a, b) KBIT_OPTIM8_CAT_(a, b)
#define KBIT_OPTIM8_CAT_(a, b) a##b

#define KBIT_OPTIM8_EXPORT_18(ret, name, params, args)                           \
    KBIT_API ret name params {                                                   \
        constexpr kbit::optim::Kind kind = kbit::optim::kind_of_export(#name);   \
        return optim32(#name, kind, KBIT_OPTIM8_ARGS args);                      \
    }
#define KBIT_OPTIM8_EXPORT_19(ret, name, params, args)                           \
    KBIT_API ret name params {                                                   \
        constexpr kbit::optim::Kind kind = kbit::optim::kind_of_export(#name);   \
        return optim8(#name, kind, KBIT_OPTIM8_ARGS args);                       \
    }
#define KBIT_OPTIM8_EXPORT_1(ret, name, params, args)
#define KBIT_OPTIM8_EXPORT_3(ret, name, params, args)
#define KBIT_OPTIM8_EXPORT_4(ret, name, params, args)

extern "C" {

KBIT_API uint32_t kbit_optim8_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_OPTIM8_VERSION_MAJOR, KBIT_OPTIM8_VERSION_MINOR);
}

#define KBIT_FN(since_minor, ret, name, params, args) \
    KBIT_OPTIM8_CAT(KBIT_OPTIM8_EXPORT_, KBIT_OPTIM8_COUNT args)(ret, name, params, args)
#include "kbit_optim8.def"
#undef KBIT_FN

}  // extern "C"

#undef KBIT_OPTIM8_EXPORT_4
#undef KBIT_OPTIM8_EXPORT_3
#undef KBIT_OPTIM8_EXPORT_1
#undef KBIT_OPTIM8_EXPORT_19
#undef KBIT_OPTIM8_EXPORT_18
#undef KBIT_OPTIM8_CAT_
#undef KBIT_OPTIM8_CAT
#undef KBIT_OPTIM8_COUNT_
#undef KBIT_OPTIM8_COUNT
#undef KBIT_OPTIM8_ARGS
