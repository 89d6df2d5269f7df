// programs.h — the OpenCL programs of this backend, compiled by the driver on first use and kept for
// the life of the process (one compile per program per process; PoCL also caches the binaries on
// disk), and kernel launches.
//
// Every program is the shared prelude (the format tables printed from the backend kit's constants, so
// each number has one source), kernels/common.cl, then its own file (the grouped GEMM's after
// gemm_4bit.cl, whose functions it calls). Programs are built without fast
// math, with FP_CONTRACT OFF in the sources, correctly rounded division and square root where the
// device offers them, and denormals kept: the exact functions give the reference's bytes.
#pragma once

#include <cstddef>
#include <mutex>
#include <type_traits>

#include "device_memory.h"

namespace kbit::opencl {

enum class Program { Blockwise4bit, Gemm4bit, Gemm4bitGrouped, NestedAbsmax, TorchaoNf4, Blockwise8bit, Int8,
                     Optim32, Optim8Blockwise, Count };

// A kernel of a program, with the lock that makes setting its arguments and enqueuing it one step
// (a cl_kernel's arguments are shared state).
struct Kernel {
    cl_kernel handle;
    std::mutex* lock;
};

Kernel kernel(const char* fn, Program program, const char* name);

// The build options and whether division is correctly rounded, for `kbit info`.
const char* build_options();

namespace detail {
inline void set_arg(const char* fn, cl_kernel k, cl_uint& index, const DeviceArray& a) {
    check(fn, "clSetKernelArg", clSetKernelArg(k, index++, sizeof(cl_mem), &a.buffer));
    check(fn, "clSetKernelArg", clSetKernelArg(k, index++, sizeof(cl_ulong), &a.offset));
}
// Numbers, and plain structs of numbers that a kernel declares with the same layout (e.g. OptimConsts).
template <class T>
void set_arg(const char* fn, cl_kernel k, cl_uint& index, const T& v) {
    static_assert(std::is_arithmetic_v<T> || (std::is_class_v<T> && std::is_trivially_copyable_v<T> &&
                                              std::is_standard_layout_v<T>),
                  "kernel scalars are numbers or plain structs (pass arrays as DeviceArray)");
    check(fn, "clSetKernelArg", clSetKernelArg(k, index++, sizeof(T), &v));
}
}  // namespace detail

// Enqueues `name` of `program` on `queue` over `global` work-items in groups of `local` (0: the
// driver's choice); `global` is rounded up to a multiple of `local`, so kernels check their range.
// Each DeviceArray becomes two kernel arguments (buffer, byte offset); numbers are passed as they are.
template <class... Args>
void launch(const char* fn, cl_command_queue queue, Program program, const char* name, size_t global, size_t local,
            const Args&... args) {
    const Kernel k = kernel(fn, program, name);
    if (local != 0) global = (global + local - 1) / local * local;
    std::lock_guard guard(*k.lock);
    cl_uint index = 0;
    (detail::set_arg(fn, k.handle, index, args), ...);
    check(fn, name, clEnqueueNDRangeKernel(queue, k.handle, 1, nullptr, &global, local != 0 ? &local : nullptr, 0,
                                           nullptr, nullptr));
}

}  // namespace kbit::opencl
