// ref_bnb_cpu.h — scalar reference of the kernels that only the bitsandbytes-CPU interface has
// (include/kbit/kbit_bnb_cpu.h): the 4-bit GEMV on bitsandbytes' repacked CPU weight layout.
#pragma once

#include <cstdint>

#include "kbit_formats.h"
#include "kbit_half.h"

namespace kbit::ref {

// Nibble of weight element (row o, column k) of an N x K matrix in bitsandbytes' CPU layout: rows in
// groups of 32, group g holding K / 2 runs of 32 bytes; byte t of run kk has (32 g + t / 2, 2 kk + t % 2)
// in its low nibble and (32 g + 16 + t / 2, 2 kk + t % 2) in its high nibble.
inline uint8_t bnb_cpu_nibble(const uint8_t* w, int64_t K, int64_t o, int64_t k) {
    const int64_t g = o / 32, r = o % 32;
    const int64_t t = 2 * (r % 16) + k % 2;
    const uint8_t byte = w[(g * (K / 2) + k / 2) * 32 + t];
    return r < 16 ? byte & 0x0F : byte >> 4;
}

// Output rows [32 g0, 32 g1) of gemv_4bit_inference_cpu_<fmt>_bf16 for every activation row: per block,
// sum_k RN32(x * lut[q]) left to right in fp32, scaled once by the block's bf16 absmax and added to the
// row total in fp32 (each operation rounded separately), the total rounded once to bf16.
void bnb_cpu_gemv_4bit_groups(QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                              const uint8_t* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize,
                              int64_t x_stride, int64_t out_stride, int64_t g0, int64_t g1);

}  // namespace kbit::ref
