// optim_rules.h — the two places where the CUDA optimizer kernels cannot call kbit_optim_math.h
// as written, restated so that they compute the same values, as host/device functions that
// tests/cuda/host_logic.cpp compares with the header on the host:
//   * tree_sum runs in place on one thread; the kernel runs each level in parallel (tree_level);
//   * quantize8 searches the table with code8_index; the kernel searches the shared-memory copy in
//     breadth-first layout (code8_index_bfs, proven equal in code8_search.h), then applies the
//     header's own sign_fix8.
#pragma once

#include <cstdint>

#include "code8_search.h"
#include "kbit_optim_math.h"

namespace kbit::cuda {

// Number of values left after one level of optim::tree_sum over `count` values.
KBIT_HD int64_t tree_level_count(int64_t count) { return count / 2 + (count & 1); }

// Output i (< tree_level_count(count)) of one level of optim::tree_sum: s[2i] + s[2i+1], or the odd
// last value carried up unchanged. A level reads only `src`, so its outputs may be computed in any
// order (into another buffer); the header's in-place loop reads each pair before overwriting it.
KBIT_HD float tree_level_value(const float* src, int64_t count, int64_t i) {
    return 2 * i + 1 < count ? src[2 * i] + src[2 * i + 1] : src[count - 1];
}

// optim::quantize8(table, s, absmax, is_signed) with the search on the breadth-first node copy.
KBIT_HD uint8_t quantize8_bfs(const float* table, const float* node, float s, float absmax, bool is_signed) {
    const uint8_t c = code8_index_bfs(node, table, s / absmax);
    return is_signed ? optim::sign_fix8(table, c, s) : c;
}

}  // namespace kbit::cuda
