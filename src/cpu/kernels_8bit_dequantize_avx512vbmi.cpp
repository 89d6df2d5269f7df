// Blockwise 8-bit dequantize for AVX-512 VBMI (Isa::Avx512Vbmi): the caller's 256-entry fp32 code
// lives in 16 registers as four byte planes (plane k holds byte k of every entry, 256 bytes = four
// registers), and `vpermi2b` looks up 64 codes per instruction in half a plane. A vector of 64 codes
// costs 8 vpermi2b, 4 byte blends (code bit 7 picks the half) and 8 unpacks that interleave the
// planes into 4 x 16 fp32 lanes, about 0.27 shuffle-port cycles per element. It replaces the AVX3
// kernel (kernels_8bit_simd.cpp, one gather per 16 lanes) for fp32 and fp16 outputs, not bf16: on one
// Sapphire Rapids core, 64M codes, fp16 19.8 GB/s against 12.6 gathered, fp32 equal (25.8 / 25.7),
// bf16 14.3 against 16.6 (its rounding and byte permute compete with the look-ups for port 5, where
// the gathers use the load ports). For 16-bit outputs and blocks of at least 1024 elements both give
// way to a table of the block's 256 16-bit products (below): fp16 and bf16 23 GB/s on the same core.
//
// Class E: each output is exactly Elem<T>::store(code[c] * absmax[block]), one fp32 multiply (code
// value first, as the reference and the AVX3 kernel) and one round-to-nearest-even to T.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a self-initialised variable that
// -Wmaybe-uninitialized (-Wuninitialized in the sanitizer builds) reports at every inlined call (GCC
// bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_isa.h"
#include "kbit_dtype.h"
#include "kbit_half.h"
#include "kernels_8bit.h"

#define KBIT_VBMI __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512vbmi")))

namespace kbit::cpu {
namespace {

constexpr int64_t kCodes = 64;  // codes per step: one byte vector
// How far ahead the codes are prefetched. The hardware prefetchers alone left the code stream
// waiting on memory once the outputs leave through non-temporal stores (Sapphire Rapids, one
// thread, 64M codes: fp16 6-12 GB/s without, 19-20 with; 256 bytes ahead 14.6, 1-8 KB 18-20).
constexpr int64_t kPrefetchBytes = 2048;

// Byte k of each of the 256 code entries, plane by plane, as 16 vectors: plane k quarter q holds
// entries 64q .. 64q + 63.
struct CodePlanes {
    __m512i q[4][4];
};

KBIT_VBMI CodePlanes load_planes(const float* code) {
    alignas(64) uint8_t planes[4][256];
    for (int c = 0; c < 256; ++c) {
        uint32_t bits;
        std::memcpy(&bits, code + c, 4);
        for (int k = 0; k < 4; ++k) planes[k][c] = static_cast<uint8_t>(bits >> (8 * k));
    }
    CodePlanes p;
    for (int k = 0; k < 4; ++k)
        for (int q = 0; q < 4; ++q) p.q[k][q] = _mm512_load_si512(planes[k] + 64 * q);
    return p;
}

// code[c] for 64 codes at `a`, as four vectors of 16 fp32 lanes in element order. The 8 unpacks work
// within 128-bit lanes, so unpacked vector j lane L holds elements 16L + 4j .. 16L + 4j + 3 of their
// input; the codes are first permuted by 4-byte groups (group 4L + j takes group 4j + L, a 4x4
// transpose) so that vector j holds elements 16j .. 16j + 15.
KBIT_VBMI void lookup64(const CodePlanes& p, const uint8_t* a, __m512 out[4]) {
    const __m512i transpose = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    const __m512i idx = _mm512_permutexvar_epi32(transpose, _mm512_loadu_si512(a));
    const __mmask64 upper = _mm512_movepi8_mask(idx);  // bit 7: entries 128 .. 255
    __m512i b[4];
    for (int k = 0; k < 4; ++k) {
        const __m512i lo = _mm512_permutex2var_epi8(p.q[k][0], idx, p.q[k][1]);  // bits 0-6
        const __m512i hi = _mm512_permutex2var_epi8(p.q[k][2], idx, p.q[k][3]);
        b[k] = _mm512_mask_blend_epi8(upper, lo, hi);
    }
    const __m512i w0 = _mm512_unpacklo_epi8(b[0], b[1]), w1 = _mm512_unpackhi_epi8(b[0], b[1]);
    const __m512i w2 = _mm512_unpacklo_epi8(b[2], b[3]), w3 = _mm512_unpackhi_epi8(b[2], b[3]);
    out[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w0, w2));
    out[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w0, w2));
    out[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w1, w3));
    out[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w1, w3));
}

// float_to_bf16 of each lane (kbit_half.h: + 0x7FFF + lsb, NaN kept and quietened), the result in
// the high 16 bits of each 32-bit lane.
KBIT_VBMI __m512i bf16_high_halves(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
}

KBIT_VBMI void put(__m512i v, void* p, bool stream) {
    if (stream) _mm512_stream_si512(static_cast<__m512i*>(p), v);
    else _mm512_storeu_si512(p, v);
}

// 32 outputs (two vectors of 16 fp32 lanes) as T at p.
template <class T>
KBIT_VBMI void store32(__m512 v0, __m512 v1, T* p, bool stream) {
    if constexpr (std::is_same_v<T, float>) {
        put(_mm512_castps_si512(v0), p, stream);
        put(_mm512_castps_si512(v1), p + 16, stream);
    } else if constexpr (std::is_same_v<T, kbit_half>) {
        // Round to nearest even, NaN quietened like float_to_half (F16C's conversion).
        constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m256i h0 = _mm512_cvtps_ph(v0, kRne), h1 = _mm512_cvtps_ph(v1, kRne);
        put(_mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1), p, stream);
    } else {
        static_assert(std::is_same_v<T, kbit_bf16>, "fp32, fp16 or bf16 outputs");
        // Bytes 2 and 3 of every dword of v0 then of v1 (index bit 6 picks the second source).
        alignas(64) static constexpr uint8_t kHighHalves[64] = {
            2,  3,  6,  7,  10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31, 34,  35,  38,  39,  42,  43,
            46, 47, 50, 51, 54, 55, 58, 59, 62, 63, 66, 67, 70, 71, 74, 75, 78,  79,  82,  83,  86,  87,
            90, 91, 94, 95, 98, 99, 102, 103, 106, 107, 110, 111, 114, 115, 118, 119, 122, 123, 126, 127};
        const __m512i pick = _mm512_load_si512(kHighHalves);
        put(_mm512_permutex2var_epi8(bf16_high_halves(v0), pick, bf16_high_halves(v1)), p, stream);
    }
}

// The scales of the 32 outputs from element j: one broadcast when they lie in one block (always for
// a power-of-two blocksize >= 32), else lane by lane (bitsandbytes' CPU interface takes any
// blocksize). b / b_end: the block of the previous step and where it ends, advanced here without a
// division (one would cost more than a step's work).
KBIT_VBMI void scales32(const float* absmax, int64_t blocksize, int64_t j, int64_t& b, int64_t& b_end, __m512& lo,
                        __m512& hi) {
    while (j >= b_end) {
        ++b;
        b_end += blocksize;
    }
    if (j + 32 <= b_end) {
        lo = hi = _mm512_set1_ps(absmax[b]);
        return;
    }
    alignas(64) float s[32];
    int64_t lane_b = b, lane_end = b_end;
    for (int e = 0; e < 32; ++e) {
        if (j + e >= lane_end) {  // blocksize >= 1: one block further at most
            ++lane_b;
            lane_end += blocksize;
        }
        s[e] = absmax[lane_b];
    }
    lo = _mm512_load_ps(s);
    hi = _mm512_load_ps(s + 16);
}

// Elements [i0, i1) one at a time: the steps' heads and tails.
template <class T>
KBIT_VBMI void dequantize_scalar(const float* code, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                                 int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = Elem<T>::store(code[A[i]] * absmax[i / blocksize]);
}

// Elements [begin, end), begin a multiple of blocksize. `stream` (out aligned to 64 bytes) asks for
// non-temporal stores: the vector steps start at a multiple of 32 elements, so every store is
// aligned; the elements before it and the last partial step are scalar.
template <class T>
KBIT_VBMI void dequantize_range(const float* code, const uint8_t* A, const float* absmax, T* out,
                                int64_t blocksize, int64_t begin, int64_t end, bool stream) {
    const auto scalar = [&](int64_t i0, int64_t i1) { dequantize_scalar(code, A, absmax, out, blocksize, i0, i1); };
    int64_t i = (begin + 31) / 32 * 32;
    if (i + kCodes > end) return scalar(begin, end);
    scalar(begin, i);
    const CodePlanes planes = load_planes(code);
    int64_t b = i / blocksize, b_end = (b + 1) * blocksize;
    for (; i + kCodes <= end; i += kCodes) {
        __m512 v[4], s[4];
        _mm_prefetch(reinterpret_cast<const char*>(A + i + kPrefetchBytes), _MM_HINT_T0);  // never faults
        lookup64(planes, A + i, v);
        scales32(absmax, blocksize, i, b, b_end, s[0], s[1]);
        scales32(absmax, blocksize, i + 32, b, b_end, s[2], s[3]);
        store32(_mm512_mul_ps(v[0], s[0]), _mm512_mul_ps(v[1], s[1]), out + i, stream);
        store32(_mm512_mul_ps(v[2], s[2]), _mm512_mul_ps(v[3], s[3]), out + i + 32, stream);
    }
    scalar(i, end);
    if (stream) _mm_sfence();
}

// ---- 16-bit outputs: a table of the block's products ---------------------------------------------
// For fp16 and bf16 outputs the 256 values a block can produce, Elem<T>::store(code[c] * absmax),
// are computed once per block (the same multiply and rounding as above) and kept as two byte planes
// (low and high byte of each 16-bit value, 8 registers). A vector of 64 codes then costs one qword
// permute, 4 vpermi2b, 2 blends and 2 unpacks: no multiply, no rounding, half the look-ups of the fp32
// planes. Building the planes costs about a fifth of a 4096-element block's look-ups, so shorter
// blocks keep the kernels the table had.
constexpr int64_t kTableBlock = 1024;

struct ProductPlanes {
    __m512i lo[4], hi[4];  // entry quarter q: entries 64q .. 64q + 63
};

template <class T>
KBIT_VBMI ProductPlanes product_planes(const float* code, float scale) {
    alignas(64) uint16_t values[256];
    const __m512 s = _mm512_set1_ps(scale);
    for (int c = 0; c < 256; c += 32)
        store32<T>(_mm512_mul_ps(_mm512_loadu_ps(code + c), s), _mm512_mul_ps(_mm512_loadu_ps(code + c + 16), s),
                   reinterpret_cast<T*>(values + c), false);
    alignas(64) uint8_t lo[256], hi[256];
    for (int c = 0; c < 256; c += 32) {
        const __m512i w = _mm512_load_si512(values + c);
        _mm256_store_si256(reinterpret_cast<__m256i*>(lo + c), _mm512_cvtepi16_epi8(w));
        _mm256_store_si256(reinterpret_cast<__m256i*>(hi + c), _mm512_cvtepi16_epi8(_mm512_srli_epi16(w, 8)));
    }
    ProductPlanes p;
    for (int q = 0; q < 4; ++q) {
        p.lo[q] = _mm512_load_si512(lo + 64 * q);
        p.hi[q] = _mm512_load_si512(hi + 64 * q);
    }
    return p;
}

// The 16-bit outputs of 64 codes at `a`: out[0] elements 0-31, out[1] elements 32-63. The unpacks
// interleave the planes within 128-bit lanes (lane L of the low result from bytes 0-7 of lane L,
// the high result from bytes 8-15), so the codes' qwords are first reordered: qword 2L is qword L
// (elements 8L .. 8L + 7, into out[0]), qword 2L + 1 is qword 4 + L (elements 32 + 8L .., out[1]).
KBIT_VBMI void lookup64_16(const ProductPlanes& p, const uint8_t* a, __m512i out[2]) {
    const __m512i order = _mm512_set_epi64(7, 3, 6, 2, 5, 1, 4, 0);
    const __m512i idx = _mm512_permutexvar_epi64(order, _mm512_loadu_si512(a));
    const __mmask64 upper = _mm512_movepi8_mask(idx);  // bit 7: entries 128 .. 255
    const __m512i lo = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(p.lo[0], idx, p.lo[1]),
                                              _mm512_permutex2var_epi8(p.lo[2], idx, p.lo[3]));
    const __m512i hi = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(p.hi[0], idx, p.hi[1]),
                                              _mm512_permutex2var_epi8(p.hi[2], idx, p.hi[3]));
    out[0] = _mm512_unpacklo_epi8(lo, hi);
    out[1] = _mm512_unpackhi_epi8(lo, hi);
}

template <class T>
using DequantizeFn = decltype(Blockwise8Kernels<T>::dequantize);
template <class T>
DequantizeFn<T> g_short_blocks = nullptr;  // the kernel for blocks below kTableBlock

template <class T>
KBIT_VBMI void dequantize_range16(const float* code, const uint8_t* A, const float* absmax, T* out,
                                  int64_t blocksize, int64_t begin, int64_t end, bool stream) {
    if (blocksize < kTableBlock || blocksize % kCodes != 0)
        return g_short_blocks<T>(code, A, absmax, out, blocksize, begin, end, stream);
    // begin is a multiple of blocksize, so of 64: every step lies in one block, every store is aligned.
    int64_t i = begin;
    for (int64_t b = begin / blocksize; i + kCodes <= end; ++b) {
        const ProductPlanes planes = product_planes<T>(code, absmax[b]);
        const int64_t block_end = std::min(end, (b + 1) * blocksize);
        for (; i + kCodes <= block_end; i += kCodes) {
            _mm_prefetch(reinterpret_cast<const char*>(A + i + kPrefetchBytes), _MM_HINT_T0);  // never faults
            __m512i v[2];
            lookup64_16(planes, A + i, v);
            put(v[0], out + i, stream);
            put(v[1], out + i + 32, stream);
        }
        if (i < block_end) break;  // the range's last, partial step
    }
    dequantize_scalar(code, A, absmax, out, blocksize, i, end);
    if (stream) _mm_sfence();
}

}  // namespace

template <class T>
void override_blockwise8_avx512vbmi(Blockwise8Kernels<T>& table) {
    if (!isa_at_least(Isa::Avx512Vbmi)) return;
    if constexpr (std::is_same_v<T, float>) {
        table.dequantize = &dequantize_range<float>;
    } else {
        // Short blocks: the fp32 planes for fp16, the gathering kernel already in the table for bf16
        // (faster there, see the top of the file).
        g_short_blocks<T> = std::is_same_v<T, kbit_half> ? &dequantize_range<T> : table.dequantize;
        table.dequantize = &dequantize_range16<T>;
    }
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(override_blockwise8_avx512vbmi);

}  // namespace kbit::cpu
