// kernels_8bit.h — the CPU backend's SIMD 8-bit kernel tables (Highway: AVX2 or AVX-512, chosen by
// kbit::cpu::active_isa()); nullptr when KBIT_CPU_ISA=ref, where the entry points call the scalar
// reference (ref_8bit.h) instead. Kernels work on a range (of blocks, rows or elements) so that the
// entry points can split a call across OpenMP threads; arguments are already validated.
#pragma once

#include <cstdint>

#include "kbit/kbit_core.h"
#include "kbit_code8_lut.h"

namespace kbit::cpu {

// Element-type slot of the blockwise tables.
enum DtypeSlot { kSlotF32 = 0, kSlotF16 = 1, kSlotBF16 = 2 };

struct Blockwise8Kernels {
    // Blocks [block_begin, block_end) of an n-element input of the slot's type; `stream` (out aligned
    // to 64 bytes) asks for non-temporal stores of the codes.
    void (*quantize[3])(const Code8Lut& lut, const void* A, float* absmax, uint8_t* out, int64_t blocksize,
                        int64_t n, int64_t block_begin, int64_t block_end, bool stream);
    // Elements [begin, end), begin a multiple of blocksize; `stream` asks for non-temporal stores.
    void (*dequantize[3])(const float* code, const uint8_t* A, const float* absmax, void* out,
                          int64_t blocksize, int64_t begin, int64_t end, bool stream);
};
const Blockwise8Kernels* blockwise8_kernels();

struct Int8Kernels {
    // Rows [row_begin, row_end) of cint8_vector_quant.
    void (*vector_quant)(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t cols,
                         int64_t row_begin, int64_t row_end);
    // Rows [row_begin, row_end) of cdequant_mm_int32_fp16.
    void (*dequant_mm)(const int32_t* A, const float* rowStats, const float* colStats, kbit_half* out,
                       const kbit_half* bias, int64_t cols, int64_t row_begin, int64_t row_end);
    // Rows [row_begin, row_end) of |A| >= fp16(threshold) column flags: flags[c] |= 1 (threshold > 0).
    void (*outlier_flags)(const kbit_half* A, uint8_t* flags, float threshold, int64_t cols, int64_t row_begin,
                          int64_t row_end);
    // Token rows [row_begin, row_end) of the fp16 outlier product: out[t][o] = RN(out[t][o] + sum_j
    // A[t][cols[j]] * w[j][o]), the sum over j in order from -0.0, where w is the [count][out_features]
    // fp16-rounded dequantized weight of the outlier columns (as floats).
    void (*outlier_matmul)(const kbit_half* A, int64_t in_features, const int64_t* cols, int64_t count,
                           const float* w, kbit_half* out, int64_t out_features, int64_t row_begin,
                           int64_t row_end);
};
const Int8Kernels* int8_kernels();

}  // namespace kbit::cpu
