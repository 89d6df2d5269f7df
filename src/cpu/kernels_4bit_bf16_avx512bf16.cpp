// The bf16 class's dot kernel for AVX-512 BF16 (kernels_4bit_bf16_avx512-inl.h), from Isa::Avx512 up on CPUs
// with AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later): nibble indices by shifts.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593; see the VBMI kernels).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "cpu_isa.h"
#include "kbit_formats.h"
#include "kbit_precision_bf16.h"
#include "kernels_4bit_bf16.h"

#if !KBIT_CPU_ARM64
#define KBIT_BF16_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16")))

namespace kbit::cpu {
namespace {
constexpr bool kBf16Vbmi = false;
#include "kernels_4bit_bf16_avx512-inl.h"
}  // namespace

void override_bf16_dot_avx512bf16(Bf16Dot4bitKernels& table) {
    if (!isa_at_least(Isa::Avx512) || !__builtin_cpu_supports("avx512bf16")) return;
    table = {4, &dot_rows, "avx512 bf16"};
}

}  // namespace kbit::cpu
#endif  // !KBIT_CPU_ARM64
