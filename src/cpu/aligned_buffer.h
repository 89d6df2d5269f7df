// aligned_buffer.h — scratch arrays for kernels that store whole SIMD vectors into them.
//
// Not Highway's AllocateAligned: it was the only function the backend took from libhwy.so, and
// loading that library runs a timer calibration (a static initializer of Highway 1.0.3) that cost
// every process loading the backend ~6 ms of CPU (perf, `kbit info`). With this, Highway is used
// from its headers only and libhwy.so is not a dependency of libkbit_cpu.so.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace kbit::cpu {

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
template <class T>
using AlignedBuffer = std::unique_ptr<T[], FreeDeleter>;

// `count` elements of T, 64-byte aligned (one AVX-512 vector), uninitialized; throws std::bad_alloc
// (the API layer's catch turns it into KBIT_STATUS_OUT_OF_MEMORY).
template <class T>
AlignedBuffer<T> aligned_buffer(size_t count) {
    constexpr size_t kAlign = 64;
    const size_t bytes = count * sizeof(T);
    if (count != 0 && bytes / count != sizeof(T)) throw std::bad_alloc();
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded < bytes) throw std::bad_alloc();
    void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
    if (p == nullptr) throw std::bad_alloc();
    return AlignedBuffer<T>(static_cast<T*>(p));
}

}  // namespace kbit::cpu
