// kbit_ops_bnb_cpu.h — the operations behind the bitsandbytes-CPU interface (abi/kbit_bnb_cpu.def), called
// only by the checked wrappers of kbit_export_bnb_cpu.h with arguments that passed kbit_validate_bnb_cpu.h
// and a non-empty problem. Its blockwise families are the 8-bit and 4-bit interfaces' own operations
// (quantize_8bit, dequantize_8bit of kbit_ops_8bit.h; dequantize_4bit of kbit_ops_4bit.h), which a
// backend exporting this interface defines for every blocksize >= 1, not only the blocksizes of those
// interfaces; the operations below are this interface's alone. Only the CPU backend implements it
// (src/cpu/ops_bnb_cpu.cpp); the CUDA backend forwards the interface to it (kbit_bnb_cpu_host.h).
#pragma once

#include <cstdint>

#include "kbit/kbit_bnb_cpu.h"
#include "kbit_error.h"
#include "kbit_formats.h"

namespace kbit {
// The CPU feature a has_<feature>_cpu function reports (the feature= attribute of its
// abi/kbit_bnb_cpu.def entry).
enum class CpuFeature { Avx512F, Avx512Bf16 };
}  // namespace kbit

namespace kbit::ops {

// gemv_4bit_inference_cpu_<fmt>_bf16 with M, N > 0; x_stride and out_stride are the distances between
// rows whatever M is (the wrapper puts K and N there for M == 1).
kbit_status bnb_cpu_gemv_4bit(const char* fn, QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                              const uint8_t* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize,
                              int64_t x_stride, int64_t out_stride);
// has_<feature>_cpu's answer, 1 or 0 (never fails): for Avx512F whether the backend's kernels are its
// AVX-512 ones, for Avx512Bf16 whether they are and the CPU also has AVX512-BF16.
int bnb_cpu_has(CpuFeature feature);

}  // namespace kbit::ops
