// The core interface of libkbit_cpu.so: identity, probe, errors and (host) memory.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu_isa.h"
#include "kernels_8bit.h"
#include "kbit/kbit_core.h"
#include "kbit_error.h"
#include "kbit_validate_core.h"

namespace {

constexpr size_t kAlignment = 64;

std::string describe() {
    using namespace kbit::cpu;
    std::string s = "x86-64 CPU, kernels: ";
#if !(defined(__x86_64__) || defined(__i386__))
    s = "CPU, kernels: ";
#endif
    s += isa_name(active_isa());
    s += " (detected ";
    s += isa_name(detected_isa());
    if (isa_cap_setting()[0] != '\0') {
        s += ", KBIT_CPU_ISA=";
        s += isa_cap_setting();
        if (!isa_cap_valid()) s += " not understood, ignored";
    }
    s += "), OpenMP threads: " + std::to_string(omp_get_max_threads());
    s += std::string(", int8 GEMM: ") + igemm_provider();
    return s;
}

}  // namespace

extern "C" {

KBIT_API uint32_t kbit_core_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_CORE_VERSION_MAJOR, KBIT_CORE_VERSION_MINOR);
}

KBIT_API int32_t kbit_backend_probe(void) { return 10; }

KBIT_API const char* kbit_backend_name(void) { return "cpu"; }

KBIT_API const char* kbit_backend_info(void) {
    static const std::string info = describe();
    return info.c_str();
}

KBIT_API const char* kbit_status_string(kbit_status status) { return kbit::status_name(status); }

KBIT_API const char* kbit_last_error_message(void) { return kbit::last_error_message(); }

KBIT_API kbit_status kbit_device_malloc(void** ptr, size_t bytes) {
    static const char* fn = "kbit_device_malloc";
    if (ptr == nullptr) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "ptr is NULL");
    if (bytes == 0) {
        *ptr = nullptr;
        return KBIT_STATUS_SUCCESS;
    }
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < bytes)
        return kbit::set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu bytes cannot be allocated", bytes);
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr)
        return kbit::set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "allocation of %zu bytes failed", bytes);
    *ptr = p;
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status kbit_device_free(void* ptr) {
    std::free(ptr);
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status kbit_memcpy(void* dst, const void* src, size_t bytes, int32_t kind) {
    bool empty = false;
    const kbit_status s = kbit::validate_memcpy("kbit_memcpy", dst, src, bytes, kind, &empty);
    if (s != KBIT_STATUS_SUCCESS || empty) return s;
    std::memmove(dst, src, bytes);
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status kbit_stream_synchronize(void* /*stream*/) { return KBIT_STATUS_SUCCESS; }

}  // extern "C"
