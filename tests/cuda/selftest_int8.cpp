// CUDA self-test: LLM.int8 functions (row-wise quantization with outliers, outlier columns, int32
// product dequantization, fp16 outlier product) exactly against host references, and the int8
// GEMM through cuBLASLt against exact integer products.
#include <algorithm>

#include "selftest_util.h"

namespace {

int8_t ref_int8(float y) {
    if (std::isnan(y)) return 0;
    const float r = std::nearbyint(y);
    return static_cast<int8_t>(std::max(-128.0f, std::min(127.0f, r)));
}

float half_round(float x) { return kbit::half_to_float(kbit::float_to_half(x)); }

}  // namespace

TEST_CASE("cuda LLM.int8 row quantization, outlier columns and zeroing", "[cuda][int8]") {
    for (auto [rows, cols, thr] : {std::tuple<int, int, float>{1, 100, 0.0f}, {7, 1000, 0.0f}, {33, 4096, 3.0f},
                                   {1, 77, 2.5f}, {5, 300, 6.0f}}) {
        INFO("rows " << rows << " cols " << cols << " threshold " << thr);
        std::vector<float> f = st::weights(int64_t{rows} * cols, static_cast<uint32_t>(rows + cols), false);
        for (auto& x : f) x *= 1.5f;
        if (rows > 2) for (int c = 0; c < cols; ++c) f[int64_t{2} * cols + c] = 0.0f;  // a zero row
        const std::vector<kbit_half> A = st::to_elems<kbit_half>(f);
        const float th = half_round(thr);
        std::vector<float> want_stats(rows);
        std::vector<int8_t> want(int64_t{rows} * cols);
        std::vector<uint8_t> want_cols(cols, 0);
        for (int r = 0; r < rows; ++r) {
            float amax = 0.0f;
            for (int c = 0; c < cols; ++c) {
                const float v = std::fabs(kbit::half_to_float(A[int64_t{r} * cols + c].bits));
                if (thr == 0.0f || v < th) amax = std::fmax(amax, v);
                if (thr > 0.0f && v >= th) want_cols[c] = 1;
            }
            want_stats[r] = amax;
            const float s = 127.0f / amax;
            for (int c = 0; c < cols; ++c) {
                const float x = kbit::half_to_float(A[int64_t{r} * cols + c].bits);
                want[int64_t{r} * cols + c] = (thr == 0.0f || std::fabs(x) < thr) ? ref_int8(x * s) : 0;
            }
        }
        st::Buf<kbit_half> dA(A);
        st::Buf<int8_t> dout(want.size()), dout2(want.size());
        st::Buf<float> dstats(rows), dstats2(rows);
        st::Buf<uint8_t> dcols(cols);
        st::kbit_ok(cint8_vector_quant(dA.get(), dout.get(), dstats.get(), thr, rows, cols, nullptr), "cint8_vector_quant");
        CHECK(st::first_difference(dstats.download(), want_stats) == -1);
        CHECK(st::first_difference(dout.download(), want) == -1);

        st::kbit_ok(kbit_int8_vectorwise_quant(dA.get(), dout2.get(), dstats2.get(), dcols.get(), thr, rows, cols, nullptr),
                    "kbit_int8_vectorwise_quant");
        if (rows > 1)
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c)
                    if (want_cols[c]) want[int64_t{r} * cols + c] = 0;
        CHECK(st::first_difference(dcols.download(), want_cols) == -1);
        CHECK(st::first_difference(dout2.download(), want) == -1);
        CHECK(st::first_difference(dstats2.download(), want_stats) == -1);
    }
}

TEST_CASE("cuda cdequant_mm_int32_fp16: exact, with and without bias", "[cuda][int8]") {
    const int rows = 37, cols = 515;
    std::mt19937 rng(4);
    std::uniform_int_distribution<int> di(-2000000, 2000000);
    std::uniform_real_distribution<float> ud(0.01f, 8.0f);
    std::vector<int32_t> A(int64_t{rows} * cols);
    for (auto& a : A) a = di(rng);
    std::vector<float> rs(rows), cs(cols);
    for (auto& x : rs) x = ud(rng);
    for (auto& x : cs) x = ud(rng);
    const std::vector<kbit_half> bias = st::to_elems<kbit_half>(st::weights(cols, 8, false));
    for (bool with_bias : {false, true}) {
        std::vector<kbit_half> want(A.size());
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                const float v = (static_cast<float>(A[int64_t{r} * cols + c]) * rs[r]) * cs[c];
                const float b = with_bias ? kbit::half_to_float(bias[c].bits) : 0.0f;
                want[int64_t{r} * cols + c] = kbit_half{kbit::float_to_half(std::fma(v, 6.200012e-05f, b))};
            }
        st::Buf<int32_t> dA(A);
        st::Buf<float> drs(rs), dcs(cs);
        st::Buf<kbit_half> dbias(bias), dout(A.size());
        st::kbit_ok(cdequant_mm_int32_fp16(dA.get(), drs.get(), dcs.get(), dout.get(), with_bias ? dbias.get() : nullptr,
                                           rows, cols, nullptr),
                    "cdequant_mm_int32_fp16");
        CHECK(st::first_difference(dout.download(), want) == -1);
    }
}

TEST_CASE("cuda kbit_int8_outlier_matmul_fp16: exact fp16 outlier product added to out", "[cuda][int8]") {
    const int rows = 9, outf = 70, inf = 300;
    std::mt19937 rng(12);
    std::uniform_int_distribution<int> di(-127, 127);
    std::vector<int8_t> W(int64_t{outf} * inf);
    for (auto& w : W) w = static_cast<int8_t>(di(rng));
    std::vector<float> stats(outf);
    for (auto& s : stats) s = 0.5f + static_cast<float>(di(rng) + 127) / 100.0f;
    std::vector<uint8_t> flags(inf, 0);
    for (int c : {3, 17, 18, 200, 299}) flags[c] = 1;
    const std::vector<kbit_half> A = st::to_elems<kbit_half>(st::weights(int64_t{rows} * inf, 21, false));
    const std::vector<kbit_half> out0 = st::to_elems<kbit_half>(st::weights(int64_t{rows} * outf, 22, false));
    std::vector<kbit_half> want = out0;
    for (int t = 0; t < rows; ++t)
        for (int o = 0; o < outf; ++o) {
            float sum = 0.0f;
            for (int c = 0; c < inf; ++c) {
                if (!flags[c]) continue;
                const float w = half_round((static_cast<float>(W[int64_t{o} * inf + c]) * stats[o]) * 7.874015718698502e-3f);
                sum += kbit::half_to_float(A[int64_t{t} * inf + c].bits) * w;
            }
            const int64_t i = int64_t{t} * outf + o;
            want[i] = kbit_half{kbit::float_to_half(kbit::half_to_float(out0[i].bits) + sum)};
        }
    st::Buf<kbit_half> dA(A), dout(out0);
    st::Buf<int8_t> dW(W);
    st::Buf<float> dstats(stats);
    st::Buf<uint8_t> dflags(flags);
    st::kbit_ok(kbit_int8_outlier_matmul_fp16(dA.get(), dW.get(), dstats.get(), dflags.get(), dout.get(), rows, outf, inf,
                                              nullptr),
                "kbit_int8_outlier_matmul_fp16");
    CHECK(st::first_difference(dout.download(), want) == -1);
}

TEST_CASE("cuda cigemmlt: int32 exact, int8 outputs rounded and saturated", "[cuda][int8][igemmlt]") {
    kbit_context* ctx = get_context();
    INFO(kbit_last_error_message());
    REQUIRE(ctx != nullptr);
    for (auto [m, n, k] : {std::tuple<int, int, int>{64, 8, 32}, {4096, 3, 256}, {128, 17, 96}, {0, 4, 4}}) {
        INFO("m " << m << " n " << n << " k " << k);
        std::mt19937 rng(static_cast<uint32_t>(m + n + k));
        std::uniform_int_distribution<int> di(-127, 127);
        std::vector<int8_t> A(int64_t{k} * std::max(m, 1)), B(int64_t{n} * std::max(m, 1));
        for (auto& a : A) a = static_cast<int8_t>(di(rng));
        for (auto& b : B) b = static_cast<int8_t>(di(rng));
        std::vector<int32_t> want(int64_t{n} * k);
        for (int t = 0; t < n; ++t)
            for (int o = 0; o < k; ++o) {
                int32_t s = 0;
                for (int i = 0; i < m; ++i) s += int32_t{A[int64_t{o} * m + i]} * B[int64_t{t} * m + i];
                want[int64_t{t} * k + o] = s;
            }
        std::vector<float> scale(k);
        for (int o = 0; o < k; ++o) scale[o] = 1.0f / static_cast<float>(64 + o);
        st::Buf<int8_t> dA(A), dB(B), dC8(want.size()), dC8s(want.size());
        st::Buf<int32_t> dC(want.size());
        st::Buf<float> dscale(scale);
        const int lda = std::max(m, 1);
        const kbit_status s32 = cigemmlt_32(ctx, m, n, k, dA.get(), dB.get(), dC.get(), nullptr, lda, lda, k, nullptr);
        INFO(kbit_last_error_message());
        REQUIRE((s32 == KBIT_STATUS_SUCCESS || s32 == KBIT_STATUS_NOT_SUPPORTED));
        if (s32 == KBIT_STATUS_NOT_SUPPORTED) continue;
        CHECK(st::first_difference(dC.download(), want) == -1);

        std::vector<int8_t> want8(want.size()), want8s(want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            want8[i] = ref_int8(static_cast<float>(want[i]));
            want8s[i] = ref_int8(static_cast<float>(want[i]) * scale[i % k]);
        }
        if (cigemmlt_8(ctx, m, n, k, dA.get(), dB.get(), dC8.get(), nullptr, lda, lda, k, nullptr) == KBIT_STATUS_SUCCESS)
            CHECK(st::first_difference(dC8.download(), want8) == -1);
        if (cigemmlt_8_rowscale(ctx, m, n, k, dA.get(), dB.get(), dC8s.get(), dscale.get(), lda, lda, k, nullptr) ==
            KBIT_STATUS_SUCCESS) {
            const std::vector<int8_t> got = dC8s.download();
            long off_by_more_than_one = 0;
            for (size_t i = 0; i < got.size(); ++i) off_by_more_than_one += std::abs(got[i] - want8s[i]) > 1;
            CHECK(off_by_more_than_one == 0);
        }
    }
    CHECK(kbit_context_destroy(ctx) == KBIT_STATUS_SUCCESS);
}
