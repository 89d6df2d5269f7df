// kernels_bnb_cpu.h — the kernel table of the bitsandbytes-CPU interface (kbit_bnb_cpu.h; the idiom of
// every family: cpu_isa.h). Its quantizers and dequantizers are the 4-bit and 8-bit kernels
// (kernels_4bit.h, kernels_8bit.h); only the GEMV on bitsandbytes' repacked weight layout is its own:
// the scalar reference (ref_bnb_cpu.h) fills the slot, kernels_bnb_gemv_avx512.cpp overrides it under
// the AVX2 and AVX-512 ISAs. Both are class F (fp32 block sums in their own order).
#pragma once

#include <cstdint>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_half.h"

namespace kbit::cpu {

struct BnbCpuKernels {
    // Output rows [32 g0, 32 g1) of gemv_4bit_inference_cpu_<fmt>_bf16 for every activation row;
    // arguments validated (N % 32 == 0, K % blocksize == 0, blocksize even), M, N, K > 0.
    void (*gemv_groups)(QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x, const uint8_t* w,
                        const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize, int64_t x_stride,
                        int64_t out_stride, int64_t g0, int64_t g1);
};

// The table of the active ISA, assembled once (kernels_bnb_cpu.cpp).
const BnbCpuKernels& bnb_cpu_kernels();

// The overrides of the Highway source, per target (see cpu_isa.h).
KBIT_HWY_OVERRIDES(void OverrideBnbGemv(BnbCpuKernels& table);)  // kernels_bnb_gemv_avx512.cpp

}  // namespace kbit::cpu
