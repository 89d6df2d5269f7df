// gemm_4bit_choice.h — which of the 4-bit GEMM's two kernel bodies (gemm_4bit_kernels.cuh) takes a
// product, and the skinny body's launch shape: host logic, shared by gemm_4bit and the grouped GEMM (which
// must choose for each expert exactly as gemm_4bit would for that expert's rows) and checked on the host by
// tests/cuda/host_logic.cpp.
#pragma once

#include <cstdint>

#include "host_align.h"

namespace kbit::cuda {

constexpr int kSkinnyRows = 4;          // weight rows per CTA of the skinny body
constexpr int kSkinnyMaxThreads = 128;  // its largest CTA
constexpr int kSkinnyMaxM = 4;          // its most activation rows

// Whether the skinny body takes an M-row product of A (M x K) and W (rows of row_elems nibbles): 128-bit
// loads of 32-element chunks need K and the row stride multiples of 32 and A and W 16-byte aligned.
inline bool skinny_fits(int64_t M, int64_t K, int64_t row_elems, const void* A, const void* W) {
    return M <= kSkinnyMaxM && K % 32 == 0 && row_elems % 32 == 0 && host_aligned(A, 16) && host_aligned(W, 16);
}

// Threads per CTA of the skinny body: whole warps, one 32-element chunk per thread and step.
inline int skinny_threads(int64_t K) {
    const int64_t chunks = K / 32;
    const int64_t threads = (chunks + 31) / 32 * 32;
    return threads < 32 ? 32 : (threads > kSkinnyMaxThreads ? kSkinnyMaxThreads : static_cast<int>(threads));
}

}  // namespace kbit::cuda
