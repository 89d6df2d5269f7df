// kbit_args.h — argument checks with uniform messages, shared by every backend's entry points.
// A chain of checks records the first failure as the thread's error; status() returns it.
#pragma once

#include <cmath>
#include <cstdint>

#include "kbit_error.h"
#include "kbit_formats.h"

namespace kbit {

class Args {
public:
    explicit Args(const char* fn) : fn_(fn) {}

    const char* fn() const { return fn_; }
    bool ok() const { return status_ == KBIT_STATUS_SUCCESS; }
    kbit_status status() const { return status_; }

    Args& not_null(const char* name, const void* p) {
        if (ok() && p == nullptr) fail("%s is NULL", name);
        return *this;
    }
    Args& nonneg(const char* name, int64_t v) {
        if (ok() && v < 0) fail("%s is %lld, must be >= 0", name, static_cast<long long>(v));
        return *this;
    }
    Args& positive(const char* name, int64_t v) {
        if (ok() && v <= 0) fail("%s is %lld, must be > 0", name, static_cast<long long>(v));
        return *this;
    }
    Args& at_most(const char* name, int64_t v, int64_t max) {
        if (ok() && v > max)
            fail("%s is %lld, must be <= %lld", name, static_cast<long long>(v),
                 static_cast<long long>(max));
        return *this;
    }
    Args& blocksize(const char* name, int64_t b) {
        if (ok() && !is_supported_blocksize(b))
            fail("%s %lld is not one of %s", name, static_cast<long long>(b), kBlocksizeList);
        return *this;
    }
    Args& blocksize(int64_t b) { return blocksize("blocksize", b); }
    // An 8-bit blockwise blocksize: powers of two from kMinBlocksize to `max` (kMaxBlocksize, or
    // kMaxBlocksize8bit on a backend at 8bit 1.1 or later).
    Args& blocksize_8bit(int64_t b, int64_t max) {
        if (max == kMaxBlocksize) return blocksize(b);
        if (ok() && !(b >= kMinBlocksize && b <= kMaxBlocksize8bit && (b & (b - 1)) == 0))
            fail("blocksize %lld is not one of %s", static_cast<long long>(b), kBlocksizeList8bit);
        return *this;
    }
    Args& dtype(int32_t d) {
        if (ok() && d != KBIT_DTYPE_FP32 && d != KBIT_DTYPE_FP16 && d != KBIT_DTYPE_BF16)
            fail("dtype %d is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)",
                 static_cast<int>(d));
        return *this;
    }
    Args& quant_type(int32_t q) {
        if (ok() && q != static_cast<int32_t>(QuantType::FP4) && q != static_cast<int32_t>(QuantType::NF4))
            fail("quant_type %d is not KBIT_QUANT_FP4 (1) or KBIT_QUANT_NF4 (2)", static_cast<int>(q));
        return *this;
    }
    Args& finite_nonneg(const char* name, float v) {
        if (ok() && !(v >= 0.0f && std::isfinite(v))) fail("%s is %g, must be finite and >= 0", name, static_cast<double>(v));
        return *this;
    }
    // The byte ranges [a, a + a_bytes) and [b, b + b_bytes) do not overlap: an output may not alias
    // an input or another output (the kernels read and write in chunks, so in-place would corrupt).
    Args& disjoint(const char* a_name, const void* a, int64_t a_bytes, const char* b_name, const void* b,
                   int64_t b_bytes) {
        if (!ok() || a == nullptr || b == nullptr || a_bytes <= 0 || b_bytes <= 0) return *this;
        const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
        if (x - y < static_cast<uint64_t>(b_bytes) || y - x < static_cast<uint64_t>(a_bytes))
            fail("%s overlaps %s (in-place or overlapping buffers are not supported)", a_name, b_name);
        return *this;
    }
    // Any other condition: `cond` must hold, else the formatted message is recorded.
    template <class... A>
    Args& require(bool cond, const char* fmt, A... args) {
        if (ok() && !cond) fail(fmt, args...);
        return *this;
    }

private:
    template <class... A>
    void fail(const char* fmt, A... args) {
        status_ = set_error(KBIT_STATUS_INVALID_ARGUMENT, fn_, fmt, args...);
    }
    // Silences -Wformat-security for messages without arguments.
    void fail(const char* msg) { status_ = set_error(KBIT_STATUS_INVALID_ARGUMENT, fn_, "%s", msg); }

    const char* fn_;
    kbit_status status_ = KBIT_STATUS_SUCCESS;
};

// Largest element count the kbit_-prefixed 64-bit functions accept (keeps byte offsets and
// 2*n nibble arithmetic far from int64 overflow).
constexpr int64_t kMaxElements = int64_t{1} << 62;

// Bytes of one element of a valid KBIT_DTYPE_*.
constexpr int64_t dtype_bytes(int32_t dtype) { return dtype == KBIT_DTYPE_FP32 ? 4 : 2; }

// Which way a blockwise call goes: elements -> codes + absmax, or codes + absmax -> elements.
enum class Blockwise { Quantize, Dequantize };

// The outputs of a blockwise (de)quantization of n elements of `elem_bytes` bytes into `code_bits`
// (4 or 8) bit codes, one fp32 absmax per block, may not overlap its inputs or each other.
// `code` is the 8-bit code table (256 floats) or NULL.
inline Args& blockwise_disjoint(Args& a, Blockwise dir, const void* in, const float* absmax, const void* out,
                                const float* code, int64_t n, int64_t blocksize, int code_bits, int64_t elem_bytes) {
    if (!a.ok()) return a;
    const int64_t codes = code_bits == 4 ? n / 2 + n % 2 : n;
    const int64_t elems = n > kMaxElements / 8 ? INT64_MAX : n * elem_bytes;
    const int64_t scales = (n / blocksize + (n % blocksize != 0)) * 4;
    constexpr int64_t table = 256 * 4;
    if (dir == Blockwise::Quantize)
        return a.disjoint("out", out, codes, "A", in, elems)
            .disjoint("absmax", absmax, scales, "A", in, elems)
            .disjoint("out", out, codes, "absmax", absmax, scales)
            .disjoint("out", out, codes, "code", code, table)
            .disjoint("absmax", absmax, scales, "code", code, table);
    return a.disjoint("out", out, elems, "A", in, codes)
        .disjoint("out", out, elems, "absmax", absmax, scales)
        .disjoint("out", out, elems, "code", code, table);
}

// The rules every blockwise (de)quantization shares once its blocksize is checked (by the caller,
// on `a`): 0 <= n <= kMaxElements, no NULL pointer when there is an element (`code` only for 8-bit
// codes), no output overlapping an input or another output. `*empty`: the call is valid and n == 0.
inline kbit_status blockwise_rules(Args& a, Blockwise dir, int code_bits, const float* code, const void* in,
                                   const float* absmax, const void* out, int64_t blocksize, int64_t n,
                                   int64_t elem_bytes, bool* empty) {
    a.nonneg("n", n).at_most("n", n, kMaxElements);
    *empty = a.ok() && n == 0;
    if (!a.ok() || *empty) return a.status();
    if (code_bits == 8) a.not_null("code", code);
    a.not_null("A", in).not_null("absmax", absmax).not_null("out", out);
    return blockwise_disjoint(a, dir, in, absmax, out, code, n, blocksize, code_bits, elem_bytes).status();
}

}  // namespace kbit
