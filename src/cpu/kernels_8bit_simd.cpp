// Blockwise dynamic 8-bit quantize / dequantize kernels (Highway, one source for every x86 target).
//
// Both directions need one table look-up per element (a 256-entry table for dequantization, the
// Code8Lut buckets for quantization, hwy_code8_lut-inl.h). vpgatherdd is slow on Zen 3 (measured
// 0.8 ns per element), so on AVX2 the look-ups are plain loads: the dequantizer assembles each
// vector from them (LookupCode8); the quantizer stores each chunk's bucket keys in L1 buffers, then
// assembles the bucket entries from them and finishes the codes (Code8Codes). On AVX-512 both
// gather instead: the dequantizer its 16 lanes, the quantizer the bucket entries (Code8Sums:
// 1.5-1.9x faster on Sapphire Rapids).
#include <cmath>
#include <cstddef>

#include "cpu_isa.h"
#include "kbit_code8.h"
#include "kbit_dtype.h"
#include "kbit_half.h"
#include "kbit_nan_x86.h"
#include "kernels_8bit.h"
#include "ref_8bit.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_8bit_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// clang-format off
#include <hwy/highway.h>
#include <hwy/cache_control.h>
#include "hwy_code8_lut-inl.h"
#include "hwy_elem-inl.h"
// clang-format on

#if KBIT_HWY_KERNEL_TARGET
HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements per pass: the code buffer and Code8CodesOf's key buffers stay in L1.
constexpr int64_t kChunk = 512;
static_assert(kChunk <= static_cast<int64_t>(kCode8MaxRun), "one Code8CodesOf run per chunk");

template <class T>
void QuantizeBlocks(const Code8Lut& lut, const T* A, float* absmax, uint8_t* out, int64_t blocksize, int64_t n,
                    int64_t block_begin, int64_t block_end, bool stream) {
    const hn::ScalableTag<float> df;
    const hn::ScalableTag<uint8_t> d8;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const int64_t N8 = static_cast<int64_t>(hn::Lanes(d8));
    const float* code = lut.code();
    HWY_ALIGN uint8_t codes[kChunk];

    for (int64_t b = block_begin; b < block_end; ++b) {
        const int64_t start = b * blocksize;
        const int64_t len = blocksize < n - start ? blocksize : n - start;
        const T* x = A + start;
        uint8_t* q = out + start;

        const float amax = BlockAbsmax(df, x, len, absmax_start(len, blocksize));
        absmax[b] = amax;
        const float recip = 1.0f / amax;
        const auto vrecip = hn::Set(df, recip);

        for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
            const int64_t m = kChunk < len - c0 ? kChunk : len - c0;
            const int64_t mv = m / N * N;
            const T* xc = x + c0;
            uint8_t* qc = q + c0;
            // Large outputs: the codes go through an L1 buffer and leave with non-temporal stores,
            // which skip the read-for-ownership of every output line.
            const bool nt = stream && reinterpret_cast<uintptr_t>(qc) % N8 == 0;
            uint8_t* dst = nt ? codes : qc;
            // Each value's code; also the next block's input prefetched, fetched while this one
            // computes (the absmax pass would otherwise wait for memory with nothing to overlap).
            const auto y_at = [&](size_t j) {
                hwy::Prefetch(xc + j + blocksize);  // never faults
                return hn::Mul(LoadAsFloat(df, xc + j), vrecip);
            };
            if (Code8CodesOf(df, lut, static_cast<size_t>(mv), y_at, dst)) {
                for (int64_t j = 0; j < mv; ++j) {  // irregular buckets: the search itself
                    const float y = Elem<T>::load(xc[j]) * recip;
                    if (lut.find(y) < 0) dst[j] = code8_index(code, y);
                }
            }
            for (int64_t j = mv; j < m; ++j) dst[j] = code8_index(code, Elem<T>::load(xc[j]) * recip);
            if (nt) {
                int64_t j = 0;
                for (; j + N8 <= m; j += N8) hn::Stream(hn::Load(d8, codes + j), d8, qc + j);
                for (; j < m; ++j) qc[j] = codes[j];
            }
        }
    }
    if (stream) hwy::FlushStream();
}

template <class T>
void DequantizeRange(const float* code, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                     int64_t begin, int64_t end, bool stream) {
    const hn::ScalableTag<float> df;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    for (int64_t i = begin; i < end;) {
        const int64_t b = i / blocksize;
        const int64_t block_end = (b + 1) * blocksize < end ? (b + 1) * blocksize : end;
        const float scale = absmax[b];
        const auto vscale = hn::Set(df, scale);
        while (i < block_end) {
            const int64_t m = kChunk < block_end - i ? kChunk : block_end - i;
            const int64_t mv = m / N * N;
            const uint8_t* a = A + i;
            // Lanes straight from the look-ups to the store; one loop per store kind keeps the
            // stream test out of the loop, without which GCC spills the eight indices (1.5x slower).
            // The codes of a later chunk prefetched, as kernels_8bit_dequantize_avx512vbmi.cpp does:
            // behind non-temporal stores the hardware prefetchers alone let the code stream stall.
            for (int64_t j = 0; j < m; j += 64) hwy::Prefetch(a + j + 2048);
            if (stream) {
                for (int64_t j = 0; j < mv; j += N)
                    StoreFromFloat(df, MulX86Nan(df, LookupCode8(df, code, a + j), vscale), out + i + j, true);
            } else {
                for (int64_t j = 0; j < mv; j += N)
                    StoreFromFloat(df, MulX86Nan(df, LookupCode8(df, code, a + j), vscale), out + i + j, false);
            }
            for (int64_t j = mv; j < m; ++j) out[i + j] = Elem<T>::store(mul_rn(code[a[j]], scale));
            i += m;
        }
    }
    if (stream) hwy::FlushStream();
}

// The quantize slot: through code's bucket table, or the reference's search where there is none
// (kernels_8bit.h).
template <class T>
void QuantizeSlot(const float* code, const Code8Lut* lut, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                  int64_t n, int64_t b0, int64_t b1, bool stream) {
    if (lut == nullptr) return ref::quantize_blockwise_8bit_blocks(code, A, absmax, out, blocksize, n, b0, b1);
    QuantizeBlocks(*lut, A, absmax, out, blocksize, n, b0, b1, stream);
}

template <class T>
void OverrideBlockwise8(Blockwise8Kernels<T>& t) {
    t.quantize_uses_lut = true;
    t.quantize = &QuantizeSlot<T>;
    t.dequantize = &DequantizeRange<T>;
}
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(OverrideBlockwise8);

}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // KBIT_HWY_KERNEL_TARGET
