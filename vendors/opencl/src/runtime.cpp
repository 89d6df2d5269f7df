#include "runtime.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>
#include <vector>

namespace kbit::opencl {

void fail(kbit_status status, const char* fn, const char* fmt, ...) {
    char message[400];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    throw Failure{set_error(status, fn, "%s", message)};
}

const char* error_name(cl_int err) {
    switch (err) {
#define KBIT_CL_ERROR(name) \
    case name: return #name;
        KBIT_CL_ERROR(CL_DEVICE_NOT_FOUND)
        KBIT_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
        KBIT_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
        KBIT_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        KBIT_CL_ERROR(CL_OUT_OF_RESOURCES)
        KBIT_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
        KBIT_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
        KBIT_CL_ERROR(CL_INVALID_VALUE)
        KBIT_CL_ERROR(CL_INVALID_PLATFORM)
        KBIT_CL_ERROR(CL_INVALID_DEVICE)
        KBIT_CL_ERROR(CL_INVALID_CONTEXT)
        KBIT_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
        KBIT_CL_ERROR(CL_INVALID_MEM_OBJECT)
        KBIT_CL_ERROR(CL_INVALID_BUFFER_SIZE)
        KBIT_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
        KBIT_CL_ERROR(CL_INVALID_KERNEL_NAME)
        KBIT_CL_ERROR(CL_INVALID_KERNEL_ARGS)
        KBIT_CL_ERROR(CL_INVALID_ARG_INDEX)
        KBIT_CL_ERROR(CL_INVALID_ARG_VALUE)
        KBIT_CL_ERROR(CL_INVALID_ARG_SIZE)
        KBIT_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
        KBIT_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
        KBIT_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
        KBIT_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
        KBIT_CL_ERROR(CL_INVALID_OPERATION)
        KBIT_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
        KBIT_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
#undef KBIT_CL_ERROR
        default: return "an unnamed OpenCL error";
    }
}

void check(const char* fn, const char* what, cl_int err) {
    if (err == CL_SUCCESS) return;
    const bool memory = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
                        err == CL_INVALID_BUFFER_SIZE;
    fail(memory ? KBIT_STATUS_OUT_OF_MEMORY : KBIT_STATUS_DEVICE_ERROR, fn, "%s failed: %s (%d)", what,
         error_name(err), static_cast<int>(err));
}

namespace {

std::string device_string(cl_device_id d, cl_device_info what) {
    size_t size = 0;
    if (clGetDeviceInfo(d, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "?";
    std::string s(size, '\0');
    if (clGetDeviceInfo(d, what, size, s.data(), nullptr) != CL_SUCCESS) return "?";
    s.resize(std::strlen(s.c_str()));
    return s;
}

std::string platform_name(cl_platform_id p) {
    char name[256] = "?";
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
    return name;
}

struct Candidate {
    cl_platform_id platform;
    cl_device_id device;
    int platform_index, device_index;
};

std::vector<Candidate> all_devices() {
    std::vector<Candidate> out;
    cl_uint platforms = 0;
    if (clGetPlatformIDs(0, nullptr, &platforms) != CL_SUCCESS || platforms == 0) return out;
    std::vector<cl_platform_id> ids(platforms);
    if (clGetPlatformIDs(platforms, ids.data(), nullptr) != CL_SUCCESS) return out;
    for (cl_uint p = 0; p < platforms; ++p) {
        cl_uint devices = 0;
        if (clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &devices) != CL_SUCCESS) continue;
        std::vector<cl_device_id> dev(devices);
        if (clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, devices, dev.data(), nullptr) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < devices; ++d) out.push_back({ids[p], dev[d], static_cast<int>(p), static_cast<int>(d)});
    }
    return out;
}

cl_device_type type_of(cl_device_id d) {
    cl_device_type t = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, nullptr);
    return t;
}

}  // namespace

Choice choose_device() {
    Choice c;
    const std::vector<Candidate> devices = all_devices();
    if (devices.empty()) {
        c.description = "no OpenCL platform with a device (is an ICD such as pocl-opencl-icd installed?)";
        return c;
    }
    const Candidate* pick = nullptr;
    const char* want = std::getenv("KBIT_OPENCL_DEVICE");
    if (want != nullptr && want[0] != '\0') {
        int p = -1, d = -1;
        char tail = 0;
        const bool indices = std::sscanf(want, "%d:%d%c", &p, &d, &tail) == 2;
        for (const Candidate& cand : devices) {
            if (indices ? cand.platform_index == p && cand.device_index == d
                        : device_string(cand.device, CL_DEVICE_NAME).find(want) != std::string::npos) {
                pick = &cand;
                break;
            }
        }
        if (pick == nullptr) {
            c.description = std::string("KBIT_OPENCL_DEVICE=") + want + " matches none of the " +
                            std::to_string(devices.size()) + " OpenCL devices";
            return c;
        }
    } else {
        for (const Candidate& cand : devices)
            if ((type_of(cand.device) & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) != 0) {
                pick = &cand;
                break;
            }
        if (pick == nullptr) pick = &devices.front();
    }
    c.platform = pick->platform;
    c.device = pick->device;
    c.type = type_of(pick->device);
    cl_uint units = 0;
    clGetDeviceInfo(pick->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
    c.description = device_string(pick->device, CL_DEVICE_NAME) + " (" + platform_name(pick->platform) + " " +
                    std::to_string(pick->platform_index) + ":" + std::to_string(pick->device_index) + ", " +
                    device_string(pick->device, CL_DEVICE_VERSION) + ", " + std::to_string(units) +
                    " compute units)";
    return c;
}

const Runtime& runtime(const char* fn) {
    static pid_t creator = 0;  // the process that made the context: a forked child cannot use it
    static Runtime rt{};
    static kbit_status status = KBIT_STATUS_SUCCESS;
    static std::string problem;
    static std::once_flag once;
    std::call_once(once, [] {
        creator = getpid();
        rt.choice = choose_device();
        if (rt.choice.device == nullptr) {
            status = KBIT_STATUS_DEVICE_ERROR;
            problem = rt.choice.description;
            return;
        }
        rt.device = rt.choice.device;
        cl_int err = CL_SUCCESS;
        const cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                               reinterpret_cast<cl_context_properties>(rt.choice.platform), 0};
        rt.context = clCreateContext(props, 1, &rt.device, nullptr, nullptr, &err);
        if (err == CL_SUCCESS) rt.queue = clCreateCommandQueue(rt.context, rt.device, 0, &err);
        if (err != CL_SUCCESS) {
            status = KBIT_STATUS_DEVICE_ERROR;
            problem = std::string("cannot create an OpenCL context and queue on ") + rt.choice.description + ": " +
                      error_name(err);
        }
    });
    if (status != KBIT_STATUS_SUCCESS) fail(status, fn, "%s", problem.c_str());
    // OpenCL drivers keep threads and device state that fork() does not copy; the child would hang or
    // crash on the parent's context, so it gets a clear error instead.
    if (getpid() != creator)
        fail(KBIT_STATUS_DEVICE_ERROR, fn,
             "the OpenCL context belongs to the parent process (pid %d); OpenCL cannot be used after fork()",
             static_cast<int>(creator));
    return rt;
}

cl_command_queue queue_of(const char* fn, void* stream) {
    const Runtime& rt = runtime(fn);
    if (stream == nullptr) return rt.queue;
    cl_command_queue q = static_cast<cl_command_queue>(stream);
    cl_context ctx = nullptr;
    if (clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, nullptr) != CL_SUCCESS || ctx != rt.context)
        fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "stream %p is not a command queue of this backend's OpenCL context", stream);
    return q;
}

}  // namespace kbit::opencl
