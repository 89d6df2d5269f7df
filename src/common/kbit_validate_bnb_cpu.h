// kbit_validate_bnb_cpu.h — argument rules of the bitsandbytes-CPU interface (abi/kbit_bnb_cpu.def)
// beyond the 8-bit interface's (its blockwise names are validate_blockwise_8bit's with kAnyBlocksize):
// the 4-bit dequantizer of an m x n tensor under bitsandbytes' CPU sizes (any blocksize >= 1), and the
// GEMV on bitsandbytes' repacked weight layout. Each returns KBIT_STATUS_SUCCESS or the failure (already
// recorded); `*empty` says the call has nothing to do.
#pragma once

#include <cstdint>

#include "kbit_args.h"
#include "kbit_validate_8bit.h"  // product_at_most

namespace kbit {

// cdequantize_blockwise_cpu_<fmt>_<dt>: an m x n tensor, dequantized over flat blocks of its m * n
// elements, any blocksize >= 1.
inline kbit_status validate_bnb_cpu_dequantize_4bit(const char* fn, const void* A, const float* absmax,
                                                    const void* out, int64_t blocksize, int64_t m, int64_t n,
                                                    int64_t elem_bytes, bool* empty) {
    Args a(fn);
    a.nonneg("m", m).nonneg("n", n);
    product_at_most(a, "m * n", m, n, kMaxElements);
    *empty = false;
    if (!a.ok()) return a.status();
    a.positive("blocksize", blocksize);
    return blockwise_rules(a, Blockwise::Dequantize, 4, nullptr, A, absmax, out, blocksize, m * n, elem_bytes, empty);
}

// gemv_4bit_inference_cpu_<fmt>_bf16: N a multiple of the layout's 32-row groups, an even blocksize
// dividing K, strides that hold a row (read only when M > 1), `out` disjoint from every input.
// `*empty`: M == 0 or N == 0 (K == 0 is not empty: the outputs are +0).
inline kbit_status validate_bnb_cpu_gemv_4bit(const char* fn, int64_t M, int64_t N, int64_t K, const void* x,
                                              const void* w, const void* absmax, const void* out,
                                              int64_t blocksize, int64_t x_stride, int64_t out_stride,
                                              bool* empty) {
    Args a(fn);
    a.nonneg("M", M).nonneg("N", N).nonneg("K", K);
    a.require(N % 32 == 0, "N is %lld, must be a multiple of 32", static_cast<long long>(N));
    a.require(blocksize > 0 && blocksize % 2 == 0, "blocksize is %lld, must be even and > 0",
              static_cast<long long>(blocksize));
    if (a.ok())  // blocksize > 0 now
        a.require(K % blocksize == 0, "K is %lld, must be a multiple of blocksize %lld", static_cast<long long>(K),
                  static_cast<long long>(blocksize));
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
    *empty = a.ok() && (M == 0 || N == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (K > 0) a.not_null("x", x).not_null("w", w).not_null("absmax", absmax);
    // Byte extents of each buffer as the call reads or writes it (bf16 activations, outputs and scales).
    const int64_t out_bytes = ((M - 1) * (M > 1 ? out_stride : 0) + N) * 2;
    const int64_t x_bytes = ((M - 1) * (M > 1 ? x_stride : 0) + K) * 2;
    const int64_t absmax_bytes = (K / blocksize) * N * 2;
    a.disjoint("out", out, out_bytes, "x", x, x_bytes)
        .disjoint("out", out, out_bytes, "w", w, N * K / 2)
        .disjoint("out", out, out_bytes, "absmax", absmax, absmax_bytes);
    return a.status();
}

}  // namespace kbit
