// aligned_buffer.h — the CPU backend's 64-byte aligned allocations (managed and device memory,
// the kernels' scratch).
//
// Not Highway's AllocateAligned: it was the only function the backend took from libhwy.so, and
// loading that library runs a timer calibration (a static initializer of Highway 1.0.3) that cost
// every process loading the backend ~6 ms of CPU (perf, `kbit info`). With this, Highway is used
// from its headers only and libhwy.so is not a dependency of libkbit_cpu.so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace kbit::cpu {

// `bytes` rounded up to a whole number of 64-byte lines (one AVX-512 vector; std::aligned_alloc
// takes only multiples of the alignment), 64-byte aligned, uninitialized; nullptr where the rounded
// size does not fit size_t or the allocation fails. Free with std::free. The backend's allocations
// of managed and device memory (ops_core.cpp, ops_optim8.cpp) and the kernels' scratch below.
inline void* aligned_alloc64(size_t bytes) {
    constexpr size_t kAlign = 64;
    if (bytes > SIZE_MAX - (kAlign - 1)) return nullptr;
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    return std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
}

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
template <class T>
using AlignedBuffer = std::unique_ptr<T[], FreeDeleter>;

// `count` elements of T (aligned_alloc64); throws std::bad_alloc (the API layer's catch turns it into
// KBIT_STATUS_OUT_OF_MEMORY).
template <class T>
AlignedBuffer<T> aligned_buffer(size_t count) {
    if (count > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    void* p = aligned_alloc64(count * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return AlignedBuffer<T>(static_cast<T*>(p));
}

}  // namespace kbit::cpu
