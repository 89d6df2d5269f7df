// tuning.h — the size thresholds of the CPU backend's thread drivers (ops_*.cpp), each defined once,
// with the reason for its value. Tiling, chunk and prefetch sizes that belong to one kernel stay in
// that kernel's file.
#pragma once

#include <cstdint>

namespace kbit::cpu {

// ---- threads: work per thread below which a call stays on fewer threads (parallel_range.h) ------

// Elements per thread of the blockwise 4-bit and 8-bit kernels, the LLM.int8 kernels and the 32-bit
// optimizers (16 of their 4096-element norm chunks). A parallel region's fork and join cost a few
// microseconds and about as much as 10-20K elements of an optimizer step; 64K elements of the
// cheapest kernel here (a 4-bit dequantizer, about 0.1 ns per element on one core) are several
// microseconds of work, so a split costs less than it gains.
constexpr int64_t kGrainElements = int64_t{1} << 16;

// Elements per thread of the kernels that cost several times more per element than those above:
// the 8-bit blockwise optimizers (64 of their 256-element blocks: one or two 8-bit states decoded,
// updated and encoded again per element) and torchao's NF4 quantizer (the scalar reference, a
// nearest-value search per element). A quarter of kGrainElements, not tuned further.
constexpr int64_t kHeavyGrainElements = kGrainElements / 4;

// Packed 4-bit weights per thread of the GEMV and GEMM row split (divided by the activation rows of a
// GEMM). A weight costs less than a dequantized element (half a byte read and one FMA per activation
// row, nothing written), so a thread takes more of them: twice kGrainElements, not tuned further.
constexpr int64_t kGrainWeights = kGrainElements * 2;

// Elements per thread of a fill (cfill_*): one store each, the cheapest work there is, so a fork pays
// for itself only over many more of them: 1M (4 MB of fp32), not tuned further.
constexpr int64_t kGrainFillElements = int64_t{1} << 20;

// ---- stores -------------------------------------------------------------------------------------

// Output bytes from which the blockwise quantizers and dequantizers (4-bit and 8-bit, every
// interface) write with non-temporal stores. Stored through the cache, every output line that is not
// cached yet is first read for ownership; streaming skips that read but leaves nothing in the cache
// for the next kernel. An output of 4 MiB is four times a Zen 4 core's L2, and there streaming
// won: 1M fp32 elements dequantized by one Zen 4 core from cold buffers (kbit_bench --quick,
// medians of 6 interleaved runs on a shared VM) took 0.20 ms streamed against 0.33 ms through the
// cache (8-bit), 0.21 / 0.23 ms (FP4) and 0.23 / 0.26 ms (NF4). The 4-bit functions used 8 MiB until
// then, with no measurement behind it; smaller outputs were not measured and are not streamed.
constexpr int64_t kStreamBytes = int64_t{4} << 20;

// ---- 8-bit code tables --------------------------------------------------------------------------

// Elements of an 8-bit quantize below which a code table that is not cached yet is searched directly
// (scalar) rather than given its bucket structure (kbit_code8_lut.h), which costs about as much as 8K
// searches to build.
constexpr int64_t kLutBuildElements = int64_t{1} << 14;

}  // namespace kbit::cpu
