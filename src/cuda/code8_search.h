// code8_search.h — kbit::code8_index (kbit_code8.h) in a layout that suits shared memory.
// Compiles as C++ and CUDA, so the equivalence is unit-tested on the host (tests/cuda).
//
// code8_index compares y with the odd entries 127, 63|191, ... (7 halving steps) and lands on an even
// p = 2q, where bit (6 - L) of q is the direction taken at step L. Whatever the table holds, the last
// right turn was at p - 1 (or never, p = 0 -> lo = 0) and the last left turn at p + 1 (or never,
// p = 254 -> hi = 255): in q, the lowest set bit j marks the last right turn and its node is
// ((q >> (j+1)) * 2 + 1) * 2^(j+1) - 1 = 2q - 1; the lowest clear bit likewise gives 2q + 1. So
// lo = max(p - 1, 0), hi = p + 1, lv = c[lo], hv = c[hi], and the final choice needs only c[p] and
// one neighbour. The 127 odd entries are stored in breadth-first order (node e, children 2e, 2e+1),
// so the 2^L candidates of step L are 2^L consecutive words: no shared-memory bank conflicts for
// L <= 5 and at most two-way at L = 6. Same comparisons, same fp32 expressions: same result.
#pragma once

#include <cstdint>

#include "kbit_formats.h"

namespace kbit {

// Breadth-first node (1..127) that holds table entry t, for the odd t = 1..253; 0 for other t.
KBIT_HD int code8_node_of(int t) {
    if (t < 1 || t > 253 || (t & 1) == 0) return 0;
    int tz = 0;  // trailing zeros of t + 1 = (2k + 1) * 2^(7 - level)
    while (((t + 1) >> tz & 1) == 0) ++tz;
    const int level = 7 - tz;
    const int k = (t + 1) >> (tz + 1);
    return (1 << level) + k;
}

// Fills node[128] (node[0] unused) from the 256-entry table.
KBIT_HD void code8_build_nodes(const float* table, float* node) {
    for (int t = 1; t <= 253; t += 2) node[code8_node_of(t)] = table[t];
    node[0] = 0.0f;
}

// Identical to code8_index(table, y) for every table and y (see above).
KBIT_HD uint8_t code8_index_bfs(const float* node, const float* table, float y) {
    int e = 1;
    for (int level = 0; level < 7; ++level) e = 2 * e + (y > node[e] ? 1 : 0);
    const int p = 2 * (e - 128);
    const float cp = table[p];
    if (y > cp) {
        const float hv = table[p + 1];
        return static_cast<uint8_t>(y > (hv + cp) * 0.5f ? p + 1 : p);
    }
    const int lo = p == 0 ? 0 : p - 1;
    const float lv = table[lo];
    return static_cast<uint8_t>(y < (lv + cp) * 0.5f ? lo : p);
}

}  // namespace kbit
