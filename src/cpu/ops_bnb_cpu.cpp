// The bitsandbytes-CPU interface of libkbit_cpu.so (abi/kbit_bnb_cpu.def): the operations behind the
// exported functions of kbit_export_bnb_cpu.h (which checks every argument first) that are this
// interface's own: the thread driver of the GEMV on bitsandbytes' repacked layout over its kernel table
// (kernels_bnb_cpu.h), and the feature queries. Its blockwise functions run the 8-bit and 4-bit
// interfaces' drivers (ops_8bit.cpp, ops_4bit.cpp), whose kernels take any blocksize.
#include <algorithm>

#include "cpu_isa.h"
#include "kbit_ops_bnb_cpu.h"
#include "kernels_bnb_cpu.h"
#include "parallel_range.h"
#include "tuning.h"

namespace kbit::ops {

kbit_status bnb_cpu_gemv_4bit(const char*, QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                              const uint8_t* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize,
                              int64_t x_stride, int64_t out_stride) {
    const auto& kernels = cpu::bnb_cpu_kernels();
    // Threads take whole 32-row groups of the layout, each 32 * K weights for every activation row.
    const int64_t weights_per_group = std::max<int64_t>(1, 32 * K * M);
    cpu::parallel_range(N / 32, std::max<int64_t>(1, cpu::kGrainWeights / weights_per_group),
                        [&](int64_t g0, int64_t g1) {
                            kernels.gemv_groups(qt, M, N, K, x, w, absmax, out, blocksize, x_stride, out_stride,
                                                g0, g1);
                        });
    return KBIT_STATUS_SUCCESS;
}

int bnb_cpu_has(CpuFeature feature) {
#if KBIT_CPU_ARM64
    (void)feature;
    return 0;  // AVX-512 queries: never on AArch64
#else
    const bool avx512 = cpu::isa_at_least(cpu::Isa::Avx512);
    return feature == CpuFeature::Avx512F ? avx512 : avx512 && __builtin_cpu_supports("avx512bf16");
#endif
}

}  // namespace kbit::ops
