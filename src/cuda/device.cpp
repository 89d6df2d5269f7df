// The core operations of libkbit_cuda.so (kbit_ops_core.h): identity and the device probe, device
// memory, copies and stream synchronization.
//
// The CUDA runtime is linked statically and loads the driver (libcuda.so.1) itself, so this library
// loads on any Linux machine; without a driver or a device kbit_backend_probe() returns 0 and
// kbit_backend_info() says why. Probing only counts devices and reads attributes: it creates no
// context and allocates nothing.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_check.h"
#include "kbit_ops_core.h"
#include "kbit_stream_errors.h"

namespace {

// Architectures this build has code for (from cmake/KbitCuda.cmake), e.g. "75,80,90" and "120".
bool listed(const char* csv, int arch, bool ptx) {
    const char* p = csv;
    while (*p != '\0') {
        const int a = std::atoi(p);
        if (ptx ? a <= arch : (a / 10 == arch / 10 && a <= arch)) return true;
        p = std::strchr(p, ',');
        if (p == nullptr) break;
        ++p;
    }
    return false;
}

// Machine code for sm_XY runs on X.Z with Z >= Y; PTX for compute_XY is JIT-compiled for >= X.Y.
bool can_run_on(int major, int minor) {
    const int arch = major * 10 + minor;
    return listed(KBIT_CUDA_SASS_CSV, arch, false) || listed(KBIT_CUDA_PTX_CSV, arch, true);
}

struct Probe {
    int score = 0;
    std::string info;
};

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

Probe probe_device() {
    Probe p;
    const std::string built = std::string("kernels for sm_") + KBIT_CUDA_SASS_CSV +
                              (KBIT_CUDA_PTX_CSV[0] != '\0' ? std::string(" + PTX compute_") + KBIT_CUDA_PTX_CSV : "");
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        const char* hint = err == cudaErrorInsufficientDriver
                               ? "; no NVIDIA driver (libcuda.so.1) was found, or it is older than this CUDA runtime"
                               : "";
        p.info = std::string("CUDA backend unavailable: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                 hint + " (" + built + ")";
        return p;
    }
    if (count == 0) {
        p.info = "CUDA backend unavailable: no CUDA device (" + built + ")";
        return p;
    }
    int device = 0, major = 0, minor = 0, sms = 0, driver = 0, runtime = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        const cudaError_t e = cudaGetLastError();
        p.info = std::string("CUDA backend unavailable: cannot query device: ") + cudaGetErrorString(e);
        return p;
    }
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    char line[512];
    std::snprintf(line, sizeof line, "%s, sm_%d%d, %d SMs, %.0f GiB, driver %s, runtime %s, %d device%s; %s",
                  prop.name, major, minor, sms, static_cast<double>(prop.totalGlobalMem) / (1u << 30),
                  version_string(driver).c_str(), version_string(runtime).c_str(), count, count == 1 ? "" : "s",
                  built.c_str());
    p.info = line;
    if (!can_run_on(major, minor)) {
        p.info += "; CUDA backend unavailable: no code for sm_" + std::to_string(major * 10 + minor) +
                  " (rebuild with -DKBIT_CUDA_ARCHS=" + std::to_string(major * 10 + minor) + ")";
        return p;
    }
    p.score = 100;
    return p;
}

}  // namespace

namespace kbit::ops {

int32_t backend_probe() { return probe_device().score; }

const char* backend_name() { return "cuda"; }

std::string backend_info() { return probe_device().info; }  // the device current at the first call

kbit_status device_malloc(const char* fn, void** ptr, size_t bytes) {
    void* p = nullptr;
    char what[64];
    std::snprintf(what, sizeof what, "cudaMalloc of %zu bytes", bytes);
    KBIT_CUDA_TRY(fn, what, cudaMalloc(&p, bytes));
    *ptr = p;
    return KBIT_STATUS_SUCCESS;
}

kbit_status device_free(const char* fn, void* ptr) {
    KBIT_CUDA_TRY(fn, "cudaFree", cudaFree(ptr));
    return KBIT_STATUS_SUCCESS;
}

kbit_status memcpy(const char* fn, void* dst, const void* src, size_t bytes, int32_t kind) {
    // cudaMemcpyDefault lets unified addressing tell host, device and managed memory apart.
    KBIT_CUDA_TRY(fn, "cudaMemcpy", cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    // A device-to-device cudaMemcpy does not wait for the copy; the contract is synchronous.
    if (kind == KBIT_MEMCPY_DEVICE_TO_DEVICE) KBIT_CUDA_TRY(fn, "cudaStreamSynchronize", cudaStreamSynchronize(0));
    return KBIT_STATUS_SUCCESS;
}

// Then the errors that calls on this stream found on the device (kbit_stream_errors.h).
kbit_status stream_synchronize(const char* fn, void* stream) {
    KBIT_CUDA_TRY(fn, "cudaStreamSynchronize", cudaStreamSynchronize(cuda::to_stream(stream)));
    return stream_errors().take(stream);
}

}  // namespace kbit::ops
