// CUDA self-test: LLM.int8 functions (row-wise quantization with outliers, outlier columns, int32
// product dequantization, fp16 outlier product) and the int8 GEMM — exact bytes against kbit::ref,
// the GEMM on both of its paths (cuBLASLt for multiple-of-4 layouts, the exact fallback kernel for
// the rest) and beyond 2^31 (wrap-around).
#include <algorithm>

#include "ref_8bit.h"
#include "selftest_util.h"

TEST_CASE("cuda LLM.int8 row quantization, outlier columns and zeroing equal kbit::ref", "[cuda][int8]") {
    for (auto [rows, cols, thr] : {std::tuple<int, int, float>{1, 100, 0.0f}, {7, 1000, 0.0f}, {33, 4096, 3.0f},
                                   {1, 77, 2.5f}, {5, 300, 6.0f}, {4, 64, 2.7f}}) {
        INFO("rows " << rows << " cols " << cols << " threshold " << thr);
        std::vector<float> f = st::weights(int64_t{rows} * cols, static_cast<uint32_t>(rows + cols), false);
        for (auto& x : f) x *= 1.5f;
        if (rows > 2) for (int c = 0; c < cols; ++c) f[int64_t{2} * cols + c] = 0.0f;  // a zero row
        if (rows > 3) for (int c = 0; c < cols; ++c) f[int64_t{3} * cols + c] = 9.0f;  // an all-outlier row
        f[0] = std::nanf("");
        const std::vector<kbit_half> A = st::to_elems<kbit_half>(f);
        std::vector<float> want_stats(rows);
        std::vector<int8_t> want(int64_t{rows} * cols), want2;
        std::vector<uint8_t> want_cols(cols, 0);
        kbit::ref::int8_vector_quant(A.data(), want.data(), want_stats.data(), thr, rows, cols);
        want2 = want;
        kbit::ref::int8_outlier_columns(A.data(), want2.data(), want_cols.data(), thr, rows, cols);

        st::Buf<kbit_half> dA(A);
        st::Buf<int8_t> dout(want.size()), dout2(want.size());
        st::Buf<float> dstats(rows), dstats2(rows);
        st::Buf<uint8_t> dcols(cols);
        st::kbit_ok(cint8_vector_quant(dA.get(), dout.get(), dstats.get(), thr, rows, cols, nullptr), "cint8_vector_quant");
        CHECK(st::first_bit_difference(dstats.download(), want_stats) == -1);
        CHECK(st::first_bit_difference(dout.download(), want) == -1);
        st::kbit_ok(kbit_int8_vectorwise_quant(dA.get(), dout2.get(), dstats2.get(), dcols.get(), thr, rows, cols, nullptr),
                    "kbit_int8_vectorwise_quant");
        CHECK(st::first_bit_difference(dcols.download(), want_cols) == -1);
        CHECK(st::first_bit_difference(dout2.download(), want2) == -1);
        CHECK(st::first_bit_difference(dstats2.download(), want_stats) == -1);
    }
}

TEST_CASE("cuda cdequant_mm_int32_fp16 equals kbit::ref, with and without bias", "[cuda][int8]") {
    const int rows = 37, cols = 515;
    std::mt19937 rng(4);
    std::uniform_int_distribution<int> di(-2000000, 2000000);
    std::uniform_real_distribution<float> ud(0.01f, 8.0f);
    std::vector<int32_t> A(int64_t{rows} * cols);
    for (auto& a : A) a = di(rng);
    A[0] = INT32_MAX, A[1] = INT32_MIN, A[2] = 0;
    std::vector<float> rs(rows), cs(cols);
    for (auto& x : rs) x = ud(rng);
    for (auto& x : cs) x = ud(rng);
    rs[1] = -0.0f, cs[3] = std::nanf("");
    const std::vector<kbit_half> bias = st::to_elems<kbit_half>(st::weights(cols, 8, false));
    for (bool with_bias : {false, true}) {
        std::vector<kbit_half> want(A.size());
        kbit::ref::dequant_mm_int32_fp16(A.data(), rs.data(), cs.data(), want.data(), with_bias ? bias.data() : nullptr,
                                         rows, cols);
        st::Buf<int32_t> dA(A);
        st::Buf<float> drs(rs), dcs(cs);
        st::Buf<kbit_half> dbias(bias), dout(A.size());
        st::kbit_ok(cdequant_mm_int32_fp16(dA.get(), drs.get(), dcs.get(), dout.get(), with_bias ? dbias.get() : nullptr,
                                           rows, cols, nullptr),
                    "cdequant_mm_int32_fp16");
        CHECK(st::first_bit_difference(dout.download(), want) == -1);
    }
}

TEST_CASE("cuda kbit_int8_outlier_matmul_fp16 equals kbit::ref; no outlier column leaves out untouched", "[cuda][int8]") {
    const int rows = 9, outf = 70, inf = 300;
    std::mt19937 rng(12);
    std::uniform_int_distribution<int> di(-127, 127);
    std::vector<int8_t> W(int64_t{outf} * inf);
    for (auto& w : W) w = static_cast<int8_t>(di(rng));
    std::vector<float> stats(outf);
    for (auto& s : stats) s = 0.5f + static_cast<float>(di(rng) + 127) / 100.0f;
    const std::vector<kbit_half> A = st::to_elems<kbit_half>(st::weights(int64_t{rows} * inf, 21, false));
    std::vector<kbit_half> out0 = st::to_elems<kbit_half>(st::weights(int64_t{rows} * outf, 22, false));
    out0[0] = kbit_half{0x8000};  // -0.0 stays -0.0 without outliers (the sum starts from -0.0)
    for (const std::vector<int>& cols : {std::vector<int>{3, 17, 18, 200, 299}, std::vector<int>{}}) {
        std::vector<uint8_t> flags(inf, 0);
        for (int c : cols) flags[c] = 1;
        INFO(cols.size() << " outlier columns");
        std::vector<kbit_half> want = out0;
        kbit::ref::int8_outlier_matmul_fp16(A.data(), W.data(), stats.data(), flags.data(), want.data(), rows, outf, inf);
        st::Buf<kbit_half> dA(A), dout(out0);
        st::Buf<int8_t> dW(W);
        st::Buf<float> dstats(stats);
        st::Buf<uint8_t> dflags(flags);
        st::kbit_ok(kbit_int8_outlier_matmul_fp16(dA.get(), dW.get(), dstats.get(), dflags.get(), dout.get(), rows, outf,
                                                  inf, nullptr),
                    "kbit_int8_outlier_matmul_fp16");
        CHECK(st::first_bit_difference(dout.download(), want) == -1);
    }
}

namespace {

// One cigemmlt shape against kbit::ref on all three outputs; `offset` misaligns every matrix.
void check_igemm(kbit_context* ctx, int m, int n, int k, int pad, size_t offset, int mode) {
    INFO("m " << m << " n " << n << " k " << k << " ld padding " << pad << " offset " << offset << " data mode " << mode);
    const int lda = m + pad, ldb = m + pad, ldc = k + pad;
    std::mt19937 rng(static_cast<uint32_t>(m + n + k + mode));
    std::vector<int8_t> A(int64_t{k} * std::max(lda, 1)), B(int64_t{n} * std::max(ldb, 1));
    for (auto& a : A) a = mode == 0 ? static_cast<int8_t>(rng() >> 24) : int8_t{-128};
    for (auto& b : B) b = mode == 0 ? static_cast<int8_t>(rng() >> 24) : int8_t{-128};
    std::vector<float> scale(k);
    for (int o = 0; o < k; ++o) scale[o] = o % 7 == 3 ? 0.5f : 1.0f / static_cast<float>(64 + o);
    std::vector<int32_t> want32(int64_t{n} * ldc, 0x7E7E7E7E);
    std::vector<int8_t> want8(int64_t{n} * ldc, 0x7E), want8s(int64_t{n} * ldc, 0x7E);
    kbit::ref::igemm_s32(m, n, k, A.data(), B.data(), want32.data(), lda, ldb, ldc);
    kbit::ref::igemm_s8(m, n, k, A.data(), B.data(), want8.data(), nullptr, lda, ldb, ldc);
    kbit::ref::igemm_s8(m, n, k, A.data(), B.data(), want8s.data(), scale.data(), lda, ldb, ldc);
    st::Buf<int8_t> dA(A, offset), dB(B, offset);
    st::Buf<int32_t> dC(std::vector<int32_t>(want32.size(), 0x7E7E7E7E), offset);
    st::Buf<int8_t> dC8(std::vector<int8_t>(want8.size(), 0x7E), offset), dC8s(std::vector<int8_t>(want8.size(), 0x7E), offset);
    st::Buf<float> dscale(scale);
    st::kbit_ok(cigemmlt_32(ctx, m, n, k, dA.get(), dB.get(), dC.get(), nullptr, lda, ldb, ldc, nullptr), "cigemmlt_32");
    CHECK(st::first_bit_difference(dC.download(), want32) == -1);
    st::kbit_ok(cigemmlt_8(ctx, m, n, k, dA.get(), dB.get(), dC8.get(), nullptr, lda, ldb, ldc, nullptr), "cigemmlt_8");
    CHECK(st::first_bit_difference(dC8.download(), want8) == -1);
    st::kbit_ok(cigemmlt_8_rowscale(ctx, m, n, k, dA.get(), dB.get(), dC8s.get(), dscale.get(), lda, ldb, ldc, nullptr),
                "cigemmlt_8_rowscale");
    CHECK(st::first_bit_difference(dC8s.download(), want8s) == -1);
}

}  // namespace

TEST_CASE("cuda cigemmlt: both paths exact against kbit::ref, int8 outputs rounded and saturated as the CPU",
          "[cuda][int8][igemmlt]") {
    kbit_context* ctx = get_context();
    INFO(kbit_last_error_message());
    REQUIRE(ctx != nullptr);
    // cuBLASLt layouts (multiples of 4, aligned) and fallback layouts (odd sizes, padding, offset 1).
    for (auto [m, n, k, pad] : {std::tuple<int, int, int, int>{64, 8, 32, 0}, {4096, 3, 256, 0}, {128, 17, 96, 4},
                                {0, 4, 4, 0}, {3, 5, 7, 0}, {513, 37, 161, 3}, {4096, 1, 1000, 0}})
        for (size_t offset : {size_t{0}, size_t{1}})
            for (int mode : {0, 1}) check_igemm(ctx, m, n, k, pad, offset, mode);
    // Sums beyond 2^31 wrap like an int32 accumulator, on the cuBLASLt path (m % 4 == 0) and the fallback.
    check_igemm(ctx, 200000, 2, 3, 0, 0, 1);
    check_igemm(ctx, 200001, 2, 3, 0, 0, 1);
    CHECK(kbit_context_destroy(ctx) == KBIT_STATUS_SUCCESS);
}
