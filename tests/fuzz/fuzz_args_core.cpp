// fuzz_args_core: every function of abi/kbit_core.def (include/kbit/kbit_core.h) with fuzzed
// arguments; the checks are fuzz_harness.h's plus each function's own promises (strings never NULL,
// allocations usable and 64-byte aligned, copies equal).
#include "fuzz_harness.h"

using namespace kfuzz;

namespace {

void probe(Call& c, decltype(&kbit_backend_probe) f) {
    if (f() <= 0) c.report("the CPU backend's probe is not positive");
    // The interface versions (implicit, not in the lists) have this build's major.
    const uint32_t versions[] = {kbit_core_interface_version(), kbit_4bit_interface_version(),
                                 kbit_8bit_interface_version(), kbit_optim8_interface_version()};
    const uint32_t majors[] = {KBIT_CORE_VERSION_MAJOR, KBIT_4BIT_VERSION_MAJOR, KBIT_8BIT_VERSION_MAJOR,
                               KBIT_OPTIM8_VERSION_MAJOR};
    for (int i = 0; i < 4; ++i)
        if (KBIT_VERSION_MAJOR_OF(versions[i]) != majors[i]) c.report("an interface version has another major");
}

void string_fn(Call& c, const char* (*f)()) {
    const char* s = f();
    if (s == nullptr) c.report("returned NULL");
    (void)std::strlen(s);  // NUL-terminated (ASan checks the read)
}

void status_string(Call& c, decltype(&kbit_status_string) f) {
    const kbit_status status = c.in().coin() ? c.in().u8() % 8 + (c.in().coin() ? 96 : 0) : c.i32("status");
    c.note("status", status);
    const char* s = f(status);
    if (s == nullptr || std::strncmp(s, "KBIT_STATUS_", 12) != 0) c.report("not a KBIT_STATUS_ name");
    const bool known = (status >= 0 && status <= 5) || status == 100;
    if (!known && std::strcmp(s, "KBIT_STATUS_UNKNOWN") != 0) c.report("an unknown status is not KBIT_STATUS_UNKNOWN");
    if (known && std::strcmp(s, "KBIT_STATUS_UNKNOWN") == 0) c.report("a defined status is named KBIT_STATUS_UNKNOWN");
}

// kbit_device_malloc: *ptr receives usable, 64-byte aligned memory (NULL for 0 bytes), untouched on
// failure; a NULL ptr is refused.
void device_malloc(Call& c, decltype(&kbit_device_malloc) f) {
    const size_t bytes = alloc_size(c, "bytes");
    void** slot = c.buf<void*>("ptr", Role::Out, 1);
    c.must_fail(slot == nullptr, "ptr NULL");
    const kbit_status s = c.run([&] { return f(slot, bytes); });
    if (s != KBIT_STATUS_SUCCESS) {
        if (s != KBIT_STATUS_INVALID_ARGUMENT && s != KBIT_STATUS_OUT_OF_MEMORY) c.report("unexpected status");
        if (s == KBIT_STATUS_OUT_OF_MEMORY && bytes <= static_cast<size_t>(kCapBytes)) c.report("failed for a small size");
        return;
    }
    void* p = *slot;
    if (bytes == 0 && p != nullptr) c.report("0 bytes did not give NULL");
    if (bytes > 0 && p == nullptr) c.report("succeeded with NULL");
    if (reinterpret_cast<uintptr_t>(p) % 64 != 0) c.report("memory is not 64-byte aligned");
    if (p != nullptr) std::memset(p, 0x5A, bytes);
    if (kbit_device_free(p) != KBIT_STATUS_SUCCESS) c.report("kbit_device_free failed");
}

void device_free(Call& c, decltype(&kbit_device_free) f) {
    void* p = nullptr;
    if (c.in().coin() && kbit_device_malloc(&p, static_cast<size_t>(c.i32("bytes")) % 65536) != KBIT_STATUS_SUCCESS)
        c.report("kbit_device_malloc of a small size failed");
    if (f(p) != KBIT_STATUS_SUCCESS) c.report("failed");
}

// kbit_memcpy: dst and src `bytes` each; a valid call copies them.
void memcpy_fn(Call& c, decltype(&kbit_memcpy) f) {
    size_t bytes = c.size("bytes");
    if (bytes > static_cast<size_t>(kCapBytes)) bytes = c.note("bytes_used", bytes % 65536);
    const int32_t kind = c.selector("kind", {KBIT_MEMCPY_HOST_TO_DEVICE, KBIT_MEMCPY_DEVICE_TO_HOST,
                                             KBIT_MEMCPY_DEVICE_TO_DEVICE});
    uint8_t* dst = c.buf<uint8_t>("dst", Role::Out, static_cast<int64_t>(bytes));
    const uint8_t* src = c.buf<uint8_t>("src", Role::In, static_cast<int64_t>(bytes));
    const bool bad_kind = kind < KBIT_MEMCPY_HOST_TO_DEVICE || kind > KBIT_MEMCPY_DEVICE_TO_DEVICE;
    c.must_fail(bad_kind, "unknown kind");
    c.must_fail(bytes > 0 && (!dst || !src), "NULL pointer with bytes > 0");
    c.must_succeed_untouched(!bad_kind && bytes == 0);
    const kbit_status s = c.run([&] { return f(dst, src, bytes, kind); });
    if (s == KBIT_STATUS_SUCCESS && bytes > 0 && std::memcmp(dst, src, bytes) != 0) c.report("dst differs from src");
}

void stream_synchronize(Call& c, decltype(&kbit_stream_synchronize) f) {
    void* stream = c.stream();
    if (f(stream) != KBIT_STATUS_SUCCESS) c.report("failed");
}

Handler resolve(const Fn& fn) {
    const std::string name = fn.name;
    if (name == "kbit_backend_probe") return bind<decltype(&kbit_backend_probe)>(fn, probe);
    if (name == "kbit_backend_name" || name == "kbit_backend_info" || name == "kbit_last_error_message")
        return bind<const char* (*)()>(fn, string_fn);
    if (name == "kbit_status_string") return bind<decltype(&kbit_status_string)>(fn, status_string);
    if (name == "kbit_device_malloc") return bind<decltype(&kbit_device_malloc)>(fn, device_malloc);
    if (name == "kbit_device_free") return bind<decltype(&kbit_device_free)>(fn, device_free);
    if (name == "kbit_memcpy") return bind<decltype(&kbit_memcpy)>(fn, memcpy_fn);
    if (name == "kbit_stream_synchronize") return bind<decltype(&kbit_stream_synchronize)>(fn, stream_synchronize);
    return nullptr;
}

}  // namespace

#define KBIT_FUZZ_LIST "kbit_core.def"
#include "fuzz_main.inc"
