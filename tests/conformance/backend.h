// backend.h — the backend under test, opened once by main() through the loader (--backend NAME|PATH,
// or --trampolines: the exports of libkbit.so itself), and typed access to its functions (tables
// generated from abi/*.def) and to its device memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kbit/kbit.h"
#include "kbit/kbit_loader.h"

namespace kbit_test {

// One struct of function pointers per interface (abi/interfaces.def), named after it: Fns_core,
// Fns_4bit, Fns_8bit, Fns_optim8.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) struct Fns_##name {
#define KBIT_INTERFACE_END(name, NAME, ns) \
    }                                      \
    ;
#define KBIT_FN(minor, ret, name, params, args, variant) ret(*name) params = nullptr;
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_INTERFACE_END
// The CPU backend's optional bitsandbytes-CPU interface (abi/kbit_bnb_cpu.def): not a loader interface,
// so resolved from the backend's file.
struct Fns_bnb_cpu {
#define KBIT_FN(minor, ret, name, params, args, variant) ret(*name) params = nullptr;
#include "kbit_bnb_cpu.def"
#undef KBIT_FN
};

struct Backend {
    std::string spec;  // what --backend named ("" = the loader's default choice)
    std::string path;  // file that was opened
    bool trampolines = false;  // functions are libkbit.so's trampolines to its default backend
    uint32_t version[KBIT_INTERFACE_COUNT] = {};  // by KBIT_INTERFACE_<NAME>; 0 = interface absent
    // The functions of each interface, as members named after it: fns_core, fns_4bit, fns_8bit,
    // fns_optim8 (all nullptr where the interface is absent).
#define KBIT_INTERFACE(name, NAME, ns) Fns_##name fns_##name;
#include "interfaces.def"
#undef KBIT_INTERFACE
    // The bnb_cpu functions where the backend's file exports them (not through --trampolines:
    // libkbit.so does not forward them); bnb_cpu_version is 0 otherwise.
    Fns_bnb_cpu fns_bnb_cpu;
    uint32_t bnb_cpu_version = 0;
    kbit_backend* handle = nullptr;  // opened by kbit_loader_open (not with trampolines), closed at the end
    bool has(int32_t iface) const { return version[iface] != 0; }
    bool has_4bit() const { return has(KBIT_INTERFACE_4BIT); }
    bool has_8bit() const { return has(KBIT_INTERFACE_8BIT); }
    bool has_optim8() const { return has(KBIT_INTERFACE_OPTIM8); }
    bool has_bnb_cpu() const { return bnb_cpu_version != 0; }
};

// Opens the backend named by `spec` (a name such as "cpu" or a path to a .so) with kbit_loader_open;
// with `trampolines`, makes it libkbit.so's default backend (KBIT_BACKEND=spec unless spec is "")
// and calls every function through libkbit.so's own exports. False + message on failure. Called
// once by main().
bool open_backend(const std::string& spec, std::string* error, bool trampolines = false);
const Backend& backend();
// Closes what open_backend opened (main() calls it after the tests, so leak checkers see no handle).
void close_backend();

// Fails the current test unless `status` is KBIT_STATUS_SUCCESS, showing the backend's message.
void require_ok(kbit_status status, const char* what);

// Device memory of the backend under test holding `n` elements of T.
template <class T>
class DeviceBuffer {
public:
    explicit DeviceBuffer(size_t n) : n_(n) { ptr_ = static_cast<T*>(allocate(n * sizeof(T))); }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { release(ptr_); }

    T* get() const { return ptr_; }
    size_t size() const { return n_; }
    void upload(const std::vector<T>& host) { copy_to_device(ptr_, host.data(), host.size() * sizeof(T)); }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        copy_to_host(host.data(), ptr_, n_ * sizeof(T));
        return host;
    }
    // Fills every byte with `byte` (a sentinel for "nothing was written" checks).
    void fill_bytes(uint8_t byte) {
        std::vector<uint8_t> pattern(n_ * sizeof(T), byte);
        copy_to_device(ptr_, pattern.data(), pattern.size());
    }
    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> host(n_ * sizeof(T));
        copy_to_host(host.data(), ptr_, host.size());
        return host;
    }

private:
    static void* allocate(size_t bytes);
    static void release(void* p);
    static void copy_to_device(void* dst, const void* src, size_t bytes);
    static void copy_to_host(void* dst, const void* src, size_t bytes);
    T* ptr_ = nullptr;
    size_t n_ = 0;
};

void* device_allocate(size_t bytes);
void device_release(void* p);
void device_copy(void* dst, const void* src, size_t bytes, int32_t kind);

template <class T> void* DeviceBuffer<T>::allocate(size_t bytes) { return device_allocate(bytes); }
template <class T> void DeviceBuffer<T>::release(void* p) { device_release(p); }
template <class T> void DeviceBuffer<T>::copy_to_device(void* d, const void* s, size_t b) {
    device_copy(d, s, b, KBIT_MEMCPY_HOST_TO_DEVICE);
}
template <class T> void DeviceBuffer<T>::copy_to_host(void* d, const void* s, size_t b) {
    device_copy(d, s, b, KBIT_MEMCPY_DEVICE_TO_HOST);
}

}  // namespace kbit_test
