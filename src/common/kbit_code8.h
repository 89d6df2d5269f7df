// kbit_code8.h — the index rule of blockwise 8-bit quantization against a caller's 256-entry table,
// shared by every backend (and by the nested-absmax and optimizer kernels). Compiles as C++ and CUDA.
#pragma once

#include <cstdint>

#include "kbit_formats.h"  // KBIT_HD

namespace kbit {

// bitsandbytes' device search over 256 non-decreasing codes `c` for a normalised value y: seven
// halving steps from index 127, then a choice between the landing index and its neighbour by the
// fp32 midpoint. For its dynamic maps (and any strictly increasing table) this is the nearest code
// with midpoints (c[j] + c[j+1]) * 0.5f, a value exactly on a midpoint going to the even index, y
// below c[0] -> 0, above c[255] -> 255, NaN -> 0. This function is the definition; fast paths must
// reproduce it bit for bit for every non-decreasing table.
KBIT_HD uint8_t code8_index(const float* c, float y) {
    int p = 127, lo = 0, hi = 255;
    float lv = -1.0f, hv = 1.0f;
    for (int step = 64; step >= 1; step >>= 1) {
        if (y > c[p]) {
            lo = p;
            lv = c[p];
            p += step;
        } else {
            hi = p;
            hv = c[p];
            p -= step;
        }
    }
    if (hi == 255) hv = c[255];
    if (lo == 0) lv = c[0];
    if (y > c[p]) return static_cast<uint8_t>(y > (hv + c[p]) * 0.5f ? hi : p);
    return static_cast<uint8_t>(y < (lv + c[p]) * 0.5f ? lo : p);
}

}  // namespace kbit
