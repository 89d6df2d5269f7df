// parallel_range.h — split [0, count) into one contiguous range per OpenMP thread.
#pragma once

#include <omp.h>

#include <cstdint>

namespace kbit::cpu {

// Runs body(begin, end) over contiguous parts of [0, count), in parallel when every thread gets at
// least `grain` items (the call overhead of a parallel region is a few microseconds). Ranges are
// static so that a thread streams through one contiguous part of memory. `body` must not throw.
template <class F>
void parallel_range(int64_t count, int64_t grain, F&& body) {
    if (count <= 0) return;
    const int64_t max_threads = omp_get_max_threads();
    int64_t threads = grain > 0 ? count / grain : max_threads;
    if (threads > max_threads) threads = max_threads;
    if (threads <= 1) {
        body(int64_t{0}, count);
        return;
    }
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
        const int64_t t = omp_get_thread_num();
        const int64_t nt = omp_get_num_threads();
        const int64_t base = count / nt, extra = count % nt;  // no count * t: count may be ~2^57
        const int64_t begin = base * t + (t < extra ? t : extra);
        const int64_t end = begin + base + (t < extra ? 1 : 0);
        if (begin < end) body(begin, end);
    }
}

}  // namespace kbit::cpu
