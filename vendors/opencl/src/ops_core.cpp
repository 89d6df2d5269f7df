// The core operations (kbit_ops_core.h): identity, the probe, device memory, copies, synchronization.
#include <string>

#include "device_memory.h"
#include "kbit_ops_core.h"
#include "kbit_stream_errors.h"
#include "programs.h"

namespace kbit::ops {

using namespace kbit::opencl;

// Below the CPU backend (10) when the only device is a CPU (PoCL): kbit's own CPU kernels are faster
// there; above it on a GPU or accelerator, below the CUDA backend (100), which is the better choice on
// an NVIDIA GPU whose driver also offers OpenCL.
int32_t backend_probe() {
    const Choice c = choose_device();
    if (c.device == nullptr) return 0;
    return (c.type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) != 0 ? 50 : 5;
}

const char* backend_name() { return "opencl"; }

std::string backend_info() {
    const Choice c = choose_device();
    if (c.device == nullptr) return "OpenCL backend unavailable: " + c.description;
    return "OpenCL " + c.description + "; kernels compiled on first use with " + build_options();
}

kbit_status device_malloc(const char* fn, void** ptr, size_t bytes) {
    return run([&] { *ptr = allocate(fn, bytes); });
}

kbit_status device_free(const char* fn, void* ptr) {
    return run([&] { release(fn, ptr); });
}

kbit_status memcpy(const char* fn, void* dst, const void* src, size_t bytes, int32_t kind) {
    return run([&] {
        const cl_command_queue q = queue_of(fn, nullptr);
        if (kind == KBIT_MEMCPY_HOST_TO_DEVICE) {
            const DeviceArray d = resolve(fn, dst, bytes, "dst");
            check(fn, "clEnqueueWriteBuffer", clEnqueueWriteBuffer(q, d.buffer, CL_TRUE, d.offset, bytes, src, 0, nullptr, nullptr));
        } else if (kind == KBIT_MEMCPY_DEVICE_TO_HOST) {
            const DeviceArray s = resolve(fn, src, bytes, "src");
            check(fn, "clEnqueueReadBuffer", clEnqueueReadBuffer(q, s.buffer, CL_TRUE, s.offset, bytes, dst, 0, nullptr, nullptr));
        } else {
            const DeviceArray d = resolve(fn, dst, bytes, "dst");
            const DeviceArray s = resolve(fn, src, bytes, "src");
            check(fn, "clEnqueueCopyBuffer", clEnqueueCopyBuffer(q, s.buffer, d.buffer, s.offset, d.offset, bytes, 0, nullptr, nullptr));
            check(fn, "clFinish", clFinish(q));  // the contract is synchronous with the host
        }
    });
}

// Once the queue is idle, the errors its stream-ordered calls found on the device (kbit_stream_errors.h).
kbit_status stream_synchronize(const char* fn, void* stream) {
    const kbit_status s = run([&] { check(fn, "clFinish", clFinish(queue_of(fn, stream))); });
    return s != KBIT_STATUS_SUCCESS ? s : stream_errors().take(stream);
}

}  // namespace kbit::ops
