// fuzz_blockwise.h — the blockwise quantizers and dequantizers of the 4-bit and 8-bit lists, written
// once over the code width kBits (fuzz_args_4bit.cpp: 4, fuzz_args_8bit.cpp: 8). The two differ in:
//   - the packed codes: two a byte (4-bit) or one (8-bit);
//   - the code table: 8-bit calls read 256 floats; the bitsandbytes-named 4-bit functions ignore their
//     code argument and kbit_quantize_4bit / kbit_dequantize_4bit take a quant_type selector instead;
//   - the blocksizes (8-bit adds 8192 and 16384).
// Scalars and buffers are drawn from the input in the order the calls take them, as before the two
// targets shared this file, so their corpora keep their meaning.
#pragma once

#include "fuzz_harness.h"

namespace kfuzz {

template <int kBits>
constexpr bool kCodeTable = kBits == 8;

template <int kBits>
constexpr bool blocksize_ok(int64_t bs) {
    return kBits == 8 ? is_blocksize_8bit(bs) : is_blocksize(bs);
}

// Bytes of n packed codes.
template <int kBits>
Sz code_bytes(Sz n) {
    return kBits == 4 ? ceil_div(n, 2) : n;
}

inline bool valid_quant_type(int32_t q) { return q == KBIT_QUANT_FP4 || q == KBIT_QUANT_NF4; }

// The rules cquantize_blockwise_* and cdequantize_blockwise_* share: n < 0 and an unsupported blocksize
// fail, so does a NULL buffer with n > 0 (the code table only where it is read); n == 0 with a valid
// blocksize succeeds without writing.
template <int kBits>
void blockwise_rules(Call& c, int64_t bs, int64_t n, const void* code, const void* A, const void* absmax,
                     const void* out) {
    c.must_fail(n < 0 || !blocksize_ok<kBits>(bs), "n < 0 or unsupported blocksize");
    c.must_fail(n > 0 && ((kCodeTable<kBits> && !code) || !A || !absmax || !out), "NULL buffer with n > 0");
    c.must_succeed_untouched(n == 0 && blocksize_ok<kBits>(bs));
}

// The code argument of a bitsandbytes-named function: 256 floats, or a pointer it must ignore.
template <int kBits>
float* code_table(Call& c) {
    return kCodeTable<kBits> ? c.buf<float>("code", Role::In, 256) : c.ignored<float>("code");
}

// cquantize_blockwise_<dt>[_<fmt>]: code, A n elements, absmax ceil(n / blocksize), out code_bytes(n).
template <int kBits, class T>
void quantize_blockwise(Call& c, kbit_status (*f)(float*, T*, float*, unsigned char*, int, int)) {
    const int bs = c.i32("blocksize"), n = c.i32("n");
    float* code = code_table<kBits>(c);
    T* A = c.buf<T>("A", Role::In, n);
    float* absmax = c.buf<float>("absmax", Role::Out, ceil_div(n, bs));
    uint8_t* out = c.buf<uint8_t>("out", Role::Out, code_bytes<kBits>(n));
    blockwise_rules<kBits>(c, bs, n, code, A, absmax, out);
    if (n > 0) {
        c.maybe_overlap(out, "out", A, "A");
        c.maybe_overlap(absmax, "absmax", A, "A");
        if constexpr (kCodeTable<kBits>) {
            c.maybe_overlap(out, "out", code, "code");
            c.maybe_overlap(absmax, "absmax", code, "code");
        } else {
            c.maybe_overlap(out, "out", absmax, "absmax");
        }
    }
    c.run([&] { return f(code, A, absmax, out, bs, n); });
}

// cdequantize_blockwise_<dt>[_<fmt>]: code, A code_bytes(n), absmax ceil(n / blocksize), out n elements.
template <int kBits, class T>
void dequantize_blockwise(Call& c, kbit_status (*f)(float*, unsigned char*, float*, T*, int, int, void*)) {
    const int bs = c.i32("blocksize"), n = c.i32("n");
    float* code = code_table<kBits>(c);
    uint8_t* A = c.buf<uint8_t>("A", Role::In, code_bytes<kBits>(n));
    float* absmax = c.buf<float>("absmax", Role::In, ceil_div(n, bs));
    T* out = c.buf<T>("out", Role::Out, n);
    void* stream = c.stream();
    blockwise_rules<kBits>(c, bs, n, code, A, absmax, out);
    if (n > 0) {
        c.maybe_overlap(out, "out", A, "A");
        c.maybe_overlap(out, "out", absmax, "absmax");
        if constexpr (kCodeTable<kBits>) c.maybe_overlap(out, "out", code, "code");
    }
    c.run([&] { return f(code, A, absmax, out, bs, n, stream); });
}

// kbit_quantize_4bit / kbit_quantize_blockwise_8bit and their dequantizers: a quant_type (4-bit) or a
// code table (8-bit), a dtype and int64 sizes.
template <int kBits, bool kQuantize>
using KbitBlockwiseFn = std::conditional_t<
    kBits == 4, std::conditional_t<kQuantize, decltype(&kbit_quantize_4bit), decltype(&kbit_dequantize_4bit)>,
    std::conditional_t<kQuantize, decltype(&kbit_quantize_blockwise_8bit), decltype(&kbit_dequantize_blockwise_8bit)>>;

// The rules both directions share: a bad selector, n out of range and an unsupported blocksize fail, so
// does a NULL buffer with n > 0; n == 0 with valid scalars succeeds without writing.
template <int kBits>
void kbit_blockwise_rules(Call& c, int32_t qt, int32_t dtype, int64_t bs, int64_t n, const void* code,
                          const void* A, const void* absmax, const void* out) {
    const bool bad = (!kCodeTable<kBits> && !valid_quant_type(qt)) || !valid_dtype(dtype) || n < 0 ||
                     n > kMaxElements || !blocksize_ok<kBits>(bs);
    c.must_fail(bad, "bad selector, n out of range or unsupported blocksize");
    c.must_fail(n > 0 && ((kCodeTable<kBits> && !code) || !A || !absmax || !out), "NULL buffer with n > 0");
    c.must_succeed_untouched(!bad && n == 0);
}

// One side of a conversion: n elements of the dtype, or their code_bytes(n) packed codes.
template <int kBits, bool kElements>
auto conversion_buf(Call& c, const char* name, Role role, int32_t dtype, int64_t n) {
    if constexpr (kElements) return dtype_buf(c, name, role, dtype, n);
    else return c.buf<uint8_t>(name, role, code_bytes<kBits>(n));
}

// Quantize: A n elements of dtype, absmax ceil(n / blocksize) written, out code_bytes(n); dequantize:
// A code_bytes(n), absmax read, out n elements of dtype.
template <int kBits, bool kQuantize>
void kbit_blockwise(Call& c, KbitBlockwiseFn<kBits, kQuantize> f) {
    const int32_t qt = kCodeTable<kBits> ? 0 : c.selector("quant_type", {KBIT_QUANT_FP4, KBIT_QUANT_NF4});
    const int32_t dtype = c.selector("dtype", {KBIT_DTYPE_FP32, KBIT_DTYPE_FP16, KBIT_DTYPE_BF16});
    const int64_t bs = c.i64("blocksize"), n = c.i64("n");
    float* code = kCodeTable<kBits> ? c.buf<float>("code", Role::In, 256) : nullptr;
    auto* A = conversion_buf<kBits, kQuantize>(c, "A", Role::In, dtype, n);
    float* absmax = c.buf<float>("absmax", kQuantize ? Role::Out : Role::In, ceil_div(n, bs));
    auto* out = conversion_buf<kBits, !kQuantize>(c, "out", Role::Out, dtype, n);
    void* stream = c.stream();
    kbit_blockwise_rules<kBits>(c, qt, dtype, bs, n, code, A, absmax, out);
    if (n > 0) {
        c.maybe_overlap(out, "out", A, "A");
        // The second: the output against the code table where there is one, else quantize's absmax
        // against A and dequantize's output against absmax.
        if (kCodeTable<kBits> && kQuantize) c.maybe_overlap(absmax, "absmax", code, "code");
        else if (kCodeTable<kBits>) c.maybe_overlap(out, "out", code, "code");
        else if (kQuantize) c.maybe_overlap(absmax, "absmax", A, "A");
        else c.maybe_overlap(out, "out", absmax, "absmax");
    }
    c.run([&] {
        if constexpr (kCodeTable<kBits>) return f(dtype, code, A, absmax, out, bs, n, stream);
        else return f(qt, dtype, A, absmax, out, bs, n, stream);
    });
}

// The handler of a blockwise (de)quantizer of the kBits list (cquantize_blockwise_<dt>[_<fmt>],
// cdequantize_blockwise_<dt>[_<fmt>], kbit_quantize_4bit, ...), or nullptr for another function.
template <int kBits>
Handler resolve_blockwise(const Fn& fn) {
    const std::string name = fn.name;
    auto dt_after = [&](const char* prefix) {  // "<prefix><dt>" and "<prefix><dt>_<fmt>" names
        const std::string rest = name.substr(std::strlen(prefix));
        return rest.substr(0, rest.find('_'));
    };
    if (starts_with(name, "cquantize_blockwise_"))
        return by_dtype(dt_after("cquantize_blockwise_"), [&](auto t) {
            using T = decltype(t);
            return bind<kbit_status (*)(float*, T*, float*, unsigned char*, int, int)>(fn, quantize_blockwise<kBits, T>);
        });
    if (starts_with(name, "cdequantize_blockwise_"))
        return by_dtype(dt_after("cdequantize_blockwise_"), [&](auto t) {
            using T = decltype(t);
            return bind<kbit_status (*)(float*, unsigned char*, float*, T*, int, int, void*)>(
                fn, dequantize_blockwise<kBits, T>);
        });
    const bool is4 = kBits == 4;
    if (name == (is4 ? "kbit_quantize_4bit" : "kbit_quantize_blockwise_8bit"))
        return bind<KbitBlockwiseFn<kBits, true>>(fn, kbit_blockwise<kBits, true>);
    if (name == (is4 ? "kbit_dequantize_4bit" : "kbit_dequantize_blockwise_8bit"))
        return bind<KbitBlockwiseFn<kBits, false>>(fn, kbit_blockwise<kBits, false>);
    return nullptr;
}

}  // namespace kfuzz
