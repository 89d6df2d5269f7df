// The core interface of libkbit_cpu.so: the operations behind the exported functions of
// kbit_export_core.h: identity, probe and (host) memory.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "aligned_buffer.h"
#include "cpu_isa.h"
#include "kernels_8bit.h"
#include "kbit_ops_core.h"

namespace {

std::string describe() {
    using namespace kbit::cpu;
    std::string s = "x86-64 CPU, kernels: ";
#if defined(__aarch64__)
    s = "AArch64 CPU, kernels: ";
#elif !(defined(__x86_64__) || defined(__i386__))
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

namespace kbit::ops {

int32_t backend_probe() { return 10; }

const char* backend_name() { return "cpu"; }

std::string backend_info() { return describe(); }

kbit_status device_malloc(const char* fn, void** ptr, size_t bytes) {
    void* p = kbit::cpu::aligned_alloc64(bytes);
    if (p == nullptr) return set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "allocation of %zu bytes failed", bytes);
    *ptr = p;
    return KBIT_STATUS_SUCCESS;
}

kbit_status device_free(const char*, void* ptr) {
    std::free(ptr);
    return KBIT_STATUS_SUCCESS;
}

kbit_status memcpy(const char*, void* dst, const void* src, size_t bytes, int32_t) {
    std::memmove(dst, src, bytes);
    return KBIT_STATUS_SUCCESS;
}

kbit_status stream_synchronize(const char*, void*) { return KBIT_STATUS_SUCCESS; }

}  // namespace kbit::ops
