// The bf16-class kernel table of the active ISA (kernels_4bit_bf16.h): the reference fills it, the AVX2
// emulation and the AVX-512 BF16 kernels replace it where the level and the CPU allow (the last that applies
// wins).
#include "kernels_4bit_bf16.h"

#include "ref_4bit_bf16.h"

namespace kbit::cpu {
namespace {

void ref_dot_rows(const uint16_t* a, int M, int64_t K, const uint8_t* B, const float* scales, int64_t blocksize,
                  QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    ref::bf16_dot_4bit_rows(a, M, K, B, scales, blocksize, qt, r0, r1, sums, ldo);
}

}  // namespace

const Bf16Dot4bitKernels& bf16_dot_4bit_kernels() {
    static const Bf16Dot4bitKernels table = [] {
        Bf16Dot4bitKernels t{1, &ref_dot_rows, "reference"};
#if !KBIT_CPU_ARM64
        override_bf16_dot_avx2(t);
        override_bf16_dot_avx512bf16(t);
        override_bf16_dot_avx512vbmi(t);
#endif
        return t;
    }();
    return table;
}

}  // namespace kbit::cpu
