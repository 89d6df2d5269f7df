// The int8 class's dot kernel for AVX-512 VNNI (kernels_4bit_int8.h), from Isa::Avx512 up on CPUs with
// AVX512_VNNI (Ice Lake, Zen 4 and later). A tile is 16 weight rows, one per 32-bit lane: per chunk of 32
// columns the 16 x 16 packed bytes are transposed (4 x 4 words per 128-bit quarter) so that lane i holds
// row i's nibbles, and vpshufb turns the nibbles into the unsigned bytes L + 128. vpdpbusd multiplies
// them by a broadcast 32-bit word of 4 signed prepared activations and adds the 4 products to the lane:
// sum (L + 128) * q = sum L * q + 128 * sum q, so the chunk's 128 * qsum (one value per activation row and
// chunk) is subtracted once. The exact integer sums of 16 rows then sit in one vector, and the fp32
// terms are formed and added lane by lane in the reference's order (no FMA): the reference's bytes.
// M = 1 takes the few-rows kernel further down instead (lanes along K; VBMI's vpermb), where the CPU has it.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593; see the VBMI kernels).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "cpu_isa.h"
#include "kernels_4bit_int8.h"

#if !KBIT_CPU_ARM64
#define KBIT_VNNI __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512vnni")))
#define KBIT_VNNI_VBMI __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512vnni,avx512vbmi")))

namespace kbit::cpu {
namespace {

constexpr int kRows = 16;

KBIT_VNNI void dot_rows(const int8_t* prepared, const Int8Chunk* chunks, int M, int64_t K, const uint8_t* B,
                        const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                        int64_t ldo) {
    alignas(16) uint8_t biased[16];
    for (int i = 0; i < 16; ++i) biased[i] = static_cast<uint8_t>(int8_levels(qt)[i] + 128);
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(biased)));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const int64_t nc = K / kInt8Chunk, row_bytes = K / 2;
    const int shift = int8_block_shift(blocksize);
    for (int64_t r = r0; r < r1; r += kRows) {
        const int64_t last = (r1 - r < kRows ? r1 : r + kRows) - 1;
        const uint8_t* rows[kRows];
        for (int i = 0; i < kRows; ++i) rows[i] = B + (r + i < last ? r + i : last) * row_bytes;
        __m512 total[kInt8MaxRows];
        for (int m = 0; m < M; ++m) total[m] = _mm512_setzero_ps();
        alignas(64) float s[kRows];
        __m512 scale = _mm512_setzero_ps();
        for (int64_t c = 0; c < nc; ++c) {
            if (int8_scales_change(K, blocksize, c)) {
                int8_tile_scales<kRows>(scales, r, last, K, shift, c, s);
                scale = _mm512_load_ps(s);
            }
            // Vector j holds rows j, j + 4, j + 8, j + 12 in its quarters; the transposes leave lane i = row i.
            const int64_t off = c * kInt8Chunk / 2;
            __m512i y[4];
            for (int j = 0; j < 4; ++j) {
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + off)));
                v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 4] + off)), 1);
                v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 8] + off)), 2);
                y[j] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 12] + off)), 3);
            }
            const __m512i t0 = _mm512_unpacklo_epi32(y[0], y[1]), t1 = _mm512_unpackhi_epi32(y[0], y[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(y[2], y[3]), t3 = _mm512_unpackhi_epi32(y[2], y[3]);
            const __m512i words[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                      _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            __m512i w[8];  // [2g + h]: word g's high (h = 0) or low (h = 1) nibbles as L + 128
            for (int g = 0; g < 4; ++g) {
                w[2 * g] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(words[g], 4), low4));
                w[2 * g + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(words[g], low4));
            }
            for (int m = 0; m < M; ++m) {
                const int8_t* a = prepared + m * K + c * kInt8Chunk;
                const Int8Chunk& ch = chunks[m * nc + c];
                __m512i acc[2] = {_mm512_set1_epi32(-128 * ch.qsum), _mm512_setzero_si512()};
                for (int j = 0; j < 8; ++j) {
                    int32_t word;
                    std::memcpy(&word, a + 4 * j, 4);
                    acc[j & 1] = _mm512_dpbusd_epi32(acc[j & 1], w[j], _mm512_set1_epi32(word));
                }
                const __m512 isum = _mm512_cvtepi32_ps(_mm512_add_epi32(acc[0], acc[1]));
                const __m512 se = _mm512_mul_ps(scale, _mm512_set1_ps(ch.e));
                total[m] = _mm512_add_ps(total[m], _mm512_mul_ps(se, isum));
            }
        }
        const __mmask16 keep = static_cast<__mmask16>((1u << (last - r + 1)) - 1u);
        for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(sums + m * ldo + r, keep, total[m]);
    }
}

// The few-rows kernel (M <= kFewRows): lanes along K. A segment is 128 columns of one weight row, one 64-byte
// load: its high nibbles (even columns) and low nibbles (odd ones) become two vectors of L + 128 (vpermb:
// the kernel needs AVX512_VBMI and the avx512vbmi level; without them M = 1 takes the row-lane kernel) that
// meet the prepared activations' even and odd columns in two vpdpbusd. Lane l then holds columns
// 8l .. 8l + 7, so 128-bit lane q is the segment's chunk q in 4 partial sums; two vpshufd + vpaddd put the
// chunk's whole sum in every dword of the lane, and a masked store writes it to dword i % 4 of a buffer line
// shared by 4 rows.
// Rows are read one after the other, whole, so the weights stream like one array (16 interleaved rows, or
// 4, ran at about half the cold read rate). When the tile's 16 rows are done, a 4 x 4 transpose of 128-bit
// lanes (vshufi64x2) turns each segment's 4 lines into one vector per chunk, lane i = row i, 128 * qsum is
// subtracted (the L + 128 offset) and the fp32 steps follow, per chunk and row, in the reference's order.
// Per 64 weight bytes and activation row: 1 load, 1 shift, 2 look-ups, 2 vpdpbusd (+ 2 activation loads),
// 2 vpshufd, 2 vpaddd, 1 masked store, and 0.5 lane shuffles when the tile is reduced; no transpose per
// chunk as above (the row-lane kernel's 20 shuffles per 256 weight bytes are why it lost at M = 1).
// M = 2 and 3 ran faster than the row-lane kernel at K = 4096 (0.88 against 1.19 ms, 1.16 against 1.25),
// M = 4 as fast, but all of them slower at K = 14336, where their buffer (M * 28 KB) made pieces: M = 1 only.
constexpr int kFewRows = 1;
constexpr int64_t kSegCols = 128, kSegBytes = 128;  // prepared: 64 even columns, then 64 odd ones
// Segments whose sums one buffer holds (M * kPieceSegs * 4 lines of 64 bytes, on the stack): rows longer
// than that go in pieces, which reads them in parts (slower: pieces of 64 segments cost 13-33% at K = 14336).
constexpr int64_t kPieceBytes = 32 * 1024;
constexpr int64_t kPrefetchBytes = 8 * 1024;

int64_t few_stride(int64_t K) { return (K + kSegCols - 1) / kSegCols * kSegBytes; }

void prepare_few(const int8_t* q, int64_t K, int8_t* prepared) {
    for (int64_t s = 0; s * kSegCols < K; ++s) {
        const int8_t* x = q + s * kSegCols;
        const int64_t n = K - s * kSegCols < kSegCols ? K - s * kSegCols : kSegCols;
        int8_t* out = prepared + s * kSegBytes;
        for (int64_t b = 0; b < kSegCols / 2; ++b) {
            out[b] = 2 * b < n ? x[2 * b] : 0;
            out[kSegCols / 2 + b] = 2 * b + 1 < n ? x[2 * b + 1] : 0;
        }
    }
}

// The 4 x 4 transpose of 128-bit lanes: out[q] = lane q of x[0], x[1], x[2], x[3].
KBIT_VNNI_VBMI inline void transpose_lanes(const __m512i (&x)[4], __m512i (&out)[4]) {
    const __m512i y0 = _mm512_shuffle_i64x2(x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i y1 = _mm512_shuffle_i64x2(x[0], x[1], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i y2 = _mm512_shuffle_i64x2(x[2], x[3], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i y3 = _mm512_shuffle_i64x2(x[2], x[3], _MM_SHUFFLE(3, 2, 3, 2));
    out[0] = _mm512_shuffle_i64x2(y0, y2, _MM_SHUFFLE(2, 0, 2, 0));
    out[1] = _mm512_shuffle_i64x2(y0, y2, _MM_SHUFFLE(3, 1, 3, 1));
    out[2] = _mm512_shuffle_i64x2(y1, y3, _MM_SHUFFLE(2, 0, 2, 0));
    out[3] = _mm512_shuffle_i64x2(y1, y3, _MM_SHUFFLE(3, 1, 3, 1));
}

// Rows that start blocks (K % blocksize == 0): the scales of blocks [b0, b0 + 16) of the tile's rows,
// transposed to out[b - b0][i] (row i; rows past last repeat last), once per 16 blocks instead of a gather
// per block (a 16-lane vgatherdps per 512 weight bytes took a third of the time at M = 1).
KBIT_VNNI_VBMI void transpose_scales(const float* scales, int64_t r, int64_t last, int64_t blocks_per_row,
                                     int64_t b0, float* out) {
    const int64_t n = blocks_per_row - b0 < 16 ? blocks_per_row - b0 : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 x[16], t[16];
    for (int i = 0; i < 16; ++i)
        x[i] = _mm512_maskz_loadu_ps(mask, scales + (r + i < last ? r + i : last) * blocks_per_row + b0);
    for (int j = 0; j < 8; ++j) {
        t[2 * j] = _mm512_unpacklo_ps(x[2 * j], x[2 * j + 1]);
        t[2 * j + 1] = _mm512_unpackhi_ps(x[2 * j], x[2 * j + 1]);
    }
    // x[4j + k], 128-bit lane L: column 4L + k of rows 4j .. 4j + 3
    for (int j = 0; j < 4; ++j) {
        x[4 * j] = _mm512_shuffle_ps(t[4 * j], t[4 * j + 2], 0x44);
        x[4 * j + 1] = _mm512_shuffle_ps(t[4 * j], t[4 * j + 2], 0xEE);
        x[4 * j + 2] = _mm512_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0x44);
        x[4 * j + 3] = _mm512_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
        const __m512i in[4] = {_mm512_castps_si512(x[k]), _mm512_castps_si512(x[4 + k]),
                               _mm512_castps_si512(x[8 + k]), _mm512_castps_si512(x[12 + k])};
        __m512i col[4];
        transpose_lanes(in, col);
        for (int L = 0; L < 4; ++L) _mm512_store_si512(out + (4 * L + k) * 16, col[L]);
    }
}

// One segment of one weight row: sum[m] dword j of 128-bit lane q = the sum of chunk q with activation row m
// of (L + 128) * q, for every j. Full: all 64 bytes at row (else the row's last bytes, under mask).
template <int M, bool Full>
KBIT_VNNI_VBMI inline void segment_sums(const int8_t* prepared, int64_t stride, const uint8_t* row, __mmask64 mask,
                                        __m512i table, __m512i (&sum)[M]) {
    const __m512i w = Full ? _mm512_loadu_si512(row) : _mm512_maskz_loadu_epi8(mask, row);
    // vpermb reads the low 6 bits of each index byte: the 64-byte table is the 16 levels 4 times, so the
    // nibbles need no mask.
    const __m512i hi = _mm512_permutexvar_epi8(_mm512_srli_epi16(w, 4), table);
    const __m512i lo = _mm512_permutexvar_epi8(w, table);
    for (int m = 0; m < M; ++m) {
        const int8_t* a = prepared + m * stride;
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, _mm512_loadu_si512(a));
        acc = _mm512_dpbusd_epi32(acc, lo, _mm512_loadu_si512(a + kSegCols / 2));
        acc = _mm512_add_epi32(acc, _mm512_shuffle_epi32(acc, _MM_PERM_BADC));
        sum[m] = _mm512_add_epi32(acc, _mm512_shuffle_epi32(acc, _MM_PERM_CDAB));
    }
}

template <int M>
KBIT_VNNI_VBMI void dot_rows_few(const int8_t* prepared, const Int8Chunk* chunks, int64_t K, const uint8_t* B,
                                 const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1,
                                 float* sums, int64_t ldo) {
    constexpr int64_t kPieceSegs = kPieceBytes / (M * 4 * 64);
    alignas(16) uint8_t biased[16];
    for (int i = 0; i < 16; ++i) biased[i] = static_cast<uint8_t>(int8_levels(qt)[i] + 128);
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(biased)));
    const int64_t nc = K / kInt8Chunk, row_bytes = K / 2, nseg = (K + kSegCols - 1) / kSegCols;
    const int64_t stride = few_stride(K), full_segs = row_bytes / 64;
    const int shift = int8_block_shift(blocksize);
    const bool rows_start_blocks = (K & (blocksize - 1)) == 0;
    const int64_t blocks_per_row = K >> shift;
    alignas(64) float tile_scales[16 * 16];
    alignas(64) int32_t lines[kPieceSegs * M * 4 * 16];
    for (int64_t r = r0; r < r1; r += kRows) {
        const int64_t last = (r1 - r < kRows ? r1 : r + kRows) - 1;
        const int64_t next_rows = r1 - last - 1 < kRows ? r1 - last - 1 : kRows;
        // The next tile's scales (one range, where rows start blocks), a part per segment of the first row.
        const char* next_scales = reinterpret_cast<const char*>(scales + (last + 1) * blocks_per_row);
        const int64_t scales_step = rows_start_blocks ? (next_rows * blocks_per_row * 4 + nseg - 1) / nseg : 0;
        __m512 total[M];
        for (int m = 0; m < M; ++m) total[m] = _mm512_setzero_ps();
        __m512 scale = _mm512_setzero_ps();
        for (int64_t g0 = 0; g0 < nseg; g0 += kPieceSegs) {
            const int64_t g1 = nseg - g0 < kPieceSegs ? nseg : g0 + kPieceSegs;
            for (int i = 0; i < kRows; ++i) {
                const uint8_t* row = B + (r + i < last ? r + i : last) * row_bytes;
                // The bytes 8 KB ahead of the read are prefetched to L2: rows follow each other in memory, so
                // this runs into the next rows and tiles (cold, one thread, 4096 x 4096: 0.55 ms against 0.68
                // one row ahead and 0.61 with none; 2 or 16 KB ahead, or to L1, were slower). In pieces it
                // fetches the row's next piece early, a waste rows that long can afford.
                const __mmask16 lane = static_cast<__mmask16>(0x1111u << (i & 3));
                int32_t* out = lines + (i >> 2) * 16;
                int64_t g = g0;
                for (; g < (full_segs < g1 ? full_segs : g1); ++g) {
                    _mm_prefetch(reinterpret_cast<const char*>(row + g * 64 + kPrefetchBytes), _MM_HINT_T1);
                    if (i == 0 && g0 == 0)
                        for (int64_t o = g * scales_step; o < (g + 1) * scales_step; o += 64)
                            _mm_prefetch(next_scales + o, _MM_HINT_T1);
                    __m512i sum[M];
                    segment_sums<M, true>(prepared + g * kSegBytes, stride, row + g * 64, ~0ull, table, sum);
                    for (int m = 0; m < M; ++m) _mm512_mask_store_epi32(out + ((g - g0) * M + m) * 64, lane, sum[m]);
                }
                for (; g < g1; ++g) {  // the row's last 16, 32 or 48 bytes (K % 128 = 32, 64 or 96)
                    const __mmask64 mask = (1ull << (row_bytes - g * 64)) - 1;
                    __m512i sum[M];
                    segment_sums<M, false>(prepared + g * kSegBytes, stride, row + g * 64, mask, table, sum);
                    for (int m = 0; m < M; ++m) _mm512_mask_store_epi32(out + ((g - g0) * M + m) * 64, lane, sum[m]);
                }
            }
            for (int64_t g = g0; g < g1; ++g) {
                __m512i v[M][4];
                for (int m = 0; m < M; ++m) {
                    const int32_t* x = lines + ((g - g0) * M + m) * 64;
                    const __m512i in[4] = {_mm512_load_si512(x), _mm512_load_si512(x + 16), _mm512_load_si512(x + 32),
                                           _mm512_load_si512(x + 48)};
                    transpose_lanes(in, v[m]);
                }
                for (int q = 0; q < 4; ++q) {
                    const int64_t c = g * 4 + q;
                    if (c >= nc) break;
                    if (int8_scales_change(K, blocksize, c)) {
                        if (rows_start_blocks) {
                            const int64_t b = (c * kInt8Chunk) >> shift;
                            if ((b & 15) == 0) transpose_scales(scales, r, last, blocks_per_row, b, tile_scales);
                            scale = _mm512_load_ps(tile_scales + (b & 15) * 16);
                        } else {
                            alignas(64) float s[kRows];
                            int8_tile_scales<kRows>(scales, r, last, K, shift, c, s);
                            scale = _mm512_load_ps(s);
                        }
                    }
                    for (int m = 0; m < M; ++m) {
                        const Int8Chunk& ch = chunks[m * nc + c];
                        const __m512i isum = _mm512_sub_epi32(v[m][q], _mm512_set1_epi32(128 * ch.qsum));
                        const __m512 se = _mm512_mul_ps(scale, _mm512_set1_ps(ch.e));
                        total[m] = _mm512_add_ps(total[m], _mm512_mul_ps(se, _mm512_cvtepi32_ps(isum)));
                    }
                }
            }
        }
        const __mmask16 keep = static_cast<__mmask16>((1u << (last - r + 1)) - 1u);
        for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(sums + m * ldo + r, keep, total[m]);
    }
}

KBIT_VNNI_VBMI void dot_rows_few_m1(const int8_t* prepared, const Int8Chunk* chunks, int, int64_t K, const uint8_t* B,
                                    const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1,
                                    float* sums, int64_t ldo) {
    dot_rows_few<1>(prepared, chunks, K, B, scales, blocksize, qt, r0, r1, sums, ldo);
}

}  // namespace

void override_int8_dot_avx512vnni(Int8Dot4bitKernels& table) {
    if (!isa_at_least(Isa::Avx512) || !__builtin_cpu_supports("avx512vnni")) return;
    table = {&prepare_int8_nibble_order, kRows, &dot_rows, "avx512 vnni", {}};
    // The few-rows kernel's vpermb is an avx512vbmi-level instruction.
    if (isa_at_least(Isa::Avx512Vbmi) && __builtin_cpu_supports("avx512vbmi"))
        table.few = {kFewRows, &few_stride, &prepare_few, kRows, &dot_rows_few_m1};
}

}  // namespace kbit::cpu
#endif  // !KBIT_CPU_ARM64
