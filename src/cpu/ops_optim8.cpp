// The optimizer interface of libkbit_cpu.so: the operations behind the exported functions of
// kbit_export_optim8.h (which checks every argument first): kernel choice (scalar reference or
// Highway per KBIT_CPU_ISA) and OpenMP threads over independent ranges (chunks of 4096 elements for
// the 32-bit optimizers, 256-element blocks for the 8-bit ones), so results do not depend on the
// thread count; and the paged-memory helpers, for which "managed" memory is plain 64-byte aligned
// host memory, prefetching has nothing to do and fills are parallel stores.
#include <algorithm>
#include <cstdlib>

#include "aligned_buffer.h"
#include "kbit_dtype.h"
#include "kbit_ops_optim8.h"
#include "kernels_optim8.h"
#include "parallel_range.h"
#include "ref_optim8.h"
#include "tuning.h"

namespace {

// Runs fn(i0, i1) over [0, count) on OpenMP threads with at least `grain` units each (smaller calls
// stay on the caller's thread; tuning.h says how many elements make a unit's worth).
auto parallel(int64_t grain) {
    return [grain](int64_t count, auto&& fn) { kbit::cpu::parallel_range(count, grain, fn); };
}

}  // namespace

namespace kbit::ops {

template <class T>
kbit_status optim32(const char*, optim::Kind kind, const optim::Hyper& h, T* g, T* p, float* state1, float* state2,
                    float* unorm, float max_unorm, float param_norm, int64_t n) {
    const ref::Mem32 m{g, p, state1, state2, n};
    ref::run32(cpu::optim_kernels(), Elem<T>::dtype, kind, h, m, unorm, max_unorm, param_norm,
               parallel(cpu::kGrainElements / optim::kNormChunk));
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status optim8_blockwise(const char*, optim::Kind kind, const optim::Hyper& h, T* p, T* g, unsigned char* state1,
                             unsigned char* state2, float* quantiles1, float* quantiles2, float* absmax1,
                             float* absmax2, int64_t n) {
    const ref::Mem8 m{p, g, state1, state2, quantiles1, quantiles2, absmax1, absmax2, n};
    ref::run8(cpu::optim_kernels(), Elem<T>::dtype, kind, h, m, parallel(cpu::kHeavyGrainElements / optim::kBlock));
    return KBIT_STATUS_SUCCESS;
}

void* managed_alloc(const char* fn, size_t bytes) {
    void* result = kbit::cpu::aligned_alloc64(bytes);
    if (result == nullptr) set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "allocation of %zu bytes failed", bytes);
    return result;
}

kbit_status managed_free(const char*, void* ptr) {
    std::free(ptr);
    return KBIT_STATUS_SUCCESS;
}

kbit_status prefetch(const char*, void*, size_t, int) { return KBIT_STATUS_SUCCESS; }

template <class T>
kbit_status fill(const char*, T* A, T value, int64_t n) {
    cpu::parallel_range(n, cpu::kGrainFillElements,
                        [&](int64_t i0, int64_t i1) { std::fill(A + i0, A + i1, value); });
    return KBIT_STATUS_SUCCESS;
}

// For every element type: the exported functions that call these are compiled in another file
// (src/common/generated/kbit_optim8_exports.cpp).
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(optim32);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(optim8_blockwise);
template decltype(fill<float>) fill<float>;
template decltype(fill<unsigned char>) fill<unsigned char>;

}  // namespace kbit::ops
