// parallel_range.h — split [0, count) into one contiguous range per OpenMP thread: the CPU backend's
// one way to run a kernel on several threads.
#pragma once

#include <omp.h>

#include <cstdint>

namespace kbit::cpu {

// Whether this process is a fork() child of a process that had loaded the backend (fork_guard.cpp).
bool in_forked_child();

// Number of workers parallel_workers() uses at most (sizes per-worker scratch buffers): one in a
// fork() child, where GNU OpenMP's pool still names the parent's threads.
inline int64_t max_workers() { return in_forked_child() ? 1 : omp_get_max_threads(); }

// Runs body(begin, end, worker) over contiguous parts of [0, count), worker in [0, max_workers()), in
// parallel when every worker gets at least `grain` items (a parallel region costs a few
// microseconds). Ranges are static so that a worker streams through one contiguous part of memory.
// The worker index is passed explicitly: omp_get_thread_num() would be the caller's own thread number
// when a caller's OpenMP region calls in. `body` must not throw.
template <class F>
void parallel_workers(int64_t count, int64_t grain, F&& body) {
    if (count <= 0) return;
    const int64_t limit = max_workers();
    int64_t workers = grain > 0 ? count / grain : limit;
    if (workers > limit) workers = limit;
    if (workers <= 1) {
        body(int64_t{0}, count, int64_t{0});
        return;
    }
#pragma omp parallel num_threads(static_cast<int>(workers))
    {
        const int64_t t = omp_get_thread_num();
        const int64_t nt = omp_get_num_threads();
        const int64_t base = count / nt, extra = count % nt;  // no count * t: count may be ~2^57
        const int64_t begin = base * t + (t < extra ? t : extra);
        const int64_t end = begin + base + (t < extra ? 1 : 0);
        if (begin < end) body(begin, end, t);
    }
}

// As parallel_workers, for bodies that need no per-worker scratch: body(begin, end).
template <class F>
void parallel_range(int64_t count, int64_t grain, F&& body) {
    parallel_workers(count, grain, [&](int64_t begin, int64_t end, int64_t) { body(begin, end); });
}

// As parallel_range with every boundary but `count` on a multiple of `align` (whole bytes of packed
// nibbles, whole SIMD groups, whole scaler groups); `grain` counts items and is rounded down to
// whole aligns, at least one.
template <class F>
void parallel_range_aligned(int64_t count, int64_t align, int64_t grain, F&& body) {
    const int64_t grain_units = grain / align > 1 ? grain / align : 1;
    parallel_range((count + align - 1) / align, grain_units, [&](int64_t begin, int64_t end) {
        body(begin * align, end * align < count ? end * align : count);
    });
}

}  // namespace kbit::cpu
