// kernels_4bit_int8.h — the kernel table of the int8 precision class of kbit_gemm_4bit_precision
// (docs/behaviour.md §3.6). The driver (ops_4bit.cpp) quantizes the activation rows with the shared rule
// (kbit_precision_int8.h), lays each row out for the kernel (prepare) and calls dot_rows on tiles of at
// most kInt8MaxRows activation rows. Every kernel gives the reference's bytes: the integer dot products
// are exact and the chunk terms are formed and added per output in the reference's order, so the
// vectors run across output rows, never along K. Kernels: the reference (ref_4bit_int8.h, every level
// without a faster one, AArch64 included), AVX2 (kernels_4bit_int8_avx2.cpp: vpshufb levels, vpsignb +
// vpmaddubsw + vpmaddwd, from Isa::Avx2 up) and AVX-512 VNNI (kernels_4bit_int8_avx512vnni.cpp: vpdpbusd,
// from Isa::Avx512 up on CPUs with VNNI).
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_precision_int8.h"

namespace kbit::cpu {

// Activation rows one dot_rows call takes at most; larger M is cut into tiles of this many rows.
constexpr int kInt8MaxRows = 16;

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
// the division is a shift (a 64-bit divide per lane cost more than the chunk's arithmetic).
inline bool int8_scales_change(int64_t K, int64_t blocksize, int64_t c) {
    return K % blocksize != 0 || (c * kInt8Chunk) % blocksize == 0;
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
