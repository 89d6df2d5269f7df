#include "backend.h"

#include <dlfcn.h>

#include <cstdio>
#include <filesystem>

#include <catch2/catch.hpp>

namespace kbit_test {
namespace {

Backend g_backend;

// A bare name resolves to lib/libkbit_<name>.so of this build tree (bin/../lib); anything with a
// '/' or ending in ".so" is a path.
std::string resolve(const std::string& spec) {
    if (spec.find('/') != std::string::npos || spec.size() > 3 && spec.rfind(".so") == spec.size() - 3)
        return spec;
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return (exe.parent_path().parent_path() / "lib" / ("libkbit_" + spec + ".so")).string();
}

template <class Table>
bool resolve_all(void* handle, Table& table, const char* const* names, size_t count, std::string* error) {
    auto** slots = reinterpret_cast<void**>(&table);
    static_assert(sizeof(void*) == sizeof(void (*)()), "function pointers as data pointers");
    for (size_t i = 0; i < count; ++i) {
        slots[i] = dlsym(handle, names[i]);
        if (slots[i] == nullptr) {
            *error = std::string("missing function ") + names[i];
            return false;
        }
    }
    return true;
}

#define KBIT_FN(minor, ret, name, params, args) #name,
const char* const kCoreNames[] = {
#include "kbit_core.def"
};
const char* const k4bitNames[] = {
#include "kbit_4bit.def"
};
const char* const k8bitNames[] = {
#include "kbit_8bit.def"
};
const char* const kOptim8Names[] = {
#include "kbit_optim8.def"
};
#undef KBIT_FN

static_assert(sizeof(CoreFns) == sizeof(kCoreNames), "table and name list agree");
static_assert(sizeof(Fns4bit) == sizeof(k4bitNames), "table and name list agree");
static_assert(sizeof(Fns8bit) == sizeof(k8bitNames), "table and name list agree");
static_assert(sizeof(FnsOptim8) == sizeof(kOptim8Names), "table and name list agree");

uint32_t version_of(void* handle, const char* symbol) {
    auto fn = reinterpret_cast<uint32_t (*)(void)>(dlsym(handle, symbol));
    return fn ? fn() : 0;
}

}  // namespace

bool open_backend(const std::string& spec, std::string* error) {
    Backend& b = g_backend;
    b.spec = spec;
    b.path = resolve(spec);
    void* handle = dlopen(b.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        *error = dlerror();
        return false;
    }
    b.core_version = version_of(handle, "kbit_core_interface_version");
    if (KBIT_VERSION_MAJOR_OF(b.core_version) != KBIT_CORE_VERSION_MAJOR) {
        *error = b.path + ": core interface major " + std::to_string(KBIT_VERSION_MAJOR_OF(b.core_version)) +
                 ", expected " + std::to_string(KBIT_CORE_VERSION_MAJOR);
        return false;
    }
    if (!resolve_all(handle, b.core, kCoreNames, std::size(kCoreNames), error)) return false;
    b.v4bit = version_of(handle, "kbit_4bit_interface_version");
    b.v8bit = version_of(handle, "kbit_8bit_interface_version");
    b.voptim8 = version_of(handle, "kbit_optim8_interface_version");
    if (b.v4bit && KBIT_VERSION_MAJOR_OF(b.v4bit) != KBIT_4BIT_VERSION_MAJOR) b.v4bit = 0;
    if (b.v8bit && KBIT_VERSION_MAJOR_OF(b.v8bit) != KBIT_8BIT_VERSION_MAJOR) b.v8bit = 0;
    if (b.voptim8 && KBIT_VERSION_MAJOR_OF(b.voptim8) != KBIT_OPTIM8_VERSION_MAJOR) b.voptim8 = 0;
    if (b.v4bit && !resolve_all(handle, b.b4, k4bitNames, std::size(k4bitNames), error)) return false;
    if (b.v8bit && !resolve_all(handle, b.b8, k8bitNames, std::size(k8bitNames), error)) return false;
    if (b.voptim8 && !resolve_all(handle, b.o8, kOptim8Names, std::size(kOptim8Names), error)) return false;
    if (b.core.kbit_backend_probe() <= 0) {
        *error = b.path + ": kbit_backend_probe() is 0: the backend cannot run on this machine";
        return false;
    }
    return true;
}

const Backend& backend() { return g_backend; }

void require_ok(kbit_status status, const char* what) {
    INFO(what << ": " << backend().core.kbit_status_string(status) << ": "
              << backend().core.kbit_last_error_message());
    REQUIRE(status == KBIT_STATUS_SUCCESS);
}

void* device_allocate(size_t bytes) {
    void* p = nullptr;
    require_ok(backend().core.kbit_device_malloc(&p, bytes), "kbit_device_malloc");
    return p;
}

void device_release(void* p) { backend().core.kbit_device_free(p); }

void device_copy(void* dst, const void* src, size_t bytes, int32_t kind) {
    require_ok(backend().core.kbit_memcpy(dst, src, bytes, kind), "kbit_memcpy");
}

}  // namespace kbit_test
