// The exact int8 GEMM through oneDNN where oneDNN is exact: dnnl_gemm_s8s8s32 accumulates in int32
// with VNNI's vpdpbusd on AVX-512 VNNI CPUs (4.2x OpenBLAS SGEMM at 512x4096x4096 on the Zen 5 we
// measured, against 1.7x for kbit's vpmaddwd kernel), but without VNNI (or capped below it by
// ONEDNN_MAX_CPU_ISA) it uses vpmaddubsw, whose 16-bit pair sums saturate: wrong results. So it is
// used only when oneDNN itself reports an effective ISA with AVX-512 VNNI, the CPU backend runs its
// AVX-512 kernels, and this process is not a fork() child (oneDNN's OpenMP threads would hang there).
// libdnnl.so.2 is opened at run time: the backend does not depend on it.
#include <dlfcn.h>

#include "cpu_isa.h"
#include "kernels_8bit.h"
#include "parallel_range.h"

namespace kbit::cpu {
namespace {

// oneDNN 2.x's C API (oneapi/dnnl/dnnl.h), as dlsym gives it: dnnl_dim_t is int64_t, statuses and
// ISAs are C enums (int).
using GemmS8S8S32 = int (*)(char transa, char transb, char offsetc, int64_t M, int64_t N, int64_t K, float alpha,
                            const int8_t* A, int64_t lda, int8_t ao, const int8_t* B, int64_t ldb, int8_t bo,
                            float beta, int32_t* C, int64_t ldc, const int32_t* co);
using EffectiveIsa = int (*)();
constexpr int kAvx512CoreVnni = 0x67;  // dnnl_cpu_isa_avx512_core_vnni: a set of feature bits

GemmS8S8S32 exact_onednn_gemm() {
    static const GemmS8S8S32 gemm = []() -> GemmS8S8S32 {
#if KBIT_CPU_ARM64
        return nullptr;  // oneDNN is exact only with AVX-512 VNNI
#else
        if (!isa_at_least(Isa::Avx512) || !__builtin_cpu_supports("avx512vnni")) return nullptr;
        void* lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) return nullptr;
        const auto isa = reinterpret_cast<EffectiveIsa>(dlsym(lib, "dnnl_get_effective_cpu_isa"));
        const auto fn = reinterpret_cast<GemmS8S8S32>(dlsym(lib, "dnnl_gemm_s8s8s32"));
        if (isa == nullptr || fn == nullptr || (isa() & kAvx512CoreVnni) != kAvx512CoreVnni) {
            dlclose(lib);
            return nullptr;
        }
        return fn;  // the library stays loaded for the process
#endif
    }();
    return gemm;
}

// The library slot of IgemmKernels.
bool igemm_onednn(int64_t m, int64_t n, int64_t k, const int8_t* W, int64_t lda, const int8_t* X, int64_t ldb,
                  int32_t* C, int64_t ldc) {
    const GemmS8S8S32 gemm = exact_onednn_gemm();
    if (m == 0 || in_forked_child()) return false;
    const int32_t zero = 0;
    // Row-major C[n][k] = X[n][m] * W[k][m]^T, no offsets, alpha 1 and beta 0 (exact int32 results).
    return gemm('N', 'T', 'F', n, k, m, 1.0f, X, ldb, 0, W, lda, 0, 0.0f, C, ldc, &zero) == 0;
}

}  // namespace

void override_igemm_onednn(IgemmKernels& table) {
    if (exact_onednn_gemm() == nullptr) return;
    table.s32_library = &igemm_onednn;
    table.provider = "oneDNN s8s8s32 (AVX-512 VNNI)";
}

}  // namespace kbit::cpu
