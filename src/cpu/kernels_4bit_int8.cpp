// The int8-class kernel table of the active ISA (kernels_4bit_int8.h): the reference fills it, the x86
// kernels replace it where the level and the CPU allow (VNNI last, so that it wins).
#include "kernels_4bit_int8.h"

#include <algorithm>

#include "ref_4bit_int8.h"

namespace kbit::cpu {
namespace {

void ref_prepare(const int8_t* q, int64_t K, int8_t* prepared) { std::copy(q, q + K, prepared); }

void ref_dot_rows(const int8_t* prepared, const Int8Chunk* chunks, int M, int64_t K, const uint8_t* B,
                  const float* scales, int64_t blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums,
                  int64_t ldo) {
    ref::int8_dot_4bit_rows(prepared, chunks, M, K, B, scales, blocksize, qt, r0, r1, sums, ldo);
}

}  // namespace

const Int8Dot4bitKernels& int8_dot_4bit_kernels() {
    static const Int8Dot4bitKernels table = [] {
        Int8Dot4bitKernels t{&ref_prepare, 1, &ref_dot_rows, "reference", {}};
#if !KBIT_CPU_ARM64
        override_int8_dot_avx2(t);
        override_int8_dot_avx512vnni(t);
#endif
        return t;
    }();
    return table;
}

}  // namespace kbit::cpu
