// The 8-bit kernel tables of the active ISA, assembled once: the reference fills every slot, the
// SIMD (and library) sources override theirs (see kernels_8bit.h and cpu_isa.h).
#include "kernels_8bit.h"

#include "kbit_dtype.h"
#include "kbit_half.h"
#include "ref_8bit.h"

namespace kbit::cpu {
namespace {

template <class T>
void ref_quantize(const float* code, const Code8Lut* /*lut*/, const T* A, float* absmax, uint8_t* out,
                  int64_t blocksize, int64_t n, int64_t b0, int64_t b1, bool /*stream*/) {
    ref::quantize_blockwise_8bit_blocks(code, A, absmax, out, blocksize, n, b0, b1);
}

template <class T>
void ref_dequantize(const float* code, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                    int64_t begin, int64_t end, bool /*stream*/) {
    ref::dequantize_blockwise_8bit_range(code, A, absmax, out, blocksize, begin, end);
}

void ref_vector_quant(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t cols, int64_t r0,
                      int64_t r1) {
    ref::int8_vector_quant(A + r0 * cols, out + r0 * cols, rowStats + r0, threshold, r1 - r0, cols);
}

void ref_dequant_mm(const int32_t* A, const float* rowStats, const float* colStats, kbit_half* out,
                    const kbit_half* bias, int64_t cols, int64_t r0, int64_t r1) {
    ref::dequant_mm_int32_fp16(A + r0 * cols, rowStats + r0, colStats, out + r0 * cols, bias, r1 - r0, cols);
}

bool no_library(int64_t, int64_t, int64_t, const int8_t*, int64_t, const int8_t*, int64_t, int32_t*, int64_t) {
    return false;
}

void ref_igemm_s32(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                   int32_t* C, int64_t ldc) {
    ref::igemm_s32(m, n, k, W, X, C, lda, ldb, ldc);
}

}  // namespace

template <class T>
const Blockwise8Kernels<T>& blockwise8_kernels() {
    static const Blockwise8Kernels<T> table = [] {
        Blockwise8Kernels<T> t{false, &ref_quantize<T>, &ref_dequantize<T>};
        // Dequantize under avx512: AVX3's gathers beat AVX2's 8 assembled look-ups per vector (one
        // Sapphire Rapids core, 64M codes: fp32 21.8 -> 25.0 GB/s, fp16 11.4 -> 13.2, bf16 10.5 -> 17.1).
        override_for_active_isa(t, KBIT_HWY_HOOKS(OverrideBlockwise8<T>));
#if !KBIT_CPU_ARM64
        override_blockwise8_avx512vbmi(t);
#endif
        return t;
    }();
    return table;
}

const Int8Kernels& int8_kernels() {
    static const Int8Kernels table = [] {
        Int8Kernels t{&ref_vector_quant, &ref_dequant_mm, &ref::int8_outlier_flags, &ref::int8_outlier_matmul_rows};
        override_for_active_isa(t, KBIT_HWY_HOOKS(OverrideInt8));
        return t;
    }();
    return table;
}

const IgemmKernels& igemm_kernels() {
    static const IgemmKernels table = [] {
        IgemmKernels t{&no_library, &ref_igemm_s32, "kbit"};
        override_for_active_isa(t, KBIT_HWY_HOOKS(OverrideIgemm));
#if KBIT_CPU_ARM64
        override_igemm_dotprod(t);  // after the Highway kernel of every level, which it replaces
#endif
        override_igemm_onednn(t);
        return t;
    }();
    return table;
}

const char* igemm_provider() { return igemm_kernels().provider; }

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(blockwise8_kernels);

}  // namespace kbit::cpu
