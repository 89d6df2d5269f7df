// Paged (managed) memory helpers of the optimizer interface (cget_managed_ptr, kbit_free_managed_ptr,
// cprefetch, cfill_fp32, cfill_uint8; exported by api_optim8.cpp) and byte fills used elsewhere.
#include <cstdio>

#include "cuda_check.h"
#include "cuda_ops.h"

namespace kbit::cuda {
namespace {

__global__ void fill_fp32_kernel(float* __restrict__ A, float value, int64_t n) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        A[i] = value;
}

}  // namespace

// Managed memory attached to the host, as bitsandbytes allocates paged optimizer state. Sizes no
// machine can hold are refused before CUDA sees them (a huge managed request can stall a GPU).
constexpr size_t kMaxManagedBytes = size_t{1} << 48;

kbit_status get_managed_ptr(const char* fn, size_t bytes, void** ptr) {
    if (bytes > kMaxManagedBytes)
        return set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu bytes cannot be allocated (more than 2^48)", bytes);
    void* p = nullptr;
    char what[80];
    std::snprintf(what, sizeof what, "cudaMallocManaged of %zu bytes", bytes);
    KBIT_CUDA_TRY(fn, what, cudaMallocManaged(&p, bytes, cudaMemAttachHost));
    *ptr = p;
    return KBIT_STATUS_SUCCESS;
}

kbit_status free_managed_ptr(const char* fn, void* ptr) {
    KBIT_CUDA_TRY(fn, "cudaFree", cudaFree(ptr));
    return KBIT_STATUS_SUCCESS;
}

// Asynchronous migration on the legacy default stream, when the target supports concurrent managed
// access (otherwise, as in bitsandbytes, nothing happens). device -1 = the host, checked against the
// current device's support.
kbit_status prefetch(const char* fn, void* ptr, size_t bytes, int device) {
    int query = device;
    if (device < 0) KBIT_CUDA_TRY(fn, "cudaGetDevice", cudaGetDevice(&query));
    int concurrent = 0;
    KBIT_CUDA_TRY(fn, "cudaDeviceGetAttribute (concurrent managed access)",
                  cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, query));
    if (concurrent == 0) return KBIT_STATUS_SUCCESS;
#if CUDART_VERSION >= 13000
    cudaMemLocation location{};
    location.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    location.id = device < 0 ? 0 : device;
    KBIT_CUDA_TRY(fn, "cudaMemPrefetchAsync", cudaMemPrefetchAsync(ptr, bytes, location, 0, 0));
#else
    KBIT_CUDA_TRY(fn, "cudaMemPrefetchAsync", cudaMemPrefetchAsync(ptr, bytes, device < 0 ? cudaCpuDeviceId : device, 0));
#endif
    return KBIT_STATUS_SUCCESS;
}

kbit_status fill_fp32(const char* fn, float* A, float value, int64_t n, void* stream) {
    fill_fp32_kernel<<<grid_for((n + 255) / 256, 8), 256, 0, to_stream(stream)>>>(A, value, n);
    return check_launch(fn, "fill_fp32_kernel");
}

kbit_status fill_uint8(const char* fn, uint8_t* A, uint8_t value, int64_t n, void* stream) {
    KBIT_CUDA_TRY(fn, "cudaMemsetAsync", cudaMemsetAsync(A, value, static_cast<size_t>(n), to_stream(stream)));
    return KBIT_STATUS_SUCCESS;
}

}  // namespace kbit::cuda
