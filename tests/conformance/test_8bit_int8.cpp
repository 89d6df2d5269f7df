// LLM.int8 element functions: row-wise int8 quantization (with and without outliers), the outlier
// columns of kbit_int8_vectorwise_quant, the int32 product's fp16 dequantization and the fp16 outlier
// product — against the scalar reference byte for byte, plus independent checks of the formulas.
#include <catch2/catch.hpp>

#include "kbit_int8_rules.h"
#include "ref_8bit.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

// Activations with a few large-magnitude columns, NaN / Inf, zero rows and an all-outlier row.
std::vector<float> activations(int64_t rows, int64_t cols, uint32_t seed) {
    std::vector<float> a = normal_floats(static_cast<size_t>(rows * cols), seed, 1.5f);
    std::mt19937 rng(seed + 1);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c : {int64_t{3}, cols / 2, cols - 1})
            if (c < cols) a[r * cols + c] *= 25.0f;  // outlier columns
        switch (r % 11) {
            case 1: for (int64_t c = 0; c < cols; ++c) a[r * cols + c] = 0.0f; break;
            case 2: for (int64_t c = 0; c < cols; ++c) a[r * cols + c] = (c % 2 ? 7.0f : -9.0f); break;
            case 3: a[r * cols + cols / 3] = NAN; break;
            case 4: a[r * cols + cols / 4] = INFINITY; break;
            case 5: a[r * cols] = 6.0f; a[r * cols + cols - 1] = -6.0f; break;  // exactly the threshold
            case 6: a[r * cols] = 65504.0f; break;
            default: break;
        }
    }
    return a;
}

struct VectorQuantResult {
    std::vector<int8_t> out;
    std::vector<float> stats;
};

VectorQuantResult backend_vector_quant(const std::vector<kbit_half>& A, float threshold, int rows, int cols) {
    DeviceBuffer<kbit_half> dA(A);
    DeviceBuffer<int8_t> dout(A.size());
    DeviceBuffer<float> dstats(static_cast<size_t>(rows));
    require_ok(backend().fns_8bit.cint8_vector_quant(dA.get(), dout.get(), dstats.get(), threshold, rows, cols, nullptr),
               "cint8_vector_quant");
    CHECK(first_bit_difference(dA.download(), A) < 0);
    return {dout.download(), dstats.download()};
}

}  // namespace

TEST_CASE("8bit int8: cint8_vector_quant equals the reference, thresholds 0, 6 and a non-fp16 one", "[8bit][int8]"
          "[fn:cint8_vector_quant]") {
    for (float threshold : {0.0f, 6.0f, 6.001f, INFINITY})
        for (auto [rows, cols] : {std::pair{1, 1}, std::pair{3, 7}, std::pair{33, 100}, std::pair{64, 4096},
                                  std::pair{700, 129}}) {
            INFO("threshold " << threshold << " rows " << rows << " cols " << cols);
            const auto A = to_elems<kbit_half>(activations(rows, cols, 5));
            std::vector<int8_t> want(A.size());
            std::vector<float> want_stats(static_cast<size_t>(rows));
            kbit::ref::int8_vector_quant(A.data(), want.data(), want_stats.data(), threshold, rows, cols);
            const auto got = backend_vector_quant(A, threshold, rows, cols);
            CHECK(first_bit_difference(got.out, want) < 0);
            CHECK(first_bit_difference(got.stats, want_stats) < 0);
        }
}

TEST_CASE("8bit int8: cint8_vector_quant follows the LLM.int8 formula (independent check), threshold 6", "[8bit][int8]"
          "[fn:cint8_vector_quant]") {
    const int rows = 40, cols = 301;
    const auto A = to_elems<kbit_half>(activations(rows, cols, 8));
    const auto got = backend_vector_quant(A, 6.0f, rows, cols);
    for (int r = 0; r < rows; ++r) {
        float amax = 0.0f;
        for (int c = 0; c < cols; ++c) {
            const float v = std::fabs(kbit::half_to_float(A[r * cols + c].bits));
            if (v < 6.0f && v > amax) amax = v;
        }
        INFO("row " << r);
        REQUIRE(got.stats[r] == amax);
        for (int c = 0; c < cols; ++c) {
            const float a = kbit::half_to_float(A[r * cols + c].bits);
            const int8_t q = got.out[r * cols + c];
            if (!(std::fabs(a) < 6.0f)) {
                REQUIRE(q == 0);  // outliers, NaN and Inf are not quantized
            } else if (amax > 0.0f) {
                REQUIRE(std::abs(int(q)) <= 127);
                REQUIRE(std::fabs(a * 127.0f / amax - q) <= 0.5f + 1e-4f);
            } else {
                REQUIRE(q == 0);
            }
        }
    }
}

// The shared element rules themselves (kbit_int8_rules.h), which every backend and the reference call.
TEST_CASE("8bit int8: the quantizer's float -> int8 rule wraps the low byte, ties to even, NaN -> 0", "[8bit][int8]") {
    CHECK(kbit::int8_low_byte_rn(200.0f) == static_cast<int8_t>(200 - 256));  // bitsandbytes' wrap
    CHECK(kbit::int8_low_byte_rn(2.5f) == 2);
    CHECK(kbit::int8_low_byte_rn(-3.5f) == -4);
    CHECK(kbit::int8_low_byte_rn(NAN) == 0);
    CHECK(kbit::int8_low_byte_rn(1e10f) == static_cast<int8_t>(0xFF));   // saturates to INT32_MAX first
    CHECK(kbit::int8_low_byte_rn(-1e10f) == 0);                          // INT32_MIN: low byte 0
    CHECK(kbit::int8_threshold_fp16(6.0f) == 6.0f);
    CHECK(kbit::int8_threshold_fp16(6.001f) == 6.0f);                   // fp16 spacing at 6 is 2^-8
    CHECK(kbit::int8_quantize_element(6.0f, 1.0f, 6.0f) == 0);          // |a| >= threshold: outlier
    CHECK(kbit::int8_quantize_element(6.0f, 1.0f, 0.0f) == 6);          // threshold 0: no outliers
}

TEST_CASE("8bit int8: kbit_int8_vectorwise_quant flags outlier columns and zeroes them", "[8bit][int8]"
          "[fn:kbit_int8_vectorwise_quant]") {
    for (auto [rows, cols] : {std::pair{1, 50}, std::pair{2, 9}, std::pair{37, 515}, std::pair{128, 4096}}) {
        for (float threshold : {0.0f, 6.0f}) {
            INFO("rows " << rows << " cols " << cols << " threshold " << threshold);
            const auto A = to_elems<kbit_half>(activations(rows, cols, 13));
            std::vector<int8_t> want(A.size());
            std::vector<float> want_stats(static_cast<size_t>(rows));
            std::vector<uint8_t> want_cols(static_cast<size_t>(cols));
            kbit::ref::int8_vector_quant(A.data(), want.data(), want_stats.data(), threshold, rows, cols);
            kbit::ref::int8_outlier_columns(A.data(), want.data(), want_cols.data(), threshold, rows, cols);

            DeviceBuffer<kbit_half> dA(A);
            DeviceBuffer<int8_t> dout(A.size());
            DeviceBuffer<float> dstats(static_cast<size_t>(rows));
            DeviceBuffer<uint8_t> dcols(static_cast<size_t>(cols));
            dcols.fill_bytes(0xAB);
            require_ok(backend().fns_8bit.kbit_int8_vectorwise_quant(dA.get(), dout.get(), dstats.get(), dcols.get(), threshold,
                                                               rows, cols, nullptr),
                       "kbit_int8_vectorwise_quant");
            const auto out = dout.download();
            const auto flags = dcols.download();
            CHECK(first_bit_difference(out, want) < 0);
            CHECK(first_bit_difference(dstats.download(), want_stats) < 0);
            CHECK(flags == want_cols);
            // Independently: a column is an outlier exactly when some |a| >= 6 (fp16 compare).
            for (int c = 0; c < cols; ++c) {
                bool outlier = false;
                for (int r = 0; r < rows; ++r)
                    outlier |= threshold > 0 && std::fabs(kbit::half_to_float(A[r * cols + c].bits)) >= threshold;
                REQUIRE(flags[c] == (outlier ? 1 : 0));
                if (outlier && rows > 1)
                    for (int r = 0; r < rows; ++r) REQUIRE(out[r * cols + c] == 0);
            }
        }
    }
}

TEST_CASE("8bit int8: kbit_int8_vectorwise_quant with threshold 0 accepts NULL outlier_cols", "[8bit][int8]"
          "[fn:kbit_int8_vectorwise_quant]") {
    const int rows = 5, cols = 17;
    const auto A = to_elems<kbit_half>(activations(rows, cols, 2));
    DeviceBuffer<kbit_half> dA(A);
    DeviceBuffer<int8_t> dout(A.size());
    DeviceBuffer<float> dstats(rows);
    require_ok(backend().fns_8bit.kbit_int8_vectorwise_quant(dA.get(), dout.get(), dstats.get(), nullptr, 0.0f, rows, cols,
                                                       nullptr),
               "kbit_int8_vectorwise_quant");
    std::vector<int8_t> want(A.size());
    std::vector<float> want_stats(rows);
    kbit::ref::int8_vector_quant(A.data(), want.data(), want_stats.data(), 0.0f, rows, cols);
    CHECK(dout.download() == want);
}

TEST_CASE("8bit int8: kbit_int8_vectorwise_quant with no rows clears the outlier flags", "[8bit][int8]"
          "[fn:kbit_int8_vectorwise_quant]") {
    DeviceBuffer<uint8_t> dcols(10);
    dcols.fill_bytes(0x5A);
    require_ok(backend().fns_8bit.kbit_int8_vectorwise_quant(nullptr, nullptr, nullptr, dcols.get(), 6.0f, 0, 10, nullptr),
               "kbit_int8_vectorwise_quant");
    CHECK(dcols.download() == std::vector<uint8_t>(10, 0));
}

TEST_CASE("8bit int8: cdequant_mm_int32_fp16 equals the reference, with and without bias", "[8bit][int8]"
          "[fn:cdequant_mm_int32_fp16]") {
    CHECK(kbit::float_bits(kbit::kMmDequantScale) == 0x38820610u);
    CHECK(kbit::kMmDequantScale == 6.200012e-05f);
    for (auto [rows, cols] : {std::pair{1, 1}, std::pair{3, 13}, std::pair{64, 4096}, std::pair{513, 77}}) {
        std::mt19937 rng(static_cast<uint32_t>(rows * 31 + cols));
        std::uniform_int_distribution<int32_t> big(-2000000, 2000000);
        std::vector<int32_t> A(static_cast<size_t>(rows * cols));
        for (size_t i = 0; i < A.size(); ++i) A[i] = (i % 17 == 0) ? 0 : big(rng);
        A[0] = INT32_MAX;
        auto rs = normal_floats(static_cast<size_t>(rows), 3, 4.0f);
        auto cs = normal_floats(static_cast<size_t>(cols), 4, 0.1f);
        for (auto& v : rs) v = std::fabs(v);
        for (auto& v : cs) v = std::fabs(v);
        rs[0] = -rs[0];  // signed zero products: fma(-0, c, +0) = +0
        const auto bias = to_elems<kbit_half>(normal_floats(static_cast<size_t>(cols), 5));
        for (bool with_bias : {false, true}) {
            INFO("rows " << rows << " cols " << cols << " bias " << with_bias);
            std::vector<kbit_half> want(A.size());
            kbit::ref::dequant_mm_int32_fp16(A.data(), rs.data(), cs.data(), want.data(), with_bias ? bias.data() : nullptr,
                                             rows, cols);
            DeviceBuffer<int32_t> dA(A);
            DeviceBuffer<float> drs(rs), dcs(cs);
            DeviceBuffer<kbit_half> dbias(bias), dout(A.size());
            require_ok(backend().fns_8bit.cdequant_mm_int32_fp16(dA.get(), drs.get(), dcs.get(), dout.get(),
                                                           with_bias ? dbias.get() : nullptr, rows, cols, nullptr),
                       "cdequant_mm_int32_fp16");
            const auto got = dout.download();
            CHECK(first_bit_difference(got, want) < 0);
            // The formula, evaluated here independently of the reference.
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c) {
                    const float x = static_cast<float>(A[r * cols + c]) * rs[r] * cs[c];
                    const float b = with_bias ? kbit::half_to_float(bias[c].bits) : 0.0f;
                    REQUIRE(got[r * cols + c].bits == kbit::float_to_half(std::fma(x, 0x1.040c20p-14f, b)));
                }
        }
    }
}

TEST_CASE("8bit int8: kbit_int8_outlier_matmul_fp16 equals the reference", "[8bit][int8]"
          "[fn:kbit_int8_outlier_matmul_fp16]") {
    for (auto [rows, outs, ins] : {std::tuple{1, 1, 1}, std::tuple{4, 9, 33}, std::tuple{16, 300, 129},
                                   std::tuple{70, 64, 512}}) {
        INFO("rows " << rows << " out " << outs << " in " << ins);
        const auto A = to_elems<kbit_half>(activations(rows, ins, 21));
        std::vector<int8_t> W(static_cast<size_t>(outs * ins));
        std::mt19937 rng(22);
        for (auto& w : W) w = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        auto stats = normal_floats(static_cast<size_t>(outs), 23, 0.05f);
        for (auto& s : stats) s = std::fabs(s);
        std::vector<uint8_t> flags(static_cast<size_t>(ins), 0);
        for (int c = 0; c < ins; c += 5) flags[c] = 1;
        const auto out0 = to_elems<kbit_half>(normal_floats(static_cast<size_t>(rows * outs), 24));
        std::vector<kbit_half> want = out0;
        kbit::ref::int8_outlier_matmul_fp16(A.data(), W.data(), stats.data(), flags.data(), want.data(), rows, outs, ins);
        CHECK(first_bit_difference(backend_outlier_matmul(A, W, stats, flags, out0, rows, outs, ins), want) < 0);
    }
}

TEST_CASE("8bit int8: kbit_int8_outlier_matmul_fp16 without outlier columns leaves out untouched", "[8bit][int8]"
          "[fn:kbit_int8_outlier_matmul_fp16]") {
    const int rows = 3, outs = 20, ins = 40;
    const auto A = to_elems<kbit_half>(normal_floats(rows * ins, 1));
    std::vector<int8_t> W(outs * ins, 5);
    std::vector<float> stats(outs, 1.0f);
    std::vector<kbit_half> out0 = to_elems<kbit_half>(normal_floats(rows * outs, 2));
    out0[0].bits = 0x8000;  // -0.0 stays -0.0: the empty sum is -0.0, the additive identity
    const std::vector<uint8_t> no_outliers(ins, 0);
    CHECK(first_bit_difference(backend_outlier_matmul(A, W, stats, no_outliers, out0, rows, outs, ins), out0) < 0);
}
