// Paged memory of the optimizer interface (kbit_ops_optim8.h: managed_alloc, managed_free, prefetch):
// bitsandbytes' cget_managed_ptr / cprefetch, memory that the host and the device both address.
//
// Decision: it is OpenCL 2.0 fine-grained buffer SVM, or nothing. clSVMAlloc(CL_MEM_SVM_FINE_GRAIN_BUFFER)
// gives an address the host reads and writes directly at any time (what bitsandbytes' paged optimizers
// and the conformance suite do with it) and the device reads coherently at each command. Kernels take
// arrays as (cl_mem, offset), so the allocation also gets a CL_MEM_USE_HOST_PTR buffer over it (which
// OpenCL 2.0 defines to use the SVM memory itself as its storage), registered in the device-memory
// table under the SVM address: every operation then accepts managed pointers and views into them.
//
// Without fine-grained buffer SVM (OpenCL 1.2 devices, NVIDIA's driver, coarse-grained only) there is
// no memory the host may dereference while the device owns it: coarse-grained SVM needs map/unmap
// around every host access, which this interface has no place for, and host memory behind a
// CL_MEM_USE_HOST_PTR buffer is only coherent between map calls too. So cget_managed_ptr returns NULL
// with KBIT_STATUS_NOT_SUPPORTED and a message saying so; callers keep their state in device memory.
//
// The SVM entry points are OpenCL 2.0 functions, looked up at run time in the ICD loader this library
// is linked with, and only when the platform reports OpenCL 2.0 or later: a 1.2 loader lacks them
// and linking them would keep the whole backend from loading there.

// This file alone needs the 2.0 declarations; runtime.h then includes CL/cl.h again (a no-op) at the
// project's 1.2 target, which is restored below so its identical definition is no redefinition.
#undef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>
#undef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "device_memory.h"
#include "kbit_ops_optim8.h"

namespace kbit::opencl {
namespace {

struct Svm {
    decltype(&clSVMAlloc) alloc = nullptr;
    decltype(&clSVMFree) free = nullptr;
    cl_uint alignment = 0;      // bytes: 64 (the interface's promise) or the device's base alignment
    cl_ulong max_bytes = 0;     // CL_DEVICE_MAX_MEM_ALLOC_SIZE
    std::string unavailable;    // why there is no managed memory ("" when there is)
};

// "OpenCL <major>.<minor> ..." -> major (0 when unreadable).
int major_version(const char* version) {
    int major = 0, minor = 0;
    return std::sscanf(version, "OpenCL %d.%d", &major, &minor) == 2 ? major : 0;
}

Svm probe_svm(const Runtime& rt) {
    Svm s;
    char platform[128] = "", device[128] = "";
    clGetPlatformInfo(rt.choice.platform, CL_PLATFORM_VERSION, sizeof platform - 1, platform, nullptr);
    clGetDeviceInfo(rt.device, CL_DEVICE_VERSION, sizeof device - 1, device, nullptr);
    if (major_version(platform) < 2 || major_version(device) < 2) {
        s.unavailable = std::string("the device has no shared virtual memory (") + device + " on " + platform +
                        "; OpenCL 2.0 is needed)";
        return s;
    }
    cl_device_svm_capabilities caps = 0;
    if (clGetDeviceInfo(rt.device, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, nullptr) != CL_SUCCESS) caps = 0;
    if ((caps & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) == 0) {
        s.unavailable = "the device has no fine-grained buffer SVM (coarse-grained SVM is not host-addressable "
                        "without map/unmap)";
        return s;
    }
    // The SVM functions of the ICD loader that provides the OpenCL functions this library calls.
    Dl_info info{};
    void* loader = nullptr;
    if (dladdr(reinterpret_cast<void*>(&clGetPlatformIDs), &info) != 0 && info.dli_fname != nullptr)
        loader = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);  // already loaded; kept open for good
    if (loader != nullptr) {
        s.alloc = reinterpret_cast<decltype(&clSVMAlloc)>(dlsym(loader, "clSVMAlloc"));
        s.free = reinterpret_cast<decltype(&clSVMFree)>(dlsym(loader, "clSVMFree"));
    }
    if (s.alloc == nullptr || s.free == nullptr) {
        s.unavailable = "the OpenCL ICD loader has no clSVMAlloc/clSVMFree (an OpenCL 1.2 loader)";
        return s;
    }
    cl_uint base_bits = 0;
    clGetDeviceInfo(rt.device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof base_bits, &base_bits, nullptr);
    s.alignment = std::max<cl_uint>(64, base_bits / 8);
    clGetDeviceInfo(rt.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof s.max_bytes, &s.max_bytes, nullptr);
    return s;
}

const Svm& svm(const char* fn) {
    const Runtime& rt = runtime(fn);
    static Svm s;
    static std::once_flag once;
    std::call_once(once, [&] { s = probe_svm(rt); });
    return s;
}

void* allocate_managed(const char* fn, size_t bytes) {
    const Runtime& rt = runtime(fn);
    const Svm& s = svm(fn);
    if (!s.unavailable.empty())
        fail(KBIT_STATUS_NOT_SUPPORTED, fn, "managed (paged) memory is not supported: %s", s.unavailable.c_str());
    if (bytes > s.max_bytes)
        fail(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu bytes cannot be allocated (the device's largest allocation is %llu)",
             bytes, static_cast<unsigned long long>(s.max_bytes));
    void* ptr = s.alloc(rt.context, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, bytes, s.alignment);
    if (ptr == nullptr) fail(KBIT_STATUS_OUT_OF_MEMORY, fn, "clSVMAlloc of %zu bytes failed", bytes);
    cl_int err = CL_SUCCESS;
    cl_mem buffer = clCreateBuffer(rt.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, ptr, &err);
    if (err != CL_SUCCESS) {
        s.free(rt.context, ptr);
        check(fn, "clCreateBuffer (over SVM)", err);
    }
    try {
        register_external(fn, ptr, bytes, buffer);
    } catch (...) {
        clReleaseMemObject(buffer);
        s.free(rt.context, ptr);
        throw;
    }
    return ptr;
}

}  // namespace
}  // namespace kbit::opencl

namespace kbit::ops {

using namespace kbit::opencl;

void* managed_alloc(const char* fn, size_t bytes) {
    void* ptr = nullptr;
    run([&] { ptr = allocate_managed(fn, bytes); });  // the error is recorded; NULL tells the caller
    return ptr;
}

// clSVMFree does not wait for commands that still use the memory (the cl_mem's reference count
// protects only the buffer object), so the default queue, where this backend's operations run, is
// drained first, as cudaFree synchronizes. Commands the caller queued on its own queues must be
// finished by the caller.
kbit_status managed_free(const char* fn, void* ptr) {
    return run([&] {
        const Runtime& rt = runtime(fn);
        const cl_mem buffer = unregister_external(fn, ptr);
        const cl_int finished = clFinish(rt.queue);
        clReleaseMemObject(buffer);
        svm(fn).free(rt.context, ptr);
        check(fn, "clFinish", finished);
    });
}

// Fine-grained SVM needs no migration to be correct, and OpenCL 2.0 has none to ask for (2.1's
// clEnqueueSVMMigrateMem is a hint few drivers act on), so a prefetch only checks its arguments: the
// range must be memory of this backend (managed, or device memory, for which there is nothing to move
// either), the device -1 (host) or 0 (the one OpenCL device the backend drives).
kbit_status prefetch(const char* fn, void* ptr, size_t bytes, int device) {
    return run([&] {
        if (device > 0)
            fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "device is %d; this backend drives one OpenCL device (0)", device);
        resolve(fn, ptr, bytes, "ptr");
    });
}

}  // namespace kbit::ops
