// kernels_bnb_cpu.h — the kernel table of the bitsandbytes-CPU interface (kbit_bnb_cpu.h; the idiom of
// every family: cpu_isa.h). Its quantizers and dequantizers are the 4-bit and 8-bit kernels
// (kernels_4bit.h, kernels_8bit.h); only the GEMV on bitsandbytes' repacked weight layout is its own:
// the scalar reference (ref_bnb_cpu.h) fills the slot, kernels_bnb_gemv_avx2.cpp and
// kernels_bnb_gemv_avx512.cpp override it under the AVX2 and AVX-512 ISAs. All are class F (fp32 block
// sums, each kernel in its own order).
//
// The layout (bitsandbytes' _convert_weight_packed_for_cpu): one group of 32 output rows is K / 2 runs
// of 32 bytes; a run read as 16 16-bit lanes gives lane j, for rows j and 16 + j, the nibbles of
// columns 2 kk (bits 0-3 and 4-7) and 2 kk + 1 (bits 8-11 and 12-15).
#pragma once

#include <hwy/cache_control.h>

#include <cstdint>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_half.h"

namespace kbit::cpu {

struct BnbCpuKernels {
    // Output rows [32 g0, 32 g1) of gemv_4bit_inference_cpu_<fmt>_bf16 for every activation row;
    // arguments validated (N % 32 == 0, K % blocksize == 0, blocksize even), M, N > 0 (K == 0 stores +0).
    void (*gemv_groups)(QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x, const uint8_t* w,
                        const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize, int64_t x_stride,
                        int64_t out_stride, int64_t g0, int64_t g1);
};

// The table of the active ISA, assembled once (kernels_bnb_cpu.cpp).
const BnbCpuKernels& bnb_cpu_kernels();

// The overrides of the Highway sources, per target (see cpu_isa.h): kernels_bnb_gemv_avx2.cpp and
// kernels_bnb_gemv_avx512.cpp.
KBIT_HWY_OVERRIDES(void OverrideBnbGemv(BnbCpuKernels& table);)

// The software prefetches of both GEMV kernels, measured with the weights cold (4096x4096, one
// Sapphire Rapids core, AVX-512 kernel): the weights are one sequential stream, yet with the hardware
// prefetchers alone (which do not cross 4 KB pages) it ran at 6.6 GB/s against 14.0 warm; 4 KB ahead:
// 10.0-10.4 GB/s (1 KB 9.4, 2 KB 10.0-10.3, 8 KB alike). The 32 scales of a group's block are one
// 64-byte line N * 2 bytes past the previous block's, in another page: prefetched 4 blocks ahead (3-5%
// more).
namespace bnb_gemv {

constexpr int64_t kWeightPrefetchBytes = 4096;
constexpr int64_t kScalePrefetchBlocks = 4;

// Prefetches the 32 scales of group g's block kScalePrefetchBlocks after `block`, in the next group
// once this one ends.
HWY_INLINE void prefetch_scales(const kbit_bf16* absmax, int64_t N, int64_t blocks, int64_t block, int64_t g) {
    int64_t ahead_block = block + kScalePrefetchBlocks, ahead_group = g;
    if (ahead_block >= blocks) {
        ahead_block -= blocks;
        ++ahead_group;
    }
    if (ahead_block < blocks) hwy::Prefetch(absmax + ahead_block * N + 32 * ahead_group);
}

}  // namespace bnb_gemv

}  // namespace kbit::cpu
