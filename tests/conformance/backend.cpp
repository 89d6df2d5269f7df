#include "backend.h"

#include <cstdlib>

#include <catch2/catch.hpp>

#include "kbit/kbit_loader.h"

namespace kbit_test {
namespace {

Backend g_backend;

// Copies the loader's table of one interface into the suite's typed struct (NULL table = absent).
#define KBIT_FN(minor, ret, name, params, args) fns.name = table->name;
void copy(CoreFns& fns, const kbit_core_table* table) {
#include "kbit_core.def"
}
void copy(Fns4bit& fns, const kbit_4bit_table* table) {
#include "kbit_4bit.def"
}
void copy(Fns8bit& fns, const kbit_8bit_table* table) {
#include "kbit_8bit.def"
}
void copy(FnsOptim8& fns, const kbit_optim8_table* table) {
#include "kbit_optim8.def"
}
#undef KBIT_FN

// The same structs filled with libkbit.so's exports (the trampolines), resolved at link time.
#define KBIT_FN(minor, ret, name, params, args) fns.name = &::name;
void use_trampolines(CoreFns& fns) {
#include "kbit_core.def"
}
void use_trampolines(Fns4bit& fns) {
#include "kbit_4bit.def"
}
void use_trampolines(Fns8bit& fns) {
#include "kbit_8bit.def"
}
void use_trampolines(FnsOptim8& fns) {
#include "kbit_optim8.def"
}
#undef KBIT_FN

// Version of an accepted interface, 0 when absent or rejected.
uint32_t accepted_version(const kbit_loader_candidate* c, int32_t iface) {
    const kbit_loader_interface_record* r = kbit_loader_candidate_interface(c, iface);
    return r->state == KBIT_INTERFACE_ACCEPTED ? r->version : 0;
}

}  // namespace

bool open_backend(const std::string& spec, std::string* error, bool trampolines) {
    Backend& b = g_backend;
    b.spec = spec;
    b.trampolines = trampolines;
    kbit_backend* handle = nullptr;
    if (trampolines) {
        // The default is chosen on first use, so naming it here still decides it.
        if (!spec.empty()) setenv("KBIT_BACKEND", spec.c_str(), 1);
        if (kbit_loader_default(&handle) != KBIT_STATUS_SUCCESS) {
            *error = kbit_last_error_message();
            return false;
        }
    } else if (kbit_loader_open(spec.c_str(), &handle) != KBIT_STATUS_SUCCESS) {
        *error = kbit_last_error_message();
        return false;
    }
    const kbit_loader_candidate* c = kbit_loader_backend_candidate(handle);
    b.path = c->path;
    b.core_version = accepted_version(c, KBIT_INTERFACE_CORE);
    b.v4bit = accepted_version(c, KBIT_INTERFACE_4BIT);
    b.v8bit = accepted_version(c, KBIT_INTERFACE_8BIT);
    b.voptim8 = accepted_version(c, KBIT_INTERFACE_OPTIM8);
    if (trampolines) {
        use_trampolines(b.core);
        if (b.v4bit) use_trampolines(b.b4);
        if (b.v8bit) use_trampolines(b.b8);
        if (b.voptim8) use_trampolines(b.o8);
    } else {
        // The handle stays open for the whole run.
        b.handle = handle;
        copy(b.core, kbit_loader_core_table(handle));
        if (b.v4bit) copy(b.b4, kbit_loader_4bit_table(handle));
        if (b.v8bit) copy(b.b8, kbit_loader_8bit_table(handle));
        if (b.voptim8) copy(b.o8, kbit_loader_optim8_table(handle));
    }
    return true;
}

const Backend& backend() { return g_backend; }

void close_backend() {
    if (g_backend.handle != nullptr) kbit_loader_close(g_backend.handle);
    g_backend.handle = nullptr;
}

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
