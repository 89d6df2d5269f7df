// kbit_bnb_cpu_host.h — bitsandbytes' CPU names (abi/kbit_bnb_cpu.def) in a device backend.
//
// bitsandbytes' CUDA and ROCm libraries export its CPU functions too, and a GPU install of bitsandbytes
// loads only that library, so a drop-in for libbitsandbytes_cuda*.so must answer them. A device backend
// does not carry the CPU kernels: its bnb_cpu functions (the generated
// src/common/generated/kbit_bnb_cpu_host_exports.cpp) forward each call, unchanged, to the function of
// the same name in the CPU backend, libkbit_cpu.so, so both libraries give the same bytes and the same
// messages. libkbit_cpu.so is opened once, from the directory of the real file of this library (links
// resolved: a drop-in is usually a link named libbitsandbytes_cuda*.so), else from the library search
// path. Without it every function returns KBIT_STATUS_NOT_SUPPORTED with a message naming the file, and
// the feature queries return false.
#pragma once

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <type_traits>

#include "kbit/kbit_core.h"
#include "kbit_error.h"

namespace kbit::bnb_cpu_host {

constexpr const char* kCpuBackendFile = "libkbit_cpu.so";

struct CpuBackend {
    void* handle = nullptr;
    std::string tried;  // what was tried and why it failed, for the message
};

// Opens the CPU backend the first time it is asked for (thread-safe), and keeps it open.
inline const CpuBackend& cpu_backend() noexcept {
    static const CpuBackend backend = []() noexcept {
        CpuBackend b;
        try {
            Dl_info self{};
            char real[PATH_MAX];
            if (dladdr(reinterpret_cast<void*>(&cpu_backend), &self) != 0 && self.dli_fname != nullptr &&
                realpath(self.dli_fname, real) != nullptr) {
                std::string path(real);
                path = path.substr(0, path.rfind('/') + 1) + kCpuBackendFile;
                b.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
                if (b.handle != nullptr) return b;
                const char* why = dlerror();
                b.tried = path + " (" + (why != nullptr ? why : "not loadable") + "); ";
            }
            b.handle = dlopen(kCpuBackendFile, RTLD_NOW | RTLD_LOCAL);
            if (b.handle == nullptr) {
                const char* why = dlerror();
                b.tried += std::string(kCpuBackendFile) + " on the search path (" + (why != nullptr ? why : "not found") +
                           ")";
            }
        } catch (...) {  // out of memory for the message: the backend stays closed
        }
        return b;
    }();
    return backend;
}

// The CPU backend's function `name`, or NULL having recorded KBIT_STATUS_NOT_SUPPORTED for it.
inline void* cpu_function(const char* name) noexcept {
    const CpuBackend& b = cpu_backend();
    if (b.handle == nullptr) {
        set_error(KBIT_STATUS_NOT_SUPPORTED, name, "bitsandbytes' CPU functions of this backend need the CPU backend %s: %s",
                  kCpuBackendFile, b.tried.c_str());
        return nullptr;
    }
    void* f = dlsym(b.handle, name);
    if (f == nullptr)
        set_error(KBIT_STATUS_NOT_SUPPORTED, name, "the CPU backend %s does not export %s", kCpuBackendFile, name);
    return f;
}

// A failure of the CPU backend's `name`, recorded again in this library with the CPU backend's message
// ("name: ..."), so that this library's kbit_last_error_message() reports it.
inline kbit_status copy_cpu_error(const char* name, kbit_status status) noexcept {
    using LastError = const char* (*)(void);
    const auto last = reinterpret_cast<LastError>(dlsym(cpu_backend().handle, "kbit_last_error_message"));
    const char* message = last != nullptr ? last() : "";
    const size_t prefix = std::strlen(name);
    if (std::strncmp(message, name, prefix) == 0 && std::strncmp(message + prefix, ": ", 2) == 0)
        message += prefix + 2;
    return set_error(status, name, "%s", message);
}

// One forwarded function: its name and, once found, its address in the CPU backend (each generated
// forwarder keeps one, so the look-up runs on the first call only; a failed one is retried).
struct CpuFunction {
    const char* name;
    std::atomic<void*> address{nullptr};

    void* resolve() noexcept {
        void* f = address.load(std::memory_order_acquire);
        if (f == nullptr && (f = cpu_function(name)) != nullptr) address.store(f, std::memory_order_release);
        return f;
    }
};

// Calls the CPU backend's function with the caller's arguments (their types are the exported
// signature's). A missing function gives KBIT_STATUS_NOT_SUPPORTED, or false for the feature queries.
template <class Result, class... Args>
Result forward(CpuFunction& function, Args... args) noexcept {
    void* f = function.resolve();
    if constexpr (std::is_same_v<Result, bool>) {
        return f != nullptr && reinterpret_cast<bool (*)(Args...)>(f)(args...);
    } else {
        if (f == nullptr) return KBIT_STATUS_NOT_SUPPORTED;
        const kbit_status status = reinterpret_cast<kbit_status (*)(Args...)>(f)(args...);
        return status == KBIT_STATUS_SUCCESS ? status : copy_cpu_error(function.name, status);
    }
}

}  // namespace kbit::bnb_cpu_host
