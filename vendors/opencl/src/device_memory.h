// device_memory.h — device pointers of this backend. OpenCL 1.2 memory is a cl_mem handle, not an
// address, and shared virtual memory is missing on many devices (NVIDIA's driver among them), so every
// allocation is a cl_mem buffer plus a range of host address space reserved for it (PROT_NONE, never
// backed): kbit_device_malloc returns the start of that range, and any address inside it (a torch view,
// base + offset) names the buffer and an offset. Kernels take each array as (buffer, byte offset).
//
// The reserved range makes device pointers unique, never equal to host memory, and a fault when the
// host dereferences one by mistake; resolve() also checks that an access stays inside its allocation,
// so a wrong size is an INVALID_ARGUMENT instead of a device read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime.h"

namespace kbit::opencl {

// An array argument of a kernel: the buffer and the byte offset of the array in it.
struct DeviceArray {
    cl_mem buffer;
    cl_ulong offset;
};

// An array argument left out (optional, or not read for these sizes): NULL in the kernel.
constexpr DeviceArray kNoArray{nullptr, 0};

// Blocks of `blocksize` elements that hold n elements.
constexpr int64_t blocks_of(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }

// Allocates `bytes` > 0 of device memory; returns its device address.
void* allocate(const char* fn, size_t bytes);

// Frees an allocation; `ptr` must be the address allocate() returned.
void release(const char* fn, void* ptr);

// Memory the backend did not allocate behind a reserved range but that kernels reach the same way: a
// buffer the caller created over `bytes` bytes at host address `ptr` (cget_managed_ptr: a
// CL_MEM_USE_HOST_PTR buffer over fine-grained SVM, src/managed_memory.cpp). resolve() then finds it;
// release() refuses it. The table keeps no reference: unregister_external() returns the buffer to its
// owner, or throws INVALID_ARGUMENT when `ptr` was not registered.
void register_external(const char* fn, void* ptr, size_t bytes, cl_mem buffer);
cl_mem unregister_external(const char* fn, void* ptr);

// The buffer and offset of `bytes` bytes at device address `ptr`, aligned to `align` bytes; `what`
// names the argument in the message of the INVALID_ARGUMENT thrown when the range is not inside one
// allocation of this backend or is misaligned.
DeviceArray resolve(const char* fn, const void* ptr, uint64_t bytes, const char* what, size_t align = 1);

template <class T>
DeviceArray resolve_array(const char* fn, const T* ptr, int64_t count, const char* what) {
    return resolve(fn, ptr, static_cast<uint64_t>(count) * sizeof(T), what, alignof(T));
}

// A buffer of the backend's context for an operation's intermediate results, released when it goes
// out of scope (OpenCL keeps it until the commands that use it have finished).
class Scratch {
public:
    Scratch(const char* fn, size_t bytes);
    ~Scratch() { clReleaseMemObject(buffer_); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    cl_mem buffer() const { return buffer_; }
    DeviceArray at(size_t byte_offset) const { return DeviceArray{buffer_, byte_offset}; }

private:
    cl_mem buffer_ = nullptr;
};

}  // namespace kbit::opencl
