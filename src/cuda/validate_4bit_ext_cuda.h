// validate_4bit_ext_cuda.h — argument rules of the 4-bit interface's kbit additions that
// src/common/kbit_validate_4bit.h does not cover yet (nested absmax, torchao NF4), written from
// include/kbit/kbit_4bit.h. PROVISIONAL: the lead replaces these with the shared header's versions
// when the branches merge.
#pragma once

#include <cstdint>

#include "kbit_args.h"

namespace kbit {

// kbit_nested_absmax_quantize / kbit_nested_absmax_dequantize (pointers in argument order).
inline kbit_status validate_nested_absmax(const char* fn, const char* const (&names)[5], const void* const (&ptrs)[5],
                                          int64_t blocks, int64_t nested_blocksize, bool* empty) {
    Args a(fn);
    a.nonneg("blocks", blocks).at_most("blocks", blocks, kMaxElements).blocksize("nested_blocksize", nested_blocksize);
    *empty = a.ok() && blocks == 0;
    if (!a.ok() || *empty) return a.status();
    for (int i = 0; i < 5; ++i)
        if (names[i] != nullptr) a.not_null(names[i], ptrs[i]);
    return a.status();
}

// kbit_quantize_nf4_torchao_* / kbit_dequantize_nf4_torchao_* (pointers in argument order).
inline kbit_status validate_torchao(const char* fn, const char* const (&names)[5], const void* const (&ptrs)[5],
                                    int64_t n, int64_t block_size, int64_t scaler_block_size, bool* empty) {
    Args a(fn);
    a.nonneg("n", n).at_most("n", n, kMaxElements).positive("block_size", block_size);
    a.require(block_size % 2 == 0, "block_size is %lld, must be even", static_cast<long long>(block_size));
    a.positive("scaler_block_size", scaler_block_size);
    if (a.ok())  // block_size > 0 from here on
        a.require(n % block_size == 0, "n is %lld, must be a multiple of block_size %lld", static_cast<long long>(n),
                  static_cast<long long>(block_size));
    if (a.ok())
        a.require((n / block_size) % scaler_block_size == 0,
                  "n / block_size is %lld blocks, must be a multiple of scaler_block_size %lld",
                  static_cast<long long>(n / block_size), static_cast<long long>(scaler_block_size));
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    for (int i = 0; i < 5; ++i) a.not_null(names[i], ptrs[i]);
    return a.status();
}

}  // namespace kbit
