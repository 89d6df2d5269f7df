#include "cuda_check.h"

#include <algorithm>

namespace kbit::cuda {

kbit_status device_error(const char* fn, const char* what, cudaError_t err) {
    (void)cudaGetLastError();  // reset a non-sticky error so the next call does not see it again
    const kbit_status status =
        err == cudaErrorMemoryAllocation ? KBIT_STATUS_OUT_OF_MEMORY : KBIT_STATUS_DEVICE_ERROR;
    if (err == cudaErrorNoKernelImageForDevice)
        return set_error(status, fn, "%s: %s: %s (libkbit_cuda.so has machine code for sm_%s and PTX for "
                         "compute_%s only; rebuild with -DKBIT_CUDA_ARCHS=<this GPU's architecture>)",
                         what, cudaGetErrorName(err), cudaGetErrorString(err), KBIT_CUDA_SASS_CSV,
                         KBIT_CUDA_PTX_CSV);
    return set_error(status, fn, "%s: %s: %s", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

kbit_status check_launch(const char* fn, const char* kernel) {
    const cudaError_t err = cudaPeekAtLastError();
    if (err == cudaSuccess) return KBIT_STATUS_SUCCESS;
    return device_error(fn, kernel, err);
}

int multiprocessor_count() {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

unsigned grid_for(int64_t work, int ctas_per_sm) {
    const int sms = multiprocessor_count();
    const int64_t cap = sms > 0 ? int64_t{sms} * ctas_per_sm : 1024;
    return static_cast<unsigned>(std::max<int64_t>(1, std::min(work, cap)));
}

}  // namespace kbit::cuda
