// The 4-bit kernel tables of the active ISA, assembled once: the reference fills every slot, the
// SIMD sources override theirs (see kernels_4bit.h and cpu_isa.h).
#include "kernels_4bit.h"

#include <algorithm>

#include "kbit_dtype.h"
#include "ref_4bit.h"

namespace kbit::cpu {
namespace {

template <class T>
void ref_dequantize_range(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                          int64_t i0, int64_t i1, bool /*stream*/) {
    ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i0, i1);
}

bool ref_supports(int64_t, int64_t, int64_t) { return true; }

void ref_prepare(const float* a, int64_t k, float* prepared) { std::copy(a, a + k, prepared); }

bool never(int, int64_t, int64_t) { return false; }
int64_t no_panel(int) { return 0; }

// Never called (supports() is false): the reference's sums in its own order, for completeness.
void ref_prefill_rows(const float* a, int M, int64_t k, const uint8_t* B, const float* scales, int64_t blocksize,
                      QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo, float*) {
    ref::dot_4bit_rows(a, M, k, B, k, scales, blocksize, qt == QuantType::FP4 ? kFp4Values : kNf4Values, r0, r1,
                       sums, ldo);
}

const Dot4bitKernels& ref_dot_4bit_kernels() {
    static const Dot4bitKernels table{1, &ref_supports, &ref_prepare, &ref::dot_4bit_rows};
    return table;
}

}  // namespace

template <class T>
const Quant4bitKernels<T>& quant_4bit_kernels() {
    static const Quant4bitKernels<T> table = [] {
        Quant4bitKernels<T> t{&ref::quantize_4bit_blocks<T>, &ref_dequantize_range<T>};
#if KBIT_CPU_ARM64  // kernels_4bit_neon.cpp, which the SVE levels run too
        override_for_active_isa(t, KBIT_HWY_SIZED_HOOKS(OverrideQuant<T>));
#else
        override_for_active_isa(t, &N_AVX3::OverrideQuant<T>, &N_AVX2::OverrideQuant<T>);
        override_for_active_isa(t, &N_AVX3::OverrideBucketQuantizer<T>, nullptr);
#endif
        return t;
    }();
    return table;
}

const Dot4bitKernels& dot_4bit_kernels(int64_t k, int64_t row_elems, int64_t blocksize) {
    static const Dot4bitKernels table = [] {
        Dot4bitKernels t = ref_dot_4bit_kernels();
#if KBIT_CPU_ARM64
        override_for_active_isa(t, KBIT_HWY_SIZED_HOOKS(OverrideDot));
#else
        override_for_active_isa(t, &N_AVX3::OverrideDot, &N_AVX2::OverrideDot);
#endif
        return t;
    }();
    return table.supports(k, row_elems, blocksize) ? table : ref_dot_4bit_kernels();
}

const Prefill4bitKernels& prefill_4bit_kernels() {
    static const Prefill4bitKernels table = [] {
        Prefill4bitKernels t{&never, &no_panel, &ref_prefill_rows};
#if !KBIT_CPU_ARM64  // x86 only; AArch64 keeps the GEMM to the dot kernels
        override_for_active_isa(t, &N_AVX3::OverridePrefill, &N_AVX2::OverridePrefill);
#endif
        return t;
    }();
    return table;
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(quant_4bit_kernels);

}  // namespace kbit::cpu
