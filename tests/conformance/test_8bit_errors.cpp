// Bad input on every 8-bit function: the exact status and message (the rules of
// src/common/kbit_validate_8bit.h, identical on every backend), and outputs left untouched.
#include <catch2/catch.hpp>

#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

constexpr uint8_t kSentinel = 0xA5;
// The blocksizes the backend's 8-bit minor takes (8bit 1.1 added 8192 and 16384), as the message lists them.
std::string blocks_msg() {
    return backend8bit_minor() >= 1 ? "is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384"
                                    : "is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096";
}
const std::string kNotLive = "context is not a live context of this backend (already destroyed, or not made by its get_context())";

// Output buffers filled with a sentinel; untouched() says whether they still hold it.
template <class T>
struct Out {
    DeviceBuffer<T> buf;
    explicit Out(size_t n) : buf(n) { buf.fill_bytes(kSentinel); }
    T* get() { return buf.get(); }
    bool untouched() const {
        for (uint8_t b : buf.bytes())
            if (b != kSentinel) return false;
        return true;
    }
};

}  // namespace

TEMPLATE_TEST_CASE("8bit errors: cquantize_blockwise / cdequantize_blockwise reject bad input", "[8bit][errors]"
                   FN_8BIT_QUANTIZE FN_8BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    const std::string q = std::string("cquantize_blockwise_") + kbit::Elem<TestType>::name;
    const std::string d = std::string("cdequantize_blockwise_") + kbit::Elem<TestType>::name;
    DeviceBuffer<float> code(dynamic_map(true));
    DeviceBuffer<TestType> in(256);
    DeviceBuffer<uint8_t> codes(256);
    DeviceBuffer<float> absmax_in(4);
    Out<float> absmax(4);
    Out<uint8_t> out(256);
    Out<TestType> deq(256);
    using B = Blockwise8<TestType>;
    check_invalid(B::quantize(nullptr, in.get(), absmax.get(), out.get(), 64, 256), q + ": code is NULL");
    check_invalid(B::quantize(code.get(), nullptr, absmax.get(), out.get(), 64, 256), q + ": A is NULL");
    check_invalid(B::quantize(code.get(), in.get(), nullptr, out.get(), 64, 256), q + ": absmax is NULL");
    check_invalid(B::quantize(code.get(), in.get(), absmax.get(), nullptr, 64, 256), q + ": out is NULL");
    check_invalid(B::quantize(code.get(), in.get(), absmax.get(), out.get(), 64, -1), q + ": n is -1, must be >= 0");
    for (int bs : {0, -64, 16, 48, 100, 12288, 32768})
        check_invalid(B::quantize(code.get(), in.get(), absmax.get(), out.get(), bs, 256),
                      q + ": blocksize " + std::to_string(bs) + " " + blocks_msg());
    if (backend8bit_minor() == 0)  // 8bit 1.0 stops at 4096
        for (int bs : {8192, 16384})
            check_invalid(B::quantize(code.get(), in.get(), absmax.get(), out.get(), bs, 256),
                          q + ": blocksize " + std::to_string(bs) + " " + blocks_msg());
    CHECK(absmax.untouched());
    CHECK(out.untouched());

    check_invalid(B::dequantize(nullptr, codes.get(), absmax_in.get(), deq.get(), 64, 256), d + ": code is NULL");
    check_invalid(B::dequantize(code.get(), nullptr, absmax_in.get(), deq.get(), 64, 256), d + ": A is NULL");
    check_invalid(B::dequantize(code.get(), codes.get(), nullptr, deq.get(), 64, 256), d + ": absmax is NULL");
    check_invalid(B::dequantize(code.get(), codes.get(), absmax_in.get(), nullptr, 64, 256), d + ": out is NULL");
    check_invalid(B::dequantize(code.get(), codes.get(), absmax_in.get(), deq.get(), 64, -7), d + ": n is -7, must be >= 0");
    check_invalid(B::dequantize(code.get(), codes.get(), absmax_in.get(), deq.get(), 24, 256), d + ": blocksize 24 " + blocks_msg());
    CHECK(deq.untouched());

    // In place is refused, and so is any overlap of an output with an input or another output.
    const std::string overlap = " (in-place or overlapping buffers are not supported)";
    check_invalid(B::dequantize(code.get(), out.get(), absmax_in.get(), reinterpret_cast<TestType*>(out.get()), 64, 256),
                  d + ": out overlaps A" + overlap);
    check_invalid(B::dequantize(code.get(), codes.get(), absmax_in.get(), reinterpret_cast<TestType*>(code.get()), 64, 256),
                  d + ": out overlaps code" + overlap);
    check_invalid(B::quantize(code.get(), in.get(), absmax.get(), reinterpret_cast<uint8_t*>(in.get()) + 1, 64, 256),
                  q + ": out overlaps A" + overlap);
    check_invalid(B::quantize(code.get(), in.get(), absmax.get(), reinterpret_cast<uint8_t*>(absmax.get()), 64, 16),
                  q + ": out overlaps absmax" + overlap);
    CHECK(absmax.untouched());
    CHECK(out.untouched());
}

TEST_CASE("8bit errors: kbit_quantize_blockwise_8bit / kbit_dequantize_blockwise_8bit reject bad input",
          "[8bit][errors]" "[fn:kbit_quantize_blockwise_8bit][fn:kbit_dequantize_blockwise_8bit]") {
    const auto& b = backend().fns_8bit;
    const std::string q = "kbit_quantize_blockwise_8bit", d = "kbit_dequantize_blockwise_8bit";
    DeviceBuffer<float> code(dynamic_map(true)), in(256), absmax_in(4);
    DeviceBuffer<uint8_t> codes(256);
    Out<float> absmax(4), deq(256);
    Out<uint8_t> out(256);
    const int64_t too_many = (int64_t{1} << 62) + 1;
    const std::string dtype_rule = " is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)";
    const std::string n_rule = "n is 4611686018427387905, must be <= 4611686018427387904";
    // One call per case: a bad scalar, or the buffer `null` passed as NULL; the function's name comes
    // before the message.
    enum Arg { kNone, kCode, kA, kAbsmax, kOut };
    struct Case {
        bool quantize;  // kbit_quantize_blockwise_8bit, else kbit_dequantize_blockwise_8bit
        int32_t dtype;
        int64_t blocksize, n;
        Arg null;
        std::string message;
    };
    const Case cases[] = {
        {true, 3, 64, 256, kNone, "dtype 3" + dtype_rule},
        {true, -1, 64, 256, kNone, "dtype -1" + dtype_rule},
        {true, 0, 64, too_many, kNone, n_rule},
        {true, 0, 64, -2, kNone, "n is -2, must be >= 0"},
        {true, 1, int64_t{1} << 33, 256, kNone, "blocksize 8589934592 " + blocks_msg()},
        {true, 2, 64, 256, kCode, "code is NULL"},
        {true, 2, 64, 256, kA, "A is NULL"},
        {true, 0, 64, 256, kAbsmax, "absmax is NULL"},
        {true, 0, 64, 256, kOut, "out is NULL"},
        {false, 7, 64, 256, kNone, "dtype 7" + dtype_rule},
        {false, 0, 64, too_many, kNone, n_rule},
        {false, 0, 31, 256, kNone, "blocksize 31 " + blocks_msg()},
        {false, 0, 64, 256, kCode, "code is NULL"},
        {false, 0, 64, 256, kA, "A is NULL"},
        {false, 0, 64, 256, kAbsmax, "absmax is NULL"},
        {false, 0, 64, 256, kOut, "out is NULL"},
    };
    for (const Case& c : cases) {
        auto pass = [&](Arg arg, auto* p) { return c.null == arg ? nullptr : p; };
        const kbit_status s =
            c.quantize ? b.kbit_quantize_blockwise_8bit(c.dtype, pass(kCode, code.get()), pass(kA, in.get()),
                                                        pass(kAbsmax, absmax.get()), pass(kOut, out.get()),
                                                        c.blocksize, c.n, nullptr)
                       : b.kbit_dequantize_blockwise_8bit(c.dtype, pass(kCode, code.get()), pass(kA, codes.get()),
                                                          pass(kAbsmax, absmax_in.get()), pass(kOut, deq.get()),
                                                          c.blocksize, c.n, nullptr);
        check_invalid(s, (c.quantize ? q : d) + ": " + c.message);
    }
    CHECK(absmax.untouched());
    CHECK(out.untouched());
    CHECK(deq.untouched());
}

TEST_CASE("8bit errors: cint8_vector_quant rejects bad input", "[8bit][errors]" "[fn:cint8_vector_quant]") {
    const auto& b = backend().fns_8bit;
    const std::string f = "cint8_vector_quant: ";
    DeviceBuffer<kbit_half> A(64);
    Out<int8_t> out(64);
    Out<float> stats(8);
    check_invalid(b.cint8_vector_quant(nullptr, out.get(), stats.get(), 0.0f, 8, 8, nullptr), f + "A is NULL");
    check_invalid(b.cint8_vector_quant(A.get(), nullptr, stats.get(), 0.0f, 8, 8, nullptr), f + "out is NULL");
    check_invalid(b.cint8_vector_quant(A.get(), out.get(), nullptr, 0.0f, 8, 8, nullptr), f + "rowStats is NULL");
    check_invalid(b.cint8_vector_quant(A.get(), out.get(), stats.get(), 0.0f, -1, 8, nullptr), f + "rows is -1, must be >= 0");
    check_invalid(b.cint8_vector_quant(A.get(), out.get(), stats.get(), 0.0f, 8, -3, nullptr), f + "cols is -3, must be >= 0");
    check_invalid(b.cint8_vector_quant(A.get(), out.get(), stats.get(), 0.0f, 65536, 65536, nullptr),
                  f + "rows * cols is 4294967296, must be <= 2147483647");
    check_invalid(b.cint8_vector_quant(A.get(), out.get(), stats.get(), -1.0f, 8, 8, nullptr), f + "threshold is -1, must be >= 0");
    check_invalid(b.cint8_vector_quant(A.get(), out.get(), stats.get(), NAN, 8, 8, nullptr), f + "threshold is nan, must be >= 0");
    CHECK(out.untouched());
    CHECK(stats.untouched());
}

TEST_CASE("8bit errors: kbit_int8_vectorwise_quant rejects bad input", "[8bit][errors]"
          "[fn:kbit_int8_vectorwise_quant]") {
    const auto& b = backend().fns_8bit;
    const std::string f = "kbit_int8_vectorwise_quant: ";
    DeviceBuffer<kbit_half> A(64);
    Out<int8_t> out(64);
    Out<float> stats(8);
    Out<uint8_t> cols(8);
    check_invalid(b.kbit_int8_vectorwise_quant(nullptr, out.get(), stats.get(), cols.get(), 6.0f, 8, 8, nullptr), f + "A is NULL");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), nullptr, stats.get(), cols.get(), 6.0f, 8, 8, nullptr), f + "out is NULL");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), nullptr, cols.get(), 6.0f, 8, 8, nullptr),
                  f + "rowStats is NULL");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), stats.get(), nullptr, 6.0f, 8, 8, nullptr),
                  f + "outlier_cols is NULL");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), stats.get(), cols.get(), 6.0f, -2, 8, nullptr),
                  f + "rows is -2, must be >= 0");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), stats.get(), cols.get(), 6.0f, 8, -9, nullptr),
                  f + "cols is -9, must be >= 0");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), stats.get(), cols.get(), 6.0f, int64_t{1} << 32,
                                               int64_t{1} << 31, nullptr),
                  f + "rows * cols is 4294967296 x 2147483648, must be <= 4611686018427387904");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), stats.get(), cols.get(), -0.5f, 8, 8, nullptr),
                  f + "threshold is -0.5, must be >= 0");
    check_invalid(b.kbit_int8_vectorwise_quant(A.get(), out.get(), stats.get(), cols.get(), NAN, 8, 8, nullptr),
                  f + "threshold is nan, must be >= 0");
    CHECK(out.untouched());
    CHECK(stats.untouched());
    CHECK(cols.untouched());
}

TEST_CASE("8bit errors: cigemmlt_32 / _8 / _8_rowscale reject bad input", "[8bit][errors]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32][fn:cigemmlt_8][fn:cigemmlt_8_rowscale]") {
    const auto& b = backend().fns_8bit;
    using Fn = kbit_status (*)(kbit_context*, int, int, int, const int8_t*, const int8_t*, void*, float*, int, int, int,
                               void*);
    const std::pair<const char*, Fn> fns[] = {{"cigemmlt_32", b.cigemmlt_32},
                                              {"cigemmlt_8", b.cigemmlt_8},
                                              {"cigemmlt_8_rowscale", b.cigemmlt_8_rowscale}};
    kbit_context* ctx = b.get_context();
    REQUIRE(ctx != nullptr);
    DeviceBuffer<int8_t> A(4 * 8), B(5 * 8);
    DeviceBuffer<float> scale(4);
    Out<int32_t> C(5 * 4);
    for (auto [name, fn] : fns) {
        const std::string f = std::string(name) + ": ";
        float* rs = scale.get();
        // m = 8 (K), n = 5 (rows of B and C), k = 4 (rows of A)
        check_invalid(fn(nullptr, 8, 5, 4, A.get(), B.get(), C.get(), rs, 8, 8, 4, nullptr), f + "context is NULL");
        check_invalid(fn(ctx, -1, 5, 4, A.get(), B.get(), C.get(), rs, 8, 8, 4, nullptr), f + "m is -1, must be >= 0");
        check_invalid(fn(ctx, 8, -5, 4, A.get(), B.get(), C.get(), rs, 8, 8, 4, nullptr), f + "n is -5, must be >= 0");
        check_invalid(fn(ctx, 8, 5, -4, A.get(), B.get(), C.get(), rs, 8, 8, 4, nullptr), f + "k is -4, must be >= 0");
        check_invalid(fn(ctx, 8, 5, 4, A.get(), B.get(), C.get(), rs, 7, 8, 4, nullptr), f + "lda is 7, must be >= m = 8");
        check_invalid(fn(ctx, 8, 5, 4, A.get(), B.get(), C.get(), rs, 8, 3, 4, nullptr), f + "ldb is 3, must be >= m = 8");
        check_invalid(fn(ctx, 8, 5, 4, A.get(), B.get(), C.get(), rs, 8, 8, 2, nullptr), f + "ldc is 2, must be >= k = 4");
        check_invalid(fn(ctx, 8, 5, 4, nullptr, B.get(), C.get(), rs, 8, 8, 4, nullptr), f + "A is NULL");
        check_invalid(fn(ctx, 8, 5, 4, A.get(), nullptr, C.get(), rs, 8, 8, 4, nullptr), f + "B is NULL");
        check_invalid(fn(ctx, 8, 5, 4, A.get(), B.get(), nullptr, rs, 8, 8, 4, nullptr), f + "C is NULL");
        // A struct that get_context() did not make.
        uint64_t fake[8] = {};
        check_invalid(fn(reinterpret_cast<kbit_context*>(fake), 8, 5, 4, A.get(), B.get(), C.get(), rs, 8, 8, 4, nullptr),
                      f + kNotLive);
    }
    check_invalid(b.cigemmlt_8_rowscale(ctx, 8, 5, 4, A.get(), B.get(), C.get(), nullptr, 8, 8, 4, nullptr),
                  "cigemmlt_8_rowscale: row_scale is NULL");
    CHECK(C.untouched());
    uint64_t fake[8] = {};
    check_invalid(b.kbit_context_destroy(reinterpret_cast<kbit_context*>(fake)), "kbit_context_destroy: " + kNotLive);
    CHECK(b.kbit_context_destroy(ctx) == KBIT_STATUS_SUCCESS);
    // A destroyed context is refused without reading it (it once was a use after free).
    check_invalid(b.kbit_context_destroy(ctx), "kbit_context_destroy: " + kNotLive);
    check_invalid(b.cigemmlt_32(ctx, 8, 5, 4, A.get(), B.get(), C.get(), nullptr, 8, 8, 4, nullptr),
                  "cigemmlt_32: " + kNotLive);
    CHECK(C.untouched());
}

TEST_CASE("8bit errors: cdequant_mm_int32_fp16 rejects bad input", "[8bit][errors]" "[fn:cdequant_mm_int32_fp16]") {
    const auto& b = backend().fns_8bit;
    const std::string f = "cdequant_mm_int32_fp16: ";
    DeviceBuffer<int32_t> A(12);
    DeviceBuffer<float> rs(3), cs(4);
    Out<kbit_half> out(12);
    check_invalid(b.cdequant_mm_int32_fp16(nullptr, rs.get(), cs.get(), out.get(), nullptr, 3, 4, nullptr), f + "A is NULL");
    check_invalid(b.cdequant_mm_int32_fp16(A.get(), nullptr, cs.get(), out.get(), nullptr, 3, 4, nullptr),
                  f + "rowStats is NULL");
    check_invalid(b.cdequant_mm_int32_fp16(A.get(), rs.get(), nullptr, out.get(), nullptr, 3, 4, nullptr),
                  f + "colStats is NULL");
    check_invalid(b.cdequant_mm_int32_fp16(A.get(), rs.get(), cs.get(), nullptr, nullptr, 3, 4, nullptr), f + "out is NULL");
    check_invalid(b.cdequant_mm_int32_fp16(A.get(), rs.get(), cs.get(), out.get(), nullptr, -3, 4, nullptr),
                  f + "numRows is -3, must be >= 0");
    check_invalid(b.cdequant_mm_int32_fp16(A.get(), rs.get(), cs.get(), out.get(), nullptr, 3, -4, nullptr),
                  f + "numCols is -4, must be >= 0");
    check_invalid(b.cdequant_mm_int32_fp16(A.get(), rs.get(), cs.get(), out.get(), nullptr, 100000, 30000, nullptr),
                  f + "numRows * numCols is 3000000000, must be <= 2147483647");
    CHECK(out.untouched());
}

TEST_CASE("8bit errors: kbit_int8_outlier_matmul_fp16 rejects bad input", "[8bit][errors]"
          "[fn:kbit_int8_outlier_matmul_fp16]") {
    const auto& b = backend().fns_8bit;
    const std::string f = "kbit_int8_outlier_matmul_fp16: ";
    DeviceBuffer<kbit_half> A(2 * 8);
    DeviceBuffer<int8_t> W(3 * 8);
    DeviceBuffer<float> stats(3);
    DeviceBuffer<uint8_t> flags(std::vector<uint8_t>(8, 1));
    Out<kbit_half> out(2 * 3);
    check_invalid(b.kbit_int8_outlier_matmul_fp16(nullptr, W.get(), stats.get(), flags.get(), out.get(), 2, 3, 8, nullptr),
                  f + "A is NULL");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), nullptr, stats.get(), flags.get(), out.get(), 2, 3, 8, nullptr),
                  f + "W is NULL");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), nullptr, flags.get(), out.get(), 2, 3, 8, nullptr),
                  f + "W_stats is NULL");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), stats.get(), nullptr, out.get(), 2, 3, 8, nullptr),
                  f + "outlier_cols is NULL");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), stats.get(), flags.get(), nullptr, 2, 3, 8, nullptr),
                  f + "out is NULL");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), stats.get(), flags.get(), out.get(), -2, 3, 8, nullptr),
                  f + "rows is -2, must be >= 0");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), stats.get(), flags.get(), out.get(), 2, -3, 8, nullptr),
                  f + "out_features is -3, must be >= 0");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), stats.get(), flags.get(), out.get(), 2, 3, -8, nullptr),
                  f + "in_features is -8, must be >= 0");
    check_invalid(b.kbit_int8_outlier_matmul_fp16(A.get(), W.get(), stats.get(), flags.get(), out.get(), int64_t{1} << 40, 3,
                                                  int64_t{1} << 30, nullptr),
                  f + "rows * in_features is 1099511627776 x 1073741824, must be <= 4611686018427387904");
    CHECK(out.untouched());
}

// A zero dimension makes an empty call (success, nothing read or written), whatever the other sizes:
// the size checks once divided by it (SIGFPE).
TEST_CASE("8bit errors: a zero dimension is an empty call, never a division by zero", "[8bit][errors]"
          "[fn:cint8_vector_quant][fn:cdequant_mm_int32_fp16][fn:kbit_int8_vectorwise_quant]"
          "[fn:kbit_int8_outlier_matmul_fp16]") {
    const auto& b = backend().fns_8bit;
    Out<int8_t> out(64);
    Out<float> stats(8);
    Out<kbit_half> hout(64);
    CHECK(b.kbit_int8_vectorwise_quant(nullptr, nullptr, nullptr, nullptr, 0.0f, 0, 16, nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(b.kbit_int8_vectorwise_quant(nullptr, out.get(), stats.get(), nullptr, 0.0f, 4, 0, nullptr) ==
          KBIT_STATUS_SUCCESS);
    CHECK(b.cint8_vector_quant(nullptr, out.get(), stats.get(), 0.0f, 4, 0, nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(b.cint8_vector_quant(nullptr, out.get(), stats.get(), 0.0f, 0, 4, nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(b.cdequant_mm_int32_fp16(nullptr, nullptr, nullptr, hout.get(), nullptr, 3, 0, nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(b.cdequant_mm_int32_fp16(nullptr, nullptr, nullptr, hout.get(), nullptr, 0, 3, nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(b.kbit_int8_outlier_matmul_fp16(nullptr, nullptr, nullptr, nullptr, hout.get(), 4, 32, 0, nullptr) ==
          KBIT_STATUS_SUCCESS);
    CHECK(b.kbit_int8_outlier_matmul_fp16(nullptr, nullptr, nullptr, nullptr, hout.get(), 4, 0, 8, nullptr) ==
          KBIT_STATUS_SUCCESS);
    CHECK(out.untouched());
    CHECK(stats.untouched());
    CHECK(hout.untouched());
}
