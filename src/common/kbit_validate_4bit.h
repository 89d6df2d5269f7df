// kbit_validate_4bit.h — argument rules of the 4-bit interface, shared by every backend so that the
// same bad input gets the same status and message everywhere. Each returns KBIT_STATUS_SUCCESS or the
// failure (already recorded); `*empty` says the call has nothing to do.
#pragma once

#include <algorithm>
#include <vector>

#include "kbit/kbit_4bit.h"
#include "kbit_args.h"

namespace kbit {

// cquantize_blockwise_* / cdequantize_blockwise_* (4-bit) and kbit_(de)quantize_4bit: the format
// (always valid for the bitsandbytes names, whose symbol fixes it) and, where the call passes one, the
// dtype (NULL for the bitsandbytes names), then the blockwise rules for elements of `elem_bytes` bytes
// (4, or 2 for fp16/bf16).
inline kbit_status validate_blockwise_4bit(const char* fn, Blockwise dir, int32_t quant_type, const int32_t* dtype,
                                           const void* in, const float* absmax, const void* out, int64_t blocksize,
                                           int64_t n, int64_t elem_bytes, bool* empty) {
    Args a(fn);
    a.quant_type(quant_type);
    if (dtype != nullptr) a.dtype(*dtype);
    a.blocksize(blocksize);
    return blockwise_rules(a, dir, 4, nullptr, in, absmax, out, blocksize, n, elem_bytes, empty);
}

// kbit_nested_absmax_quantize (out_a = qabsmax, out_b = nested_absmax, out_c = offset) and
// kbit_nested_absmax_dequantize (out_a = absmax, out_b = out_c = the output again).
inline kbit_status validate_nested_absmax(const char* fn, const char* in_name, const void* in, const float* code,
                                          const char* nested_name, const float* nested,
                                          const char* out_a_name, const void* out_a,
                                          const char* out_b_name, const void* out_b, int64_t blocks,
                                          int64_t nested_blocksize, bool* empty) {
    Args a(fn);
    a.nonneg("blocks", blocks).at_most("blocks", blocks, kMaxElements).blocksize("nested_blocksize", nested_blocksize);
    *empty = a.ok() && blocks == 0;
    if (!a.ok() || *empty) return a.status();
    a.not_null(in_name, in).not_null("code", code).not_null(nested_name, nested).not_null(out_a_name, out_a);
    if (out_b_name != nullptr) a.not_null(out_b_name, out_b);
    return a.status();
}

// kbit_quantize_nf4_torchao_* (sizes as torchao's to_nf4 requires them) and
// kbit_dequantize_nf4_torchao_*: `elements` is w (quantize) or out (dequantize); NULL pointers are
// reported in parameter order.
inline kbit_status validate_torchao_nf4(const char* fn, Blockwise dir, const void* elements, const void* quantized_data,
                                        const void* quantized_scalers, const void* quantization_factor,
                                        const void* scaler_mean, int64_t n, int64_t block_size,
                                        int64_t scaler_block_size, bool* empty) {
    Args a(fn);
    *empty = false;
    a.nonneg("n", n).at_most("n", n, kMaxElements).positive("block_size", block_size);
    a.require(block_size % 2 == 0, "block_size is %lld, must be even", static_cast<long long>(block_size));
    a.positive("scaler_block_size", scaler_block_size);
    if (!a.ok()) return a.status();  // the divisions below need positive sizes
    a.require(n % block_size == 0, "n is %lld, must be a multiple of block_size %lld", static_cast<long long>(n),
              static_cast<long long>(block_size));
    const int64_t blocks = n / block_size;
    a.require(blocks % scaler_block_size == 0,
              "n / block_size is %lld scalers, must be a multiple of scaler_block_size %lld",
              static_cast<long long>(blocks), static_cast<long long>(scaler_block_size));
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    if (dir == Blockwise::Quantize) a.not_null("w", elements);
    a.not_null("quantized_data", quantized_data).not_null("quantized_scalers", quantized_scalers);
    a.not_null("quantization_factor", quantization_factor).not_null("scaler_mean", scaler_mean);
    if (dir == Blockwise::Dequantize) a.not_null("out", elements);
    return a.status();
}

// cgemm_4bit_inference_naive_*.
inline kbit_status validate_gemv_4bit(const char* fn, int m, int k, const void* A, const void* B,
                                      const float* absmax, const float* datatype, const void* out,
                                      int ldb, int blocksize, bool* empty) {
    Args a(fn);
    a.nonneg("m", m).nonneg("k", k).blocksize(blocksize);
    a.require(k % 2 == 0, "k is %d, must be even", k);
    a.require(static_cast<int64_t>(ldb) * 2 >= k, "ldb is %d, must be >= k / 2 = %d", ldb, k / 2);
    *empty = a.ok() && (m == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (k > 0) a.not_null("A", A).not_null("B", B).not_null("absmax", absmax).not_null("datatype", datatype);
    return a.status();
}

// cgemm_4bit_*.
inline kbit_status validate_gemm_4bit(const char* fn, const void* A, const void* B, const float* absmax,
                                      const uint8_t* absmax_8bit, const float* absmax_code,
                                      const float* absmax_offset, const void* out, int M, int N, int K,
                                      int blocksize, bool* empty) {
    Args a(fn);
    a.nonneg("M", M).nonneg("N", N).nonneg("K", K).blocksize(blocksize);
    a.require(K % 2 == 0, "K is %d, must be even", K);
    *empty = a.ok() && (M == 0 || N == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (K > 0) {
        a.not_null("A", A).not_null("B", B).not_null("absmax", absmax);
        if (absmax_8bit != nullptr) a.not_null("absmax_code", absmax_code).not_null("absmax_offset", absmax_offset);
    }
    return a.status();
}

// kbit_gemm_4bit_grouped: scalars (dtype, quant_type, sizes and their limits, a_rows_per_token), then the
// empty rule (no token, no choice or no output feature), then the pointers. The expert ids are device
// memory: each backend checks them in its operation before writing, on the host (grouped_pairs_by_expert)
// or on the device, with the error held for the stream's next synchronize (kbit_stream_errors.h).
inline kbit_status validate_gemm_4bit_grouped(const char* fn, int32_t dtype, const void* A, int64_t a_rows_per_token,
                                              const void* B, const float* absmax, const uint8_t* absmax_8bit,
                                              const float* absmax_code, const float* absmax_offset, int64_t experts,
                                              int64_t N, int64_t K, int64_t blocksize, int32_t quant_type,
                                              const int32_t* ids, int64_t tokens, int64_t top_k, const void* out,
                                              bool* empty) {
    constexpr int64_t kIntMax = 2147483647;
    Args a(fn);
    a.dtype(dtype).quant_type(quant_type);
    a.nonneg("experts", experts).nonneg("N", N).at_most("N", N, kIntMax).nonneg("K", K).at_most("K", K, kIntMax);
    a.require(K % 2 == 0, "K is %lld, must be even", static_cast<long long>(K));
    a.blocksize(blocksize);
    a.nonneg("tokens", tokens).nonneg("top_k", top_k);
    if (!a.ok()) return a.status();
    const int64_t nk = N * K;  // < 2^62
    a.require(nk == 0 || experts <= kMaxElements / nk, "experts * N * K is %lld * %lld * %lld, must be <= 2^62",
              static_cast<long long>(experts), static_cast<long long>(N), static_cast<long long>(K));
    a.require(top_k == 0 || tokens <= kIntMax / top_k, "tokens * top_k is %lld * %lld, must be <= 2^31 - 1",
              static_cast<long long>(tokens), static_cast<long long>(top_k));
    a.require(a_rows_per_token == 1 || a_rows_per_token == top_k,
              "a_rows_per_token is %lld, must be 1 or top_k (%lld)", static_cast<long long>(a_rows_per_token),
              static_cast<long long>(top_k));
    *empty = a.ok() && (tokens == 0 || top_k == 0 || N == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("ids", ids).not_null("out", out);
    if (K > 0) {
        a.not_null("A", A).not_null("B", B).not_null("absmax", absmax);
        if (absmax_8bit != nullptr) a.not_null("absmax_code", absmax_code).not_null("absmax_offset", absmax_offset);
    }
    return a.status();
}

// The error of an id out of range: pair `pair` (token pair / top_k, slot pair % top_k) holds `id`. The
// host check below and the device backends' deferred check (kbit_stream_errors.h) give this message.
inline kbit_status grouped_id_error(const char* fn, int64_t pair, int64_t top_k, int32_t id, int64_t experts) {
    return set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "ids[%lld] (token %lld, slot %lld) is %d, must be in [0, %lld)",
                     static_cast<long long>(pair), static_cast<long long>(pair / top_k),
                     static_cast<long long>(pair % top_k), static_cast<int>(id), static_cast<long long>(experts));
}

// kbit_gemm_4bit_grouped's ids, read to the host: checks each (the first out of range, in (token, slot)
// order, fails with a message naming it) and fills `order` with the pairs t * top_k + j sorted by expert,
// in (t, j) order within an expert: the rows each expert's one cgemm_4bit takes, in the loop's order.
inline kbit_status grouped_pairs_by_expert(const char* fn, const int32_t* ids, int64_t pairs, int64_t top_k,
                                           int64_t experts, std::vector<int32_t>* order) {
    for (int64_t p = 0; p < pairs; ++p)
        if (ids[p] < 0 || ids[p] >= experts) return grouped_id_error(fn, p, top_k, ids[p], experts);
    order->resize(static_cast<size_t>(pairs));
    for (int64_t p = 0; p < pairs; ++p) (*order)[p] = static_cast<int32_t>(p);
    std::stable_sort(order->begin(), order->end(), [ids](int32_t a, int32_t b) { return ids[a] < ids[b]; });
    return KBIT_STATUS_SUCCESS;
}

// Whether expert e of an [experts, N, K] weight has a slice that cgemm_4bit can take: its first element
// starts a block (nested: starts a group of 256 blocks).
inline bool grouped_expert_has_slice(int64_t e, int64_t N, int64_t K, int64_t blocksize, bool nested) {
    const int64_t unit = nested ? 256 * blocksize : blocksize;
    return (e * N * K) % unit == 0;
}

// kbit_gemm_4bit_precision: the precision class first (the message names the value and the classes of the
// backend's 4bit minor `minor`: 4bit 1.3 widened the argument by KBIT_PRECISION_BF16, so a backend that reports
// 1.2 rejects it as 1.2's contract requires), then dtype, then cgemm_4bit's rules with 64-bit sizes (each at
// most 2^31 - 1, as cgemm_4bit's int), and for the int8 class K % 32 == 0 (the message names K).
inline kbit_status validate_gemm_4bit_precision(const char* fn, int minor, int32_t precision, int32_t dtype,
                                                const void* A, const void* B, const float* absmax,
                                                const uint8_t* absmax_8bit, const float* absmax_code,
                                                const float* absmax_offset, const void* out, int64_t M, int64_t N,
                                                int64_t K, int64_t blocksize, bool* empty) {
    constexpr int64_t kIntMax = 2147483647;
    Args a(fn);
    if (minor >= 3)
        a.require(precision == KBIT_PRECISION_EXACT || precision == KBIT_PRECISION_BF16 ||
                      precision == KBIT_PRECISION_INT8,
                  "precision is %d, must be KBIT_PRECISION_EXACT (0), KBIT_PRECISION_BF16 (1) or "
                  "KBIT_PRECISION_INT8 (2)",
                  static_cast<int>(precision));
    else
        a.require(precision == KBIT_PRECISION_EXACT || precision == KBIT_PRECISION_INT8,
                  "precision is %d, must be KBIT_PRECISION_EXACT (0) or KBIT_PRECISION_INT8 (2)",
                  static_cast<int>(precision));
    if (!a.ok()) return a.status();
    a.dtype(dtype);
    a.nonneg("M", M).at_most("M", M, kIntMax).nonneg("N", N).at_most("N", N, kIntMax);
    a.nonneg("K", K).at_most("K", K, kIntMax).blocksize(blocksize);
    a.require(K % 2 == 0, "K is %lld, must be even", static_cast<long long>(K));
    a.require(precision != KBIT_PRECISION_INT8 || K % 32 == 0,
              "K is %lld, must be a multiple of 32 for KBIT_PRECISION_INT8", static_cast<long long>(K));
    *empty = a.ok() && (M == 0 || N == 0);
    if (!a.ok() || *empty) return a.status();
    a.not_null("out", out);
    if (K > 0) {
        a.not_null("A", A).not_null("B", B).not_null("absmax", absmax);
        if (absmax_8bit != nullptr) a.not_null("absmax_code", absmax_code).not_null("absmax_offset", absmax_offset);
    }
    return a.status();
}

}  // namespace kbit
