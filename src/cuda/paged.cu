// Paged (managed) memory and fills of the optimizer interface: kbit::ops::managed_alloc, managed_free,
// prefetch and fill (kbit_ops_optim8.h; bitsandbytes' cget_managed_ptr, cprefetch, cfill_fp32,
// cfill_uint8). Like bitsandbytes, which gives them no stream parameter, the fills and the prefetch run
// on the legacy default stream.
#include <cstdio>
#include <type_traits>

#include "cuda_check.h"
#include "kbit_ops_optim8.h"

namespace kbit::cuda {
namespace {

constexpr size_t kMaxManagedBytes = size_t{1} << 48;

__global__ void fill_fp32_kernel(float* __restrict__ A, float value, int64_t n) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        A[i] = value;
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

// Managed memory attached to the host, as bitsandbytes allocates paged optimizer state. Sizes no
// machine can hold are refused before CUDA sees them (a huge managed request can stall a GPU).
void* managed_alloc(const char* fn, size_t bytes) {
    if (bytes > cuda::kMaxManagedBytes) {
        set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu bytes cannot be allocated (more than 2^48)", bytes);
        return nullptr;
    }
    void* p = nullptr;
    char what[80];
    std::snprintf(what, sizeof what, "cudaMallocManaged of %zu bytes", bytes);
    if (const cudaError_t e = cudaMallocManaged(&p, bytes, cudaMemAttachHost); e != cudaSuccess) {
        cuda::device_error(fn, what, e);
        return nullptr;
    }
    return p;
}

kbit_status managed_free(const char* fn, void* ptr) {
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

// The list's fills: fp32 (a kernel) and uint8 (a memset).
template <class T>
kbit_status fill(const char* fn, T* A, T value, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
        cuda::fill_fp32_kernel<<<cuda::grid_for((n + 255) / 256, 8), 256, 0, nullptr>>>(A, value, n);
        return cuda::check_launch(fn, "fill_fp32_kernel");
    } else {
        KBIT_CUDA_TRY(fn, "cudaMemsetAsync", cudaMemsetAsync(A, value, static_cast<size_t>(n), nullptr));
        return KBIT_STATUS_SUCCESS;
    }
}

template decltype(fill<float>) fill<float>;
template decltype(fill<unsigned char>) fill<unsigned char>;

}  // namespace kbit::ops
