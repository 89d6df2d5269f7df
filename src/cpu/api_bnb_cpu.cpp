// The bitsandbytes-CPU interface of libkbit_cpu.so (abi/kbit_bnb_cpu.def, include/kbit/kbit_bnb_cpu.h):
// bitsandbytes' CPU-library names with their 64-bit sizes and any positive blocksize. Each function
// checks its arguments (the messages of kbit_args.h), then drives the CPU backend's own kernel tables:
// the 8-bit blockwise kernels (kernels_8bit.h), the 4-bit dequantizer (kernels_4bit.h) and the GEMV on
// bitsandbytes' repacked layout (kernels_bnb_cpu.h). Written by hand rather than through the export
// layer: the interface is the CPU backend's alone.
#include <algorithm>

#include "cpu_isa.h"
#include "kbit/kbit_bnb_cpu.h"
#include "kbit_args.h"
#include "kbit_code8_lut.h"
#include "kbit_export.h"
#include "kbit_validate_8bit.h"  // product_at_most
#include "kernels_4bit.h"
#include "kernels_8bit.h"
#include "kernels_bnb_cpu.h"
#include "parallel_range.h"
#include "ref_4bit.h"
#include "ref_bnb_cpu.h"
#include "tuning.h"

namespace kbit::cpu {

const BnbCpuKernels& bnb_cpu_kernels() {
    static const BnbCpuKernels table = [] {
        BnbCpuKernels t{&ref::bnb_cpu_gemv_4bit_groups};
        override_bnb_cpu_simd(t);
        return t;
    }();
    return table;
}

namespace {

int64_t block_count(int64_t n, int64_t blocksize) { return n / blocksize + (n % blocksize != 0); }

// The blockwise rules of bitsandbytes' CPU names: any blocksize >= 1, n >= 0, no NULL pointer when
// there is an element, outputs disjoint from the inputs. `*empty`: nothing to do.
kbit_status validate_blockwise(const char* fn, Blockwise dir, int code_bits, const float* code, const void* in,
                               const float* absmax, const void* out, int64_t blocksize, int64_t n,
                               int64_t elem_bytes, bool* empty) {
    Args a(fn);
    a.positive("blocksize", blocksize).nonneg("n", n).at_most("n", n, kMaxElements);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    if (code_bits == 8) a.not_null("code", code);
    a.not_null("A", in).not_null("absmax", absmax).not_null("out", out);
    return blockwise_disjoint(a, dir, in, absmax, out, code, n, blocksize, code_bits, elem_bytes).status();
}

template <class T>
kbit_status quantize_8bit(const char* fn, float* code, T* A, float* absmax, unsigned char* out, int64_t blocksize,
                          int64_t n) noexcept {
    return guarded(fn, [&]() -> kbit_status {
        bool empty = false;
        const kbit_status s =
            validate_blockwise(fn, Blockwise::Quantize, 8, code, A, absmax, out, blocksize, n, sizeof(T), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const auto& k = blockwise8_kernels<T>();
        const auto lut = k.quantize_uses_lut ? code8_lut(code, false, n >= kLutBuildElements) : nullptr;
        const bool stream = n >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
        parallel_range(block_count(n, blocksize), std::max<int64_t>(1, kGrainElements / blocksize),
                       [&](int64_t b0, int64_t b1) {
                           k.quantize(code, lut.get(), A, absmax, out, blocksize, n, b0, b1, stream);
                       });
        return KBIT_STATUS_SUCCESS;
    });
}

template <class T>
kbit_status dequantize_8bit(const char* fn, float* code, unsigned char* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n) noexcept {
    return guarded(fn, [&]() -> kbit_status {
        bool empty = false;
        const kbit_status s =
            validate_blockwise(fn, Blockwise::Dequantize, 8, code, A, absmax, out, blocksize, n, sizeof(T), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        const auto& k = blockwise8_kernels<T>();
        const bool stream = n * static_cast<int64_t>(sizeof(T)) >= kStreamBytes &&
                            reinterpret_cast<uintptr_t>(out) % 64 == 0;
        parallel_range(block_count(n, blocksize), std::max<int64_t>(1, kGrainElements / blocksize),
                       [&](int64_t b0, int64_t b1) {
                           k.dequantize(code, A, absmax, out, blocksize, b0 * blocksize, std::min(b1 * blocksize, n),
                                        stream);
                       });
        return KBIT_STATUS_SUCCESS;
    });
}

template <class T>
kbit_status dequantize_4bit(const char* fn, QuantType qt, unsigned char* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t m, int64_t n) noexcept {
    return guarded(fn, [&]() -> kbit_status {
        Args a(fn);
        a.nonneg("m", m).nonneg("n", n);
        product_at_most(a, "m * n", m, n, kMaxElements);
        if (!a.ok()) return a.status();
        bool empty = false;
        const int64_t total = m * n;
        const kbit_status s = validate_blockwise(fn, Blockwise::Dequantize, 4, nullptr, A, absmax, out, blocksize,
                                                 total, sizeof(T), &empty);
        if (s != KBIT_STATUS_SUCCESS || empty) return s;
        // The SIMD kernels take power-of-two blocks of at least one 32-element group; any other
        // blocksize runs the reference (which divides), split on byte boundaries.
        const bool simd = blocksize >= 32 && (blocksize & (blocksize - 1)) == 0;
        const auto& k = quant_4bit_kernels<T>();
        const bool stream = total * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
        parallel_range_aligned(total, 64, kGrainElements, [&](int64_t i0, int64_t i1) {
            if (simd) k.dequantize_range(qt, A, absmax, out, blocksize, i0, i1, stream);
            else ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i0, i1);
        });
        return KBIT_STATUS_SUCCESS;
    });
}

kbit_status gemv_4bit(const char* fn, QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                      const unsigned char* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize,
                      int64_t x_stride, int64_t out_stride) noexcept {
    return guarded(fn, [&]() -> kbit_status {
        Args a(fn);
        a.nonneg("M", M).nonneg("N", N).nonneg("K", K);
        a.require(N % 32 == 0, "N is %lld, must be a multiple of 32", static_cast<long long>(N));
        a.require(blocksize > 0 && blocksize % 2 == 0, "blocksize is %lld, must be even and > 0",
                  static_cast<long long>(blocksize));
        if (a.ok())  // blocksize > 0 now
            a.require(K % blocksize == 0, "K is %lld, must be a multiple of blocksize %lld",
                      static_cast<long long>(K), static_cast<long long>(blocksize));
        product_at_most(a, "M * K", M, K, kMaxElements);
        product_at_most(a, "M * N", M, N, kMaxElements);
        product_at_most(a, "N * K", N, K, kMaxElements);
        if (M > 1) {
            a.require(x_stride >= K, "x_stride is %lld, must be >= K (%lld)", static_cast<long long>(x_stride),
                      static_cast<long long>(K));
            a.require(out_stride >= N, "out_stride is %lld, must be >= N (%lld)", static_cast<long long>(out_stride),
                      static_cast<long long>(N));
            product_at_most(a, "M * x_stride", M, x_stride, kMaxElements);
            product_at_most(a, "M * out_stride", M, out_stride, kMaxElements);
        }
        if (!a.ok() || M == 0 || N == 0) return a.status();
        a.not_null("out", out);
        if (K > 0) a.not_null("x", x).not_null("w", w).not_null("absmax", absmax);
        // Byte extents of each buffer as the call reads or writes it.
        const int64_t out_bytes = ((M - 1) * (M > 1 ? out_stride : 0) + N) * 2;
        const int64_t x_bytes = ((M - 1) * (M > 1 ? x_stride : 0) + K) * 2;
        const int64_t absmax_bytes = (K / blocksize) * N * 2;
        a.disjoint("out", out, out_bytes, "x", x, x_bytes)
            .disjoint("out", out, out_bytes, "w", w, N * K / 2)
            .disjoint("out", out, out_bytes, "absmax", absmax, absmax_bytes);
        if (!a.ok()) return a.status();
        const int64_t xs = M > 1 ? x_stride : K, os = M > 1 ? out_stride : N;
        const auto& kernels = bnb_cpu_kernels();
        const int64_t work_per_group = std::max<int64_t>(1, 32 * K * M);
        parallel_range(N / 32, std::max<int64_t>(1, kGrainElements / work_per_group), [&](int64_t g0, int64_t g1) {
            kernels.gemv_groups(qt, M, N, K, x, w, absmax, out, blocksize, xs, os, g0, g1);
        });
        return KBIT_STATUS_SUCCESS;
    });
}

bool uses_avx512() { return isa_at_least(Isa::Avx512); }

}  // namespace
}  // namespace kbit::cpu

using kbit::QuantType;
namespace bc = kbit::cpu;

extern "C" {

KBIT_API uint32_t kbit_bnb_cpu_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_BNB_CPU_VERSION_MAJOR, KBIT_BNB_CPU_VERSION_MINOR);
}

#define KBIT_BNB_Q8(dt, T)                                                                                        \
    KBIT_API kbit_status cquantize_blockwise_cpu_##dt(float* code, T* A, float* absmax, unsigned char* out,     \
                                                       int64_t blocksize, int64_t n) {                           \
        return bc::quantize_8bit<T>("cquantize_blockwise_cpu_" #dt, code, A, absmax, out, blocksize, n);        \
    }                                                                                                             \
    KBIT_API kbit_status cdequantize_blockwise_cpu_##dt(float* code, unsigned char* A, const float* absmax,     \
                                                         T* out, int64_t blocksize, int64_t n) {                 \
        return bc::dequantize_8bit<T>("cdequantize_blockwise_cpu_" #dt, code, A, absmax, out, blocksize, n);    \
    }
KBIT_BNB_Q8(fp32, float)
KBIT_BNB_Q8(bf16, kbit_bf16)
KBIT_BNB_Q8(fp16, kbit_half)
#undef KBIT_BNB_Q8

#define KBIT_BNB_DQ4(fmt, FMT, dt, T)                                                                             \
    KBIT_API kbit_status cdequantize_blockwise_cpu_##fmt##_##dt(unsigned char* A, const float* absmax, T* out,   \
                                                                 int64_t blocksize, int64_t m, int64_t n) {      \
        return bc::dequantize_4bit<T>("cdequantize_blockwise_cpu_" #fmt "_" #dt, QuantType::FMT, A, absmax, out, \
                                      blocksize, m, n);                                                           \
    }
KBIT_BNB_DQ4(fp4, FP4, fp32, float)
KBIT_BNB_DQ4(fp4, FP4, bf16, kbit_bf16)
KBIT_BNB_DQ4(fp4, FP4, fp16, kbit_half)
KBIT_BNB_DQ4(nf4, NF4, fp32, float)
KBIT_BNB_DQ4(nf4, NF4, bf16, kbit_bf16)
KBIT_BNB_DQ4(nf4, NF4, fp16, kbit_half)
#undef KBIT_BNB_DQ4

KBIT_API kbit_status gemv_4bit_inference_cpu_fp4_bf16(int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                                                      const unsigned char* w, const kbit_bf16* absmax,
                                                      kbit_bf16* out, int64_t blocksize, int64_t x_stride,
                                                      int64_t out_stride) {
    return bc::gemv_4bit("gemv_4bit_inference_cpu_fp4_bf16", QuantType::FP4, M, N, K, x, w, absmax, out, blocksize,
                         x_stride, out_stride);
}

KBIT_API kbit_status gemv_4bit_inference_cpu_nf4_bf16(int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                                                      const unsigned char* w, const kbit_bf16* absmax,
                                                      kbit_bf16* out, int64_t blocksize, int64_t x_stride,
                                                      int64_t out_stride) {
    return bc::gemv_4bit("gemv_4bit_inference_cpu_nf4_bf16", QuantType::NF4, M, N, K, x, w, absmax, out, blocksize,
                         x_stride, out_stride);
}

KBIT_API bool has_avx512f_cpu(void) { return bc::uses_avx512(); }

KBIT_API bool has_avx512bf16_cpu(void) { return bc::uses_avx512() && __builtin_cpu_supports("avx512bf16"); }

}  // extern "C"
