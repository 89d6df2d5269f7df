#include "device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <shared_mutex>

namespace kbit::opencl {
namespace {

struct Allocation {
    size_t bytes;
    size_t reserved;  // bytes of address space reserved, a multiple of the page size; 0 for external
    cl_mem buffer;
    bool external;    // register_external(): the caller's memory and buffer
};

std::shared_mutex g_lock;
std::map<uintptr_t, Allocation>& allocations() {
    static auto* table = new std::map<uintptr_t, Allocation>;  // never destroyed: calls may follow exit
    return *table;
}

}  // namespace

void* allocate(const char* fn, size_t bytes) {
    const Runtime& rt = runtime(fn);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (bytes > SIZE_MAX - page) fail(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu bytes cannot be allocated", bytes);
    const size_t reserved = (bytes + page - 1) / page * page;
    void* range = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED)
        fail(KBIT_STATUS_OUT_OF_MEMORY, fn, "cannot reserve %zu bytes of address space for a device buffer", reserved);
    cl_int err = CL_SUCCESS;
    cl_mem buffer = clCreateBuffer(rt.context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    if (err != CL_SUCCESS) {
        munmap(range, reserved);
        check(fn, "clCreateBuffer", err);
    }
    try {
        std::unique_lock lock(g_lock);
        allocations().emplace(reinterpret_cast<uintptr_t>(range), Allocation{bytes, reserved, buffer, false});
    } catch (...) {
        clReleaseMemObject(buffer);
        munmap(range, reserved);
        throw;
    }
    return range;
}

Scratch::Scratch(const char* fn, size_t bytes) {
    cl_int err = CL_SUCCESS;
    buffer_ = clCreateBuffer(runtime(fn).context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    check(fn, "clCreateBuffer (scratch)", err);
}

void release(const char* fn, void* ptr) {
    runtime(fn);  // not in a forked child
    Allocation a{};
    {
        std::unique_lock lock(g_lock);
        auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
        if (it == allocations().end())
            fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "%p is not an allocation of this backend", ptr);
        if (it->second.external)
            fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "%p is managed memory (free it with kbit_free_managed_ptr)", ptr);
        a = it->second;
        allocations().erase(it);
    }
    // OpenCL keeps the buffer alive until the commands queued on it have finished.
    clReleaseMemObject(a.buffer);
    munmap(ptr, a.reserved);
}

void register_external(const char* fn, void* ptr, size_t bytes, cl_mem buffer) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    std::unique_lock lock(g_lock);
    // Host memory never overlaps a reserved range or another live allocation; this guards the table.
    auto next = allocations().lower_bound(p);
    const bool overlaps = (next != allocations().end() && next->first - p < bytes) ||
                          (next != allocations().begin() && p - std::prev(next)->first < std::prev(next)->second.bytes);
    if (overlaps) {
        lock.unlock();
        fail(KBIT_STATUS_DEVICE_ERROR, fn, "%zu bytes at %p overlap memory this backend already knows", bytes, ptr);
    }
    allocations().emplace_hint(next, p, Allocation{bytes, 0, buffer, true});
}

cl_mem unregister_external(const char* fn, void* ptr) {
    std::unique_lock lock(g_lock);
    auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations().end() || !it->second.external) {
        lock.unlock();
        fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "%p is not managed memory of this backend (cget_managed_ptr)", ptr);
    }
    const cl_mem buffer = it->second.buffer;
    allocations().erase(it);
    return buffer;
}

DeviceArray resolve(const char* fn, const void* ptr, uint64_t bytes, const char* what, size_t align) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    std::shared_lock lock(g_lock);
    auto it = allocations().upper_bound(p);
    if (it == allocations().begin() || p - std::prev(it)->first >= std::prev(it)->second.bytes) {
        lock.unlock();
        fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s (%p) is not device memory of this backend (kbit_device_malloc)",
             what, ptr);
    }
    --it;
    const uint64_t offset = p - it->first;
    const uint64_t size = it->second.bytes;
    if (bytes > size - offset) {
        lock.unlock();
        fail(KBIT_STATUS_INVALID_ARGUMENT, fn,
             "%s: %llu bytes at offset %llu run past the end of its %llu-byte device allocation", what,
             static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(offset),
             static_cast<unsigned long long>(size));
    }
    if (offset % align != 0) {
        lock.unlock();
        fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s (%p) is not aligned to its %zu-byte elements", what, ptr, align);
    }
    return DeviceArray{it->second.buffer, offset};
}

}  // namespace kbit::opencl
