// seq_sum.cuh — the double-precision sum of an fp32 array in index order, on one GPU thread.
// Means that must be bit-identical across backends (bitsandbytes' nested offset, torchao's scaler
// mean) are defined from this sequential sum; a parallel sum would round differently. One thread
// is slow (a dependent double add per element, ~4 ms per million values) but these run once, when a
// model is quantized.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kbit::cuda {

template <class Finish>
__global__ void seq_sum_kernel(const float* __restrict__ x, int64_t count, Finish finish) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
        float v[16];  // independent loads first, then the dependent additions in order
#pragma unroll
        for (int j = 0; j < 16; ++j) v[j] = __ldg(x + i + j);
#pragma unroll
        for (int j = 0; j < 16; ++j) sum = __dadd_rn(sum, static_cast<double>(v[j]));
    }
    for (; i < count; ++i) sum = __dadd_rn(sum, static_cast<double>(__ldg(x + i)));
    finish(sum, count);
}

}  // namespace kbit::cuda
