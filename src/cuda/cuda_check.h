// cuda_check.h — how the CUDA backend turns CUDA runtime failures into kbit statuses and messages.
// Host code only; every exported function goes through these, never exit() or printing.
#pragma once

#include <cuda_runtime.h>

#include "kbit_error.h"

namespace kbit::cuda {

// Records "fn: <what>: <CUDA error name>: <CUDA's text>" and returns KBIT_STATUS_DEVICE_ERROR
// (KBIT_STATUS_OUT_OF_MEMORY for cudaErrorMemoryAllocation). Clears the runtime's last-error slot so
// that a non-sticky failure is reported once, by the call that caused it.
kbit_status device_error(const char* fn, const char* what, cudaError_t err);

// After a kernel launch: peeks at the launch's error (bad configuration, no kernel image for this
// device's architecture, no device) and reports it as device_error() does, naming the kernel.
kbit_status check_launch(const char* fn, const char* kernel);

// The caller's opaque stream (NULL = legacy default stream; kbit is never built with per-thread
// default streams).
inline cudaStream_t to_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// log2 of a power of two (blocksizes).
inline int log2_of(int64_t pow2) {
    int l = 0;
    while ((int64_t{1} << l) < pow2) ++l;
    return l;
}

// Number of multiprocessors of the current device (for grid sizes); 0 when it cannot be queried.
int multiprocessor_count();

// Grid size for a grid-stride kernel: enough CTAs to fill the device, never more than `work`.
unsigned grid_for(int64_t work, int ctas_per_sm = 16);

}  // namespace kbit::cuda

// Evaluates a CUDA runtime call and returns its failure from the enclosing function.
#define KBIT_CUDA_TRY(fn, what, call)                                              \
    do {                                                                           \
        const cudaError_t kbit_err_ = (call);                                      \
        if (kbit_err_ != cudaSuccess) return ::kbit::cuda::device_error(fn, what, kbit_err_); \
    } while (0)
