// The roofline probes with 512-bit vectors (probe_passes.h), for CPUs with AVX-512F: this file alone
// is compiled with -mavx512f (bench/CMakeLists.txt), and harness.cpp calls it only where cpuid
// reports AVX-512F. Kernels that load and store whole 64-byte lines outran the 256-bit probes.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports at
// every inlined call (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "probe_passes.h"

namespace kbit_bench {
namespace {

struct Zmm : Lanes<16, Zmm> {
    static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
    template <int OutBytes>
    static void widen(const uint8_t* in, uint8_t* out) {
        __m512i v;
        if constexpr (OutBytes == 4) {
            v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
        } else {  // two 256-bit halves: the 512-bit byte-to-word form needs AVX-512BW
            const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
            const __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16)));
            v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out), v);
    }
};

}  // namespace

double read_gbs_avx512(const std::vector<float*>& src, long n, int streams, int max_streams) {
    return read_gbs_of<Zmm>(src, n, streams, max_streams);
}
double write_gbs_avx512(float* dst, long n) { return best_write_pass<Zmm>(dst, n); }
double copy_gbs_avx512(const float* src, float* dst, long n) { return best_copy_pass<Zmm>(src, dst, n); }
double update_gbs_avx512(float* a, long n) { return update_pass<Zmm>(a, n); }
void adam8_pass_avx512(float* p, const float* g, float* s1, float* s2, long n) { adam8_pass<Zmm>(p, g, s1, s2, n); }
void widen_pass_avx512(const uint8_t* in, void* out, long n, int out_bytes) {
    if (out_bytes == 4) widen_pass<Zmm, 4>(in, out, n);
    else widen_pass<Zmm, 2>(in, out, n);
}

}  // namespace kbit_bench
