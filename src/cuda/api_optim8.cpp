// The optimizer interface of libkbit_cuda.so: the operations behind the exported functions of
// kbit_export_optim8.h (which checks every argument first): the kernels of optim32.cu /
// optim8_blockwise.cu and the paged-memory helpers of paged.cu. bitsandbytes' optimizer functions
// have no stream parameter: like bitsandbytes, they run on the legacy default stream (so do cfill_*
// and cprefetch).
#include <type_traits>

#include "cuda_ops.h"
#include "kbit_ops_optim8.h"

namespace kbit::ops {

template <class T>
kbit_status optim32(const char* fn, optim::Kind kind, const optim::Hyper& h, T* g, T* p, float* state1, float* state2,
                    float* unorm, float max_unorm, float param_norm, int64_t n) {
    const cuda::Optim32Args m{g, p, state1, state2, unorm, max_unorm, param_norm, n};
    return cuda::optim32(fn, Elem<T>::dtype, kind, h, m, nullptr);
}

template <class T>
kbit_status optim8_blockwise(const char* fn, optim::Kind kind, const optim::Hyper& h, T* p, T* g,
                             unsigned char* state1, unsigned char* state2, float* quantiles1, float* quantiles2,
                             float* absmax1, float* absmax2, int64_t n) {
    const cuda::Optim8Args m{p, g, state1, state2, quantiles1, quantiles2, absmax1, absmax2, n};
    return cuda::optim8_blockwise(fn, Elem<T>::dtype, kind, h, m, nullptr);
}

void* managed_alloc(const char* fn, size_t bytes) {
    void* result = nullptr;
    return cuda::get_managed_ptr(fn, bytes, &result) == KBIT_STATUS_SUCCESS ? result : nullptr;
}

kbit_status managed_free(const char* fn, void* ptr) { return cuda::free_managed_ptr(fn, ptr); }

kbit_status prefetch(const char* fn, void* ptr, size_t bytes, int device) {
    return cuda::prefetch(fn, ptr, bytes, device);
}

// The list's fills: fp32 and uint8.
template <class T>
kbit_status fill(const char* fn, T* A, T value, int64_t n) {
    if constexpr (std::is_same_v<T, float>) return cuda::fill_fp32(fn, A, value, n, nullptr);
    else return cuda::fill_uint8(fn, A, value, n, nullptr);
}

// For every element type: the exported functions that call these are compiled in another file
// (src/common/generated/kbit_optim8_exports.cpp).
template decltype(optim32<float>) optim32<float>;
template decltype(optim32<kbit_half>) optim32<kbit_half>;
template decltype(optim32<kbit_bf16>) optim32<kbit_bf16>;
template decltype(optim8_blockwise<float>) optim8_blockwise<float>;
template decltype(optim8_blockwise<kbit_half>) optim8_blockwise<kbit_half>;
template decltype(optim8_blockwise<kbit_bf16>) optim8_blockwise<kbit_bf16>;
template decltype(fill<float>) fill<float>;
template decltype(fill<unsigned char>) fill<unsigned char>;

}  // namespace kbit::ops
