// kernels_4bit_int8.h — the kernel table of the int8 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.6). The driver (ops_4bit.cpp) quantizes the activation rows with the shared rule
// (kbit_precision_int8.h), lays each row out for the kernel (prepare) and calls dot_rows on tiles of at
// most kInt8MaxRows activation rows. Every kernel gives the reference's bytes: the integer dot products
// are exact (so their partial sums may be added in any order) and the chunk terms are formed and added
// per output in the reference's order. The row-lane kernels put one output row in each 32-bit lane; the
// few-rows kernels (M = 1 and other small M) run along K and reduce each chunk's integer partial sums to
// one lane per output row first. Kernels: the reference (ref_4bit_int8.h, every level without a faster
// one, AArch64 included), AVX2 (kernels_4bit_int8_avx2.cpp: vpshufb levels, vpsignb + vpmaddubsw +
// vpmaddwd, from Isa::Avx2 up) and AVX-512 VNNI (kernels_4bit_int8_avx512vnni.cpp: vpdpbusd, from
// Isa::Avx512 up on CPUs with VNNI).
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_precision_int8.h"

namespace kbit::cpu {

// Activation rows one dot_rows call takes at most; larger M is cut into tiles of this many rows.
constexpr int kInt8MaxRows = 16;

// A kernel for few activation rows (M <= max_rows): its vectors run along K inside each weight row, so a
// weight row is decoded with plain loads and no transpose, and the exact integer partial sums of a tile's
// rows are reduced (in any order: they are integers) to one lane per row before the fp32 steps, which keep
// the reference's order. For M = 1 it beats the row-lane kernel, whose transposes are paid per activation
// tile; for larger M its buffer of sums, one per activation row, cuts long rows into pieces, and at K = 14336
// that was slower than the row-lane kernel (bench/notes/2026-12-08-int8-m1.md).
struct Int8FewRowsKernel {
    // Largest M it takes (0: no such kernel).
    int max_rows;
    // Bytes of one prepared activation row (a multiple of 64).
    int64_t (*stride)(int64_t K);
    // Lays out one quantized row of K int8 values for dot_rows (stride(K) bytes).
    void (*prepare)(const int8_t* q, int64_t K, int8_t* prepared);
    // Weight rows per kernel tile: thread ranges start on multiples of it.
    int64_t tile;
    // As Int8Dot4bitKernels::dot_rows, with M <= max_rows rows of stride(K) prepared bytes each.
    void (*dot_rows)(const int8_t* prepared, const Int8Chunk* chunks, int M, int64_t K, const uint8_t* B,
                     const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                     int64_t ldo);
};

struct Int8Dot4bitKernels {
    // Lays out one quantized row of K int8 values (natural order) the way dot_rows reads it.
    void (*prepare)(const int8_t* q, int64_t K, int8_t* prepared);
    // Weight rows per kernel tile: thread ranges start on multiples of it (any count is taken).
    int64_t tile;
    // For weight rows r in [r0, r1) (row r starts at nibble r*K of B) and activation rows m < M <=
    // kInt8MaxRows (prepared, stride K; chunks[m*(K/32) + c]): sums[m*ldo + r] = the reference's total
    // (ref::int8_dot_4bit_rows), scales[beta] the block scales.
    void (*dot_rows)(const int8_t* prepared, const Int8Chunk* chunks, int M, int64_t K, const uint8_t* B,
                     const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                     int64_t ldo);
    // Which kernel this is ("reference", "avx2", "avx512 vnni"), for tests and benchmarks.
    const char* name;
    // The kernel the driver takes instead for M <= few.max_rows (none where max_rows is 0).
    Int8FewRowsKernel few;
};

// The layout of the SIMD kernels: in every chunk of 32, four groups of 8 elements (one 32-bit word of
// packed nibbles each), each as its 4 even elements (the high nibbles) then its 4 odd ones (the low
// nibbles): position 8g + 4h + j holds element 8g + 2j + h.
inline void prepare_int8_nibble_order(const int8_t* q, int64_t K, int8_t* prepared) {
    for (int64_t c = 0; c < K; c += kInt8Chunk)
        for (int g = 0; g < 4; ++g)
            for (int h = 0; h < 2; ++h)
                for (int j = 0; j < 4; ++j) prepared[c + 8 * g + 4 * h + j] = q[c + 8 * g + 2 * j + h];
}

// The weight tile's scales for chunk c: lane i gets scales[((r + i)*K + 32c) / blocksize] (rows past
// r_last repeat r_last). Refreshed only where some lane enters a new block; blocksize is a power of two, so
// the division is a shift and the remainders masks (a 64-bit divide per lane, or even per chunk, cost more
// than the chunk's arithmetic).
inline bool int8_scales_change(int64_t K, int64_t blocksize, int64_t c) {
    return (K & (blocksize - 1)) != 0 || ((c * kInt8Chunk) & (blocksize - 1)) == 0;
}
inline int int8_block_shift(int64_t blocksize) { return __builtin_ctzll(static_cast<unsigned long long>(blocksize)); }
template <int Lanes>
inline void int8_tile_scales(const float* scales, int64_t r, int64_t r_last, int64_t K, int shift, int64_t c,
                             float* out) {
    for (int i = 0; i < Lanes; ++i) {
        const int64_t row = r + i < r_last ? r + i : r_last;
        out[i] = scales[(row * K + c * kInt8Chunk) >> shift];
    }
}

// The table of the active ISA, assembled once (kernels_4bit_int8.cpp).
const Int8Dot4bitKernels& int8_dot_4bit_kernels();

// The overrides (intrinsics under target attributes), each checking the ISA and CPU features itself.
void override_int8_dot_avx2(Int8Dot4bitKernels& table);
void override_int8_dot_avx512vnni(Int8Dot4bitKernels& table);

}  // namespace kbit::cpu
