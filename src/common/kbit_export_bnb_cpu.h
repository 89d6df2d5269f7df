// kbit_export_bnb_cpu.h — the front end of the bitsandbytes-CPU interface: one checked wrapper per family of
// abi/kbit_bnb_cpu.def, called by the generated exported functions (src/common/generated/kbit_bnb_cpu_exports.cpp)
// with the function's name and, for the 4-bit families, its format (QuantType), for the feature queries the
// feature (CpuFeature). The 8-bit blockwise families are the 8-bit interface's wrapper under bitsandbytes' CPU
// sizes (kbit_export_8bit.h); the others run the argument checks of kbit_validate_bnb_cpu.h inside the
// exception barrier (kbit_export.h) and call the backend's operation only for a valid, non-empty call: the
// 4-bit interface's dequantizer (kbit_ops_4bit.h), kbit_ops_bnb_cpu.h's GEMV and feature query.
#pragma once

#include "kbit_export.h"
#include "kbit_export_8bit.h"
#include "kbit_ops_4bit.h"
#include "kbit_ops_bnb_cpu.h"
#include "kbit_validate_bnb_cpu.h"

// The bnb_cpu interface minor this backend implements (its version symbol): the header's, unless the backend's
// build defines KBIT_BACKEND_BNB_CPU_MINOR lower.
#ifndef KBIT_BACKEND_BNB_CPU_MINOR
#define KBIT_BACKEND_BNB_CPU_MINOR KBIT_BNB_CPU_VERSION_MINOR
#endif
static_assert(KBIT_BACKEND_BNB_CPU_MINOR <= KBIT_BNB_CPU_VERSION_MINOR,
              "a backend cannot implement a newer minor than its header");

namespace kbit::exports {

// ---- one wrapper per family of abi/kbit_bnb_cpu.def -------------------------------------------

// bitsandbytes' CPU library has no stream: the operations get NULL. Its 8-bit blockwise functions are
// the 8-bit interface's (kbit_export_8bit.h) under its sizes: any blocksize >= 1.
template <class T>
kbit_status bnb_cpu_quantize_8bit(const char* fn, float* code, T* A, float* absmax, unsigned char* out,
                                  int64_t blocksize, int64_t n) {
    return blockwise_8bit<Blockwise::Quantize>(fn, ElementOf<T>{}, kAnyBlocksize, code, A, absmax, out, blocksize, n,
                                               nullptr);
}

template <class T>
kbit_status bnb_cpu_dequantize_8bit(const char* fn, float* code, unsigned char* A, const float* absmax, T* out,
                                    int64_t blocksize, int64_t n) {
    return blockwise_8bit<Blockwise::Dequantize>(fn, ElementOf<T>{}, kAnyBlocksize, code, A, absmax, out, blocksize,
                                                 n, nullptr);
}

// The m x n tensor is dequantized as its m * n elements in flat blocks.
template <class T>
kbit_status bnb_cpu_dequantize_4bit(const char* fn, QuantType qt, unsigned char* A, const float* absmax, T* out,
                                    int64_t blocksize, int64_t m, int64_t n) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_bnb_cpu_dequantize_4bit(fn, A, absmax, out, blocksize, m, n, sizeof(T), empty);
        },
        [&] { return ops::dequantize_4bit<T>(fn, qt, A, absmax, out, blocksize, m * n, nullptr); });
}

// The strides are read only when M > 1: a single row is K activations and N outputs long.
inline kbit_status bnb_cpu_gemv_4bit(const char* fn, QuantType qt, int64_t M, int64_t N, int64_t K,
                                     const kbit_bf16* x, const unsigned char* w, const kbit_bf16* absmax,
                                     kbit_bf16* out, int64_t blocksize, int64_t x_stride, int64_t out_stride) {
    return checked_call(
        fn,
        [&](bool* empty) {
            return validate_bnb_cpu_gemv_4bit(fn, M, N, K, x, w, absmax, out, blocksize, x_stride, out_stride,
                                              empty);
        },
        [&] {
            return ops::bnb_cpu_gemv_4bit(fn, qt, M, N, K, x, w, absmax, out, blocksize, M > 1 ? x_stride : K,
                                          M > 1 ? out_stride : N);
        });
}

// bitsandbytes' Python calls these through ctypes without a restype, reading the whole int register, of
// which a bool result defines only the low byte: the operation's int (1 or 0) converted to bool leaves
// the rest of the register 0.
inline bool bnb_cpu_has_avx512(const char*, CpuFeature feature) noexcept { return ops::bnb_cpu_has(feature) != 0; }

}  // namespace kbit::exports
