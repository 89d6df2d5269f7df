// Paged-memory functions of the optimizer interface on the CPU: "managed" memory is plain 64-byte
// aligned host memory, prefetching has nothing to do, fills are parallel stores.
#include <algorithm>
#include <cstdlib>

#include "kbit/kbit_optim8.h"
#include "kbit_error.h"
#include "kbit_validate_optim8.h"
#include "parallel_range.h"

namespace {

constexpr size_t kAlignment = 64;
constexpr int64_t kFillChunk = int64_t{1} << 20;  // elements per thread at least

template <class T>
void fill(T* a, T value, int64_t n) {
    kbit::cpu::parallel_range(n, kFillChunk, [&](int64_t i0, int64_t i1) { std::fill(a + i0, a + i1, value); });
}

}  // namespace

extern "C" {

KBIT_API void* cget_managed_ptr(size_t bytes) {
    static const char* fn = "cget_managed_ptr";
    void* result = nullptr;
    kbit::guarded(fn, [&] {
        if (kbit_status s = kbit::validate_managed_alloc(fn, bytes); s != KBIT_STATUS_SUCCESS) return s;
        const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
        if (rounded < bytes)
            return kbit::set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu bytes cannot be allocated", bytes);
        result = std::aligned_alloc(kAlignment, rounded);
        if (result == nullptr)
            return kbit::set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "allocation of %zu bytes failed", bytes);
        return KBIT_STATUS_SUCCESS;
    });
    return result;
}

KBIT_API kbit_status kbit_free_managed_ptr(void* ptr) {
    std::free(ptr);
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status cprefetch(void* ptr, size_t bytes, int device) {
    return kbit::validate_prefetch("cprefetch", ptr, bytes, device);
}

KBIT_API kbit_status cfill_fp32(float* A, float* /*B*/, float value, int64_t n) {
    static const char* fn = "cfill_fp32";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_fill(fn, A, n, &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty) fill(A, value, n);
        return s;
    });
}

KBIT_API kbit_status cfill_uint8(unsigned char* A, unsigned char* /*B*/, unsigned char value, int64_t n) {
    static const char* fn = "cfill_uint8";
    return kbit::guarded(fn, [&] {
        bool empty = false;
        const kbit_status s = kbit::validate_fill(fn, A, n, &empty);
        if (s == KBIT_STATUS_SUCCESS && !empty) fill(A, value, n);
        return s;
    });
}

}  // extern "C"
