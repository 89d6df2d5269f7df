// kernels_4bit_bf16.h — the kernel table of the bf16 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.7). The driver (ops_4bit.cpp) rounds the activation rows to bf16 once with the
// shared rule (ref::bf16_activation_rows: padded to a multiple of 32 with zeros) and calls dot_rows on
// tiles of at most kBf16MaxRows activation rows. Every kernel gives the reference's bytes: each output's
// 16 lanes take K in groups of 32 in vdpbf16ps's order and are summed in the same tree. Kernels: the
// reference (ref_4bit_bf16.h: Isa::Ref and AArch64), AVX2 + FMA (kernels_4bit_bf16_avx2.cpp: vdpbf16ps emulated
// with fp32 FMAs, from Isa::Avx2 up on CPUs without AVX512_BF16) and AVX-512 BF16
// (kernels_4bit_bf16_avx512-inl.h: vpermw table look-up + vdpbf16ps, from Isa::Avx512 up on CPUs with
// AVX512_BF16, in kernels_4bit_bf16_avx512bf16.cpp; with vpmultishiftqb for the indices under Isa::Avx512Vbmi,
// in kernels_4bit_bf16_avx512vbmi.cpp).
#pragma once

#include <cstdint>

#include "cpu_isa.h"
#include "kbit_formats.h"

namespace kbit::cpu {

// Activation rows one dot_rows call takes at most; larger M is cut into tiles of this many rows.
constexpr int kBf16MaxRows = 16;

struct Bf16Dot4bitKernels {
    // Weight rows per kernel tile: thread ranges start on multiples of it (any count is taken).
    int64_t tile;
    // For weight rows r in [r0, r1) (row r starts at nibble r*K of B) and activation rows m < M <=
    // kBf16MaxRows (bf16 words, row stride 32 * ceil(K / 32), zero-padded): sums[m*ldo + r] = the
    // reference's lane sum (ref::bf16_dot_4bit_rows), scales[beta] the block scales.
    void (*dot_rows)(const uint16_t* a, int M, int64_t K, const uint8_t* B, const float* scales, int64_t blocksize,
                     QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo);
    // Which kernel this is ("reference", "avx2 fma", "avx512 bf16", "avx512vbmi bf16"), for tests and benchmarks.
    const char* name;
};

// The table of the active ISA, assembled once (kernels_4bit_bf16.cpp).
const Bf16Dot4bitKernels& bf16_dot_4bit_kernels();

// The overrides (intrinsics under target attributes), each checking the ISA and CPU features itself.
void override_bf16_dot_avx2(Bf16Dot4bitKernels& table);
void override_bf16_dot_avx512bf16(Bf16Dot4bitKernels& table);
void override_bf16_dot_avx512vbmi(Bf16Dot4bitKernels& table);

}  // namespace kbit::cpu
