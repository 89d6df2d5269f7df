// The 4-bit quantizer for AVX-512 (Highway's AVX3 target): the quantizer is compute-bound, and on
// AVX-512 a 32-bucket table takes the place of the threshold search of the 256-bit quantizer
// (kernels_4bit_simd.cpp), and blocks of 32 or 64 elements get their absmax 16 at a time. It
// overrides the quantize slot after kernels_4bit_simd.cpp and hands that quantizer, kept from the
// table, what it does not take: blocksizes that are not multiples of 32 and blocks whose 1 / absmax is
// infinite (all zero, or a subnormal absmax whose reciprocal overflows). Bit-exact with the reference,
// as the search.
//
// A bucket table instead of the binary search: bucket(v) = round(v * scale + offset) cuts the
// searched range into at most 32 buckets narrower than the smallest gap between two thresholds
// (NF4: y in [-1, 1], gaps >= 0.080, buckets 1 / 15.49; FP4: |y| in [0, 1], gaps >= 0.083, buckets
// 1 / 31.49), so a bucket holds at most one threshold and
// index = low[b] + (v > thr[b] ? step[b] : 0): two or three vpermi2 look-ups, a compare and a masked
// add. The bucket is one FMA: fma(v, scale, offset + 1.5 * 2^23) lands where a float's ulp is 1, so
// its low mantissa bits are the rounded integer, and vpermi2 reads only the low 5 bits of each index
// (no conversion). The tables are derived from the thresholds with that same scalar FMA and bucket()
// is monotone, so every finite v gets the search's answer. NaN: the sum is the NaN y itself, whose
// low 5 bits are 0 where y came from a 16-bit element (the payload sits above bit 12), so its bucket
// is 0, whose low code is 0, and the compare is false: the search's 0; fp32 payloads may set those
// bits, so the fp32 path first makes NaN sums +0 (vfixupimmps). Inputs only reach |v| <= 1 + 2^-22
// from a finite 1 / absmax; blocks with 1 / absmax = inf keep the search.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_4bit_quantize_avx512.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "hwy_elem-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "cpu_isa.h"
#include "kbit_dtype.h"
#include "kbit_formats.h"
#include "kernels_4bit.h"
#include "ref_4bit.h"

HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::Full256<float>;  // BlockAbsmax's vectors, as the 256-bit quantizer's

template <class T>
using QuantizeFn = decltype(Quant4bitKernels<T>::quantize_blocks);
// The quantizer the table held before this one (kernels_4bit_simd.cpp's search, AVX3 build).
template <class T>
QuantizeFn<T> g_search = nullptr;

struct Buckets512 {
    static constexpr float kMagic = 0x1.8p23f;  // floats in [2^23, 2^24) are the integers
    __m512 thr_lo, thr_hi;     // thr[b]: the threshold inside bucket b, +inf where there is none
    // low[b]: the code of the smallest v of bucket b; step[b]: code(v > thr[b]) - low[b]. The second
    // pair of each is the first << 4, for the element that takes a byte's high nibble (no shift later).
    __m512i low_lo[2], low_hi[2], step_lo[2], step_hi[2];
    __m512i minus_step[2];     // NF4's unit step, negated (subtracted under the compare's mask): -1, -16
    __m512i sign[2];           // FP4's sign bit: 8, 0x80
    __m512 scale, addend;      // bucket(v) = the low bits of fma(v, scale, addend)
    bool valid = true;         // every bucket holds at most one threshold, v = +-(1 + 2^-22) in range

    // round(v * scale + offset) as the kernel computes it (exact where |v * scale + offset| < 2^22).
    static int bucket(float v, float scale, float offset) {
        const float sum = std::fma(v, scale, offset + kMagic), magic = kMagic;
        uint32_t s, m;
        std::memcpy(&s, &sum, sizeof s);
        std::memcpy(&m, &magic, sizeof m);
        return static_cast<int>(s) - static_cast<int>(m);
    }

    // code_of(c): the code of a v that exceeds exactly c of the ascending thresholds t[0, n);
    // lowest: -1 where v is signed (NF4), 0 for a magnitude (FP4); offset an integer.
    template <class CodeOf>
    Buckets512(const float* t, int n, float scale_, float offset_, float lowest, CodeOf code_of) {
        alignas(64) float thr[32];
        alignas(64) int32_t count[32] = {}, low[32], step[32] = {};
        for (float& x : thr) x = INFINITY;
        for (int i = 0; i < n; ++i) {
            const int b = bucket(t[i], scale_, offset_);
            valid = valid && b >= 0 && b < 32;
            if (!valid) break;
            if (b == bucket(std::nextafter(t[i], INFINITY), scale_, offset_)) {
                valid = valid && thr[b] == INFINITY;
                thr[b] = t[i];
            }
            for (int later = b + 1; later < 32; ++later) ++count[later];
        }
        for (int b = 0; b < 32; ++b) {
            low[b] = code_of(count[b]);
            if (thr[b] != INFINITY) step[b] = code_of(count[b] + 1) - low[b];
        }
        const float edge = 1.0f + 0x1p-22f;
        const int first = bucket(lowest * edge, scale_, offset_), last = bucket(edge, scale_, offset_);
        valid = valid && first >= 0 && last <= 31;
        thr_lo = _mm512_load_ps(thr);
        thr_hi = _mm512_load_ps(thr + 16);
        for (int high = 0; high < 2; ++high) {
            const int shift = 4 * high;
            low_lo[high] = _mm512_slli_epi32(_mm512_load_si512(low), shift);
            low_hi[high] = _mm512_slli_epi32(_mm512_load_si512(low + 16), shift);
            step_lo[high] = _mm512_slli_epi32(_mm512_load_si512(step), shift);
            step_hi[high] = _mm512_slli_epi32(_mm512_load_si512(step + 16), shift);
            minus_step[high] = _mm512_set1_epi32(-(1 << shift));
            sign[high] = _mm512_set1_epi32(8 << shift);
        }
        scale = _mm512_set1_ps(scale_);
        addend = _mm512_set1_ps(offset_ + kMagic);
    }

    // The code of each lane of v, << 4 where kHigh. kUnitStep: every step is 1 (NF4's code is the
    // count itself), one look-up fewer. kFp32: v may be a NaN with low payload bits.
    template <bool kUnitStep, bool kHigh, bool kFp32>
    HWY_INLINE __m512i index(__m512 v) const {
        __m512 sum = _mm512_fmadd_ps(v, scale, addend);
        // token QNaN -> +0 (response 8), every other class -> the value itself (response 1)
        if constexpr (kFp32) sum = _mm512_fixupimm_ps(sum, sum, _mm512_set1_epi32(0x11111118), 0);
        const __m512i b = _mm512_castps_si512(sum);
        const __mmask16 gt = _mm512_cmp_ps_mask(v, _mm512_permutex2var_ps(thr_lo, b, thr_hi), _CMP_GT_OQ);
        const __m512i low = _mm512_permutex2var_epi32(low_lo[kHigh], b, low_hi[kHigh]);
        if constexpr (kUnitStep) return _mm512_mask_sub_epi32(low, gt, low, minus_step[kHigh]);
        const __m512i step = _mm512_permutex2var_epi32(step_lo[kHigh], b, step_hi[kHigh]);
        return _mm512_mask_add_epi32(low, gt, low, step);
    }
};

const Buckets512& nf4_buckets() {
    static const Buckets512 b(kNf4Thresholds, 15, 15.49f, 16.0f, -1.0f, [](int c) { return c; });
    return b;
}

// FP4 code of a magnitude count c: {0, 1, 6, 7, 4, 5, 2, 3}; the sign (8) is added per lane.
const Buckets512& fp4_buckets() {
    static const Buckets512 b(kFp4MagnitudeThresholds, 7, 31.49f, 0.0f, 0.0f, [](int c) { return c ^ ((c & 2) << 1); });
    return b;
}

template <QuantType Q, bool kHigh, bool kFp32>
HWY_INLINE __m512i indices512(__m512 y, const Buckets512& s) {
    if constexpr (Q == QuantType::NF4) {
        return s.index<true, kHigh, kFp32>(y);
    } else {
        const __m512i mag = s.index<false, kHigh, kFp32>(_mm512_abs_ps(y));
        const __mmask16 neg = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ);
        return _mm512_mask_or_epi32(mag, neg, mag, s.sign[kHigh]);
    }
}

HWY_INLINE __m512 load16_as_float(const float* p) { return _mm512_loadu_ps(p); }
HWY_INLINE __m512 load16_as_float(const kbit_half* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The packed bytes of 32 elements at x scaled by r: byte k (elements 2k, 2k + 1) in the low byte of
// dword lane k.
template <class T, QuantType Q>
HWY_INLINE __m512i codes32(const T* x, __m512 r, const Buckets512& s) {
    __m512 even, odd;
    if constexpr (std::is_same_v<T, kbit_bf16>) {
        // 32 bf16 in one vector: as 16 dwords, element 2k is the low half of dword k and 2k + 1 the
        // high half, so a shift and a mask give both halves as fp32 (exact), in order, without the
        // widening loads and the two permutes.
        const __m512i w = _mm512_loadu_si512(x);
        even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
        odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    } else {
        // Lanes 0-15 of the concatenation (v0, v1): even elements, then odd ones.
        const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        const __m512 v0 = load16_as_float(x), v1 = load16_as_float(x + 16);
        even = _mm512_permutex2var_ps(v0, even_lanes, v1);
        odd = _mm512_permutex2var_ps(v0, odd_lanes, v1);
    }
    constexpr bool kFp32 = std::is_same_v<T, float>;
    return _mm512_or_si512(indices512<Q, true, kFp32>(_mm512_mul_ps(even, r), s),
                           indices512<Q, false, kFp32>(_mm512_mul_ps(odd, r), s));
}

// The bytes of four codes32 results (64 bytes, in order): two dword and one word saturating packs
// (values are 0-255) leave 128-bit lane l holding c0's bytes 4l..4l+3, then c1's, c2's, c3's; one
// dword permutation transposes that. 4 shuffle uops where four vpmovdb take 8.
HWY_INLINE __m512i pack4(__m512i c0, __m512i c1, __m512i c2, __m512i c3) {
    const __m512i bytes = _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), bytes);
}

// The codes of `vectors` runs of 32 elements from x to o (16 bytes each); run j scaled by r_of(j),
// a broadcast 1 / absmax of its block.
template <class T, QuantType Q, class ROf>
HWY_INLINE void codes512(const T* x, uint8_t* o, int64_t vectors, const Buckets512& s, ROf r_of) {
    int64_t j = 0;
    for (; j + 4 <= vectors; j += 4) {
        const __m512i c0 = codes32<T, Q>(x + 32 * j, r_of(j), s);
        const __m512i c1 = codes32<T, Q>(x + 32 * j + 32, r_of(j + 1), s);
        const __m512i c2 = codes32<T, Q>(x + 32 * j + 64, r_of(j + 2), s);
        const __m512i c3 = codes32<T, Q>(x + 32 * j + 96, r_of(j + 3), s);
        _mm512_storeu_si512(o + 16 * j, pack4(c0, c1, c2, c3));
    }
    for (; j < vectors; ++j)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * j), _mm512_cvtepi32_epi8(codes32<T, Q>(x + 32 * j, r_of(j), s)));
}

// The absmax of 16 consecutive small blocks of 16-bit values at once (AVX-512). Per block a few
// 512-bit max steps on the magnitude bits (BlockAbsmax's rule: no conversion, exact), then one
// transposing tree of unpacks and maxima folds the 16 blocks' vectors into 16 words (~3 uops per
// block, against ~12 for a horizontal max of each block on its own), and one division gives all 16
// 1/absmax. Only for blocks of 32 and 64 elements (64 is bitsandbytes' and `kbit quantize`'s
// default): bf16 NF4 on one Sapphire Rapids core, ns per element, blocksize 32: 0.247 -> 0.185,
// 64: 0.198 -> 0.166, 128: 0.174 -> 0.178, 256: 0.154 -> 0.178 (the group's 16 blocks are then
// read twice from further away than one block's).
constexpr int64_t kGroupedAbsmaxMaxBlocksize = 64;

// 16 vectors of 32 words (block j's partial maxima in v[j]) -> 16 words, block j's max in word j:
// 16-bit unpacks pair the blocks, then 32-bit and 64-bit unpacks, then the 128-bit lanes (the
// unpacks' interleaving leaves the blocks in order; a wrong order fails every absmax test).
HWY_INLINE __m256i fold_16_blocks(__m512i v[16]) {
    __m512i t[8], u[4], w[2];
    for (int j = 0; j < 8; ++j)
        t[j] = _mm512_max_epu16(_mm512_unpacklo_epi16(v[2 * j], v[2 * j + 1]), _mm512_unpackhi_epi16(v[2 * j], v[2 * j + 1]));
    for (int j = 0; j < 4; ++j)
        u[j] = _mm512_max_epu16(_mm512_unpacklo_epi32(t[2 * j], t[2 * j + 1]), _mm512_unpackhi_epi32(t[2 * j], t[2 * j + 1]));
    for (int j = 0; j < 2; ++j)
        w[j] = _mm512_max_epu16(_mm512_unpacklo_epi64(u[2 * j], u[2 * j + 1]), _mm512_unpackhi_epi64(u[2 * j], u[2 * j + 1]));
    // w[j]'s four 128-bit lanes each hold 8 blocks' words: fold the lanes (0 with 1, 2 with 3, then pairs).
    const __m512i x = _mm512_max_epu16(_mm512_shuffle_i32x4(w[0], w[1], 0x88), _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
    const __m512i y = _mm512_max_epu16(x, _mm512_shuffle_i32x4(x, x, 0xB1));
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(y, y, 0x08));  // lanes 0 and 2: blocks 0-7, 8-15
}

// absmax[j] and rs[j] = 1 / absmax[j] of the 16 blocks from x; false if a block holds a NaN (its
// absmax then takes the fp32 fold, which skips NaN: the caller's per-block path).
template <class T>
HWY_INLINE bool absmax_16_blocks(const T* x, int64_t blocksize, float* absmax, float* rs) {
    const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(x);
    __m512i v[16];
    for (int j = 0; j < 16; ++j) {
        const uint16_t* p = bits + j * blocksize;
        __m512i m = _mm512_and_si512(_mm512_loadu_si512(p), magnitude);
        for (int64_t i = 32; i < blocksize; i += 32) m = _mm512_max_epu16(m, _mm512_and_si512(_mm512_loadu_si512(p + i), magnitude));
        v[j] = m;
    }
    const __m256i words = fold_16_blocks(v);
    if (_mm256_cmpgt_epu16_mask(words, _mm256_set1_epi16(static_cast<short>(kInfinityBits<T>))) != 0) return false;
    const __m512 amax = std::is_same_v<T, kbit_half>
                            ? _mm512_cvtph_ps(words)
                            : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), 16));
    _mm512_storeu_ps(absmax, amax);
    _mm512_storeu_ps(rs, _mm512_div_ps(_mm512_set1_ps(1.0f), amax));
    return true;
}

// Blocks [b0, b1) of an n-element tensor, all complete, blocksize a multiple of 32. The bucket tables
// are locals of this loop so that they stay in registers: the code and absmax stores may alias the
// static tables when used through a reference, which made GCC reload them after every store.
template <class T, QuantType Q>
void quantize_full_blocks(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                          int64_t b0, int64_t b1) {
    const DF df;
    const Buckets512 s = Q == QuantType::NF4 ? nf4_buckets() : fp4_buckets();
    // Block b's codes from its 1 / absmax; the search takes a block whose 1 / absmax is infinite.
    auto codes = [&](int64_t b, float rs) {
        if (std::isinf(rs)) return g_search<T>(qt, A, absmax, out, blocksize, n, b, b + 1);
        const __m512 r = _mm512_set1_ps(rs);
        codes512<T, Q>(A + b * blocksize, out + b * blocksize / 2, blocksize / 32, s, [&](int64_t) { return r; });
    };
    auto block_absmax = [&](int64_t b) {
        return absmax[b] = BlockAbsmax(df, A + b * blocksize, blocksize, absmax_start(blocksize, blocksize));
    };
    auto one_block = [&](int64_t b) { codes(b, 1.0f / block_absmax(b)); };
    int64_t b = b0;
    // Blocks of 32 or 64 elements 16 at a time: their codes in one run, so that the packing of four
    // vectors' codes (pack4) spans blocks.
    if (blocksize <= kGroupedAbsmaxMaxBlocksize) {
        alignas(64) float rs[16];
        const int per_block = blocksize == 64 ? 1 : 0;  // log2 of the 32-element runs per block
        for (; b + 16 <= b1; b += 16) {
            prefetch_quantize_4bit_input(A, blocksize, b, 16);
            if constexpr (sizeof(T) == 2) {
                if (!absmax_16_blocks(A + b * blocksize, blocksize, absmax + b, rs)) {  // a NaN among them
                    for (int j = 0; j < 16; ++j) one_block(b + j);
                    continue;
                }
            } else {
                for (int j = 0; j < 16; ++j) rs[j] = 1.0f / block_absmax(b + j);
            }
            if (_mm512_cmp_ps_mask(_mm512_load_ps(rs), _mm512_set1_ps(INFINITY), _CMP_EQ_OQ) == 0) {
                codes512<T, Q>(A + b * blocksize, out + b * blocksize / 2, 16 << per_block, s,
                               [&](int64_t j) { return _mm512_set1_ps(rs[j >> per_block]); });
            } else {  // a zero block among them: block by block (codes hands it to the search)
                for (int j = 0; j < 16; ++j) codes(b + j, rs[j]);
            }
        }
    }
    for (; b < b1; ++b) {
        prefetch_quantize_4bit_input(A, blocksize, b, 1);
        one_block(b);
    }
}

template <class T>
void quantize_blocks(QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                     int64_t b0, int64_t b1) {
    const bool buckets = blocksize % 32 == 0 && (qt == QuantType::NF4 ? nf4_buckets() : fp4_buckets()).valid;
    if (!buckets) return g_search<T>(qt, A, absmax, out, blocksize, n, b0, b1);
    const int64_t full = std::min(b1, n / blocksize);  // blocks [b0, full) are complete
    if (qt == QuantType::NF4) quantize_full_blocks<T, QuantType::NF4>(qt, A, absmax, out, blocksize, n, b0, full);
    else quantize_full_blocks<T, QuantType::FP4>(qt, A, absmax, out, blocksize, n, b0, full);
    if (std::max(b0, full) < b1) ref::quantize_4bit_blocks(qt, A, absmax, out, blocksize, n, std::max(b0, full), b1);
}

}  // namespace

template <class T>
void OverrideBucketQuantizer(Quant4bitKernels<T>& t) {
    g_search<T> = t.quantize_blocks;
    t.quantize_blocks = &quantize_blocks<T>;
}
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(OverrideBucketQuantizer);

#endif  // HWY_TARGET == HWY_AVX3
}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
