// runtime.h — the OpenCL device this backend runs on: its choice (KBIT_OPENCL_DEVICE), its context and
// default command queue (created once, on first use), streams as command queues, and OpenCL errors as
// kbit statuses.
//
// Errors inside an operation are thrown as Failure after set_error() has recorded the message, and
// turned back into the status by run(): operations read as straight-line code, and nothing crosses the
// C boundary (the kit's exported functions call every operation inside kbit::guarded as well).
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <string>

#include "kbit_error.h"

namespace kbit::opencl {

// A failure whose message set_error() has already recorded.
struct Failure {
    kbit_status status;
};

// Records the error and throws it.
[[noreturn]] void fail(kbit_status status, const char* fn, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// Throws KBIT_STATUS_DEVICE_ERROR (KBIT_STATUS_OUT_OF_MEMORY for the allocation failures) naming the
// OpenCL call and its error code when err is not CL_SUCCESS.
void check(const char* fn, const char* what, cl_int err);

const char* error_name(cl_int err);

// Runs an operation's body, turning a Failure into its status.
template <class Body>
kbit_status run(Body&& body) {
    try {
        body();
        return KBIT_STATUS_SUCCESS;
    } catch (const Failure& f) {
        return f.status;
    }
}

// The device chosen without creating anything (for the probe and `kbit info`): KBIT_OPENCL_DEVICE
// picks "<platform>:<device>" by index or the first device whose name contains its text; otherwise
// the first GPU or accelerator of any platform, else the first device.
struct Choice {
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    cl_device_type type = 0;
    std::string description;  // "NAME (PLATFORM, OpenCL C x.y, N compute units)" or why there is none
};
Choice choose_device();

struct Runtime {
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;  // the default queue (stream NULL), in order
    Choice choice;
};

// The runtime, created on the first call; throws a Failure (DEVICE_ERROR) when there is no device.
const Runtime& runtime(const char* fn);

// The command queue a stream names: NULL is the default queue; anything else must be a cl_command_queue
// of this backend's context (an INVALID_ARGUMENT otherwise).
cl_command_queue queue_of(const char* fn, void* stream);

}  // namespace kbit::opencl
