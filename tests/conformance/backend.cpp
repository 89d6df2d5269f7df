#include "backend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "functions.h"
#include "kbit/kbit_loader.h"

namespace kbit_test {
namespace {

Backend g_backend;
void* g_bnb_cpu_handle = nullptr;  // the backend's file, for its bnb_cpu functions (closed with it)

// Copies the loader's table of one interface into the suite's typed struct.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) void copy(Fns_##name& fns, const kbit_##name##_table* table) {
#define KBIT_INTERFACE_END(name, NAME, ns) }
#define KBIT_FN(minor, ret, name, params, args, variant) fns.name = table->name;
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN

// The same structs filled with libkbit.so's exports (the trampolines), resolved at link time.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) void use_trampolines(Fns_##name& fns) {
#define KBIT_INTERFACE_END(name, NAME, ns) }
#define KBIT_FN(minor, ret, name, params, args, variant) fns.name = &::name;
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN

// The bnb_cpu functions of the backend's file, where it exports them (a backend need not).
void resolve_bnb_cpu(Backend& b) {
    void* h = dlopen(b.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    const auto version = h ? reinterpret_cast<uint32_t (*)(void)>(dlsym(h, "kbit_bnb_cpu_interface_version")) : nullptr;
    if (version == nullptr) {
        if (h != nullptr) dlclose(h);
        return;
    }
    g_bnb_cpu_handle = h;
    b.bnb_cpu_version = version();
#define KBIT_FN(minor, ret, name, params, args, variant) \
    b.fns_bnb_cpu.name = reinterpret_cast<ret(*) params>(dlsym(h, #name));
#include "kbit_bnb_cpu.def"
#undef KBIT_FN
}

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
#define KBIT_INTERFACE(name, NAME, ns) b.version[KBIT_INTERFACE_##NAME] = accepted_version(c, KBIT_INTERFACE_##NAME);
#include "interfaces.def"
#undef KBIT_INTERFACE
    if (!trampolines) b.handle = handle;  // stays open for the whole run
    // Core is always there (the loader refuses a backend without it); the others when accepted.
#define KBIT_INTERFACE(name, NAME, ns)                                          \
    if (KBIT_INTERFACE_##NAME == KBIT_INTERFACE_CORE || b.has(KBIT_INTERFACE_##NAME)) { \
        if (trampolines) use_trampolines(b.fns_##name);                         \
        else copy(b.fns_##name, kbit_loader_##name##_table(handle));            \
    }
#include "interfaces.def"
#undef KBIT_INTERFACE
    // libkbit.so does not forward bnb_cpu, so its trampolines have none.
    if (!trampolines) resolve_bnb_cpu(b);
    count_calls(b);  // what each test case calls is recorded (functions.h)
    return true;
}

const Backend& backend() { return g_backend; }

void close_backend() {
    if (g_bnb_cpu_handle != nullptr) dlclose(g_bnb_cpu_handle);
    g_bnb_cpu_handle = nullptr;
    if (g_backend.handle != nullptr) kbit_loader_close(g_backend.handle);
    g_backend.handle = nullptr;
}

void require_ok(kbit_status status, const char* what) {
    Plumbing plumbing;
    INFO(what << ": " << backend().fns_core.kbit_status_string(status) << ": "
              << backend().fns_core.kbit_last_error_message());
    REQUIRE(status == KBIT_STATUS_SUCCESS);
}

// DeviceBuffer's calls are plumbing, not calls of the test case (functions.h).
void* device_allocate(size_t bytes) {
    Plumbing plumbing;
    void* p = nullptr;
    require_ok(backend().fns_core.kbit_device_malloc(&p, bytes), "kbit_device_malloc");
    return p;
}

void device_release(void* p) {
    Plumbing plumbing;
    backend().fns_core.kbit_device_free(p);
}

void device_copy(void* dst, const void* src, size_t bytes, int32_t kind) {
    Plumbing plumbing;
    require_ok(backend().fns_core.kbit_memcpy(dst, src, bytes, kind), "kbit_memcpy");
}

}  // namespace kbit_test
