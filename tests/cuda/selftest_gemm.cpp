// CUDA self-test: the naive 4-bit GEMV and cgemm_4bit (plain and nested absmax, bias), both kernel
// paths, against a double-precision host reference with a tolerance derived from fp32 accumulation
// and the output type's rounding.
#include "kbit_formats.h"
#include "selftest_util.h"

namespace {

using kbit::QuantType;

struct Problem {
    int M, N, K, B;
    bool nested, bias, fp4;
    size_t a_offset;  // 1 = misaligned activations: forces the tiled kernel
};

template <class T>
void check_gemm(const Problem& p, bool naive) {
    INFO((naive ? "gemv naive " : "cgemm_4bit ") << kbit::Elem<T>::name << " M " << p.M << " N " << p.N << " K " << p.K
                                                 << " blocksize " << p.B << (p.nested ? " nested" : "")
                                                 << (p.bias ? " bias" : "") << (p.fp4 ? " fp4" : " nf4")
                                                 << " a_offset " << p.a_offset);
    std::mt19937 rng(static_cast<uint32_t>(p.M * 131 + p.N * 7 + p.K));
    std::uniform_int_distribution<int> nib(0, 15);
    std::uniform_real_distribution<float> ud(0.5f, 2.0f);
    const int64_t elems = int64_t{p.N} * p.K, blocks = (elems + p.B - 1) / p.B;
    std::vector<uint8_t> W(elems / 2);
    for (auto& b : W) b = static_cast<uint8_t>(nib(rng) << 4 | nib(rng));
    std::vector<float> absmax(blocks);
    for (auto& a : absmax) a = ud(rng);
    // nested: codes of a linear table, second-level scales, offset
    std::vector<float> code(256);
    for (int i = 0; i < 256; ++i) code[i] = -1.0f + 2.0f * i / 255.0f;
    std::vector<uint8_t> q8(blocks);
    for (auto& q : q8) q = static_cast<uint8_t>(nib(rng) * 16 + nib(rng));
    std::vector<float> absmax2((blocks + 255) / 256);
    for (auto& a : absmax2) a = ud(rng);
    const float offset = 1.25f;
    std::vector<float> scale(blocks);
    for (int64_t b = 0; b < blocks; ++b) scale[b] = p.nested ? code[q8[b]] * absmax2[b / 256] + offset : absmax[b];

    const std::vector<T> A = st::to_elems<T>(st::weights(int64_t{p.M} * p.K, 5, false));
    const std::vector<T> bias = st::to_elems<T>(st::weights(p.N, 9, false));
    const float nf4[16] = {KBIT_NF4_VALUES}, fp4[16] = {KBIT_FP4_VALUES};
    const float* lut = p.fp4 ? fp4 : nf4;

    std::vector<double> want(int64_t{p.M} * p.N), mag(want.size());
    for (int m = 0; m < p.M; ++m)
        for (int n = 0; n < p.N; ++n) {
            double s = 0.0, a = 0.0;
            for (int k = 0; k < p.K; ++k) {
                const int64_t flat = int64_t{n} * p.K + k;
                const float w = lut[kbit::nibble_at(W.data(), flat)] * scale[flat / p.B];
                const double t = double(kbit::Elem<T>::load(A[int64_t{m} * p.K + k])) * w;
                s += t;
                a += std::fabs(t);
            }
            if (p.bias) {
                s += kbit::Elem<T>::load(bias[n]);
                a += std::fabs(kbit::Elem<T>::load(bias[n]));
            }
            want[int64_t{m} * p.N + n] = s;
            mag[int64_t{m} * p.N + n] = a;
        }

    st::Buf<T> dA(A, p.a_offset), dbias(bias), dout(want.size());
    st::Buf<uint8_t> dW(W), dq8(q8);
    st::Buf<float> dabs(absmax), dabs2(absmax2), dcode(code), dlut(std::vector<float>(lut, lut + 16)), doff(std::vector<float>{offset});
    kbit_status status;
    if (naive) {
        if constexpr (std::is_same<T, float>::value)
            status = cgemm_4bit_inference_naive_fp32(p.N, 1, p.K, dA.get(), dW.get(), dabs.get(), dlut.get(), dout.get(),
                                                     p.N, p.K / 2, p.N, p.B, nullptr);
        else if constexpr (std::is_same<T, kbit_half>::value)
            status = cgemm_4bit_inference_naive_fp16(p.N, 1, p.K, dA.get(), dW.get(), dabs.get(), dlut.get(), dout.get(),
                                                     p.N, p.K / 2, p.N, p.B, nullptr);
        else
            status = cgemm_4bit_inference_naive_bf16(p.N, 1, p.K, dA.get(), dW.get(), dabs.get(), dlut.get(), dout.get(),
                                                     p.N, p.K / 2, p.N, p.B, nullptr);
    } else {
        const float* am = p.nested ? dabs2.get() : dabs.get();
        const uint8_t* q = p.nested ? dq8.get() : nullptr;
        const T* b = p.bias ? dbias.get() : nullptr;
        const int qt = p.fp4 ? KBIT_QUANT_FP4 : KBIT_QUANT_NF4;
        if constexpr (std::is_same<T, float>::value)
            status = cgemm_4bit_fp32(dA.get(), dW.get(), am, q, dcode.get(), doff.get(), dout.get(), b, p.M, p.N, p.K, p.B, qt, nullptr);
        else if constexpr (std::is_same<T, kbit_half>::value)
            status = cgemm_4bit_fp16(dA.get(), dW.get(), am, q, dcode.get(), doff.get(), dout.get(), b, p.M, p.N, p.K, p.B, qt, nullptr);
        else
            status = cgemm_4bit_bf16(dA.get(), dW.get(), am, q, dcode.get(), doff.get(), dout.get(), b, p.M, p.N, p.K, p.B, qt, nullptr);
    }
    st::kbit_ok(status, naive ? "gemv" : "cgemm_4bit");
    const std::vector<T> got = dout.download();
    long bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = kbit::Elem<T>::load(got[i]);
        const double tol = mag[i] * 1e-5 * std::max(1.0, p.K / 512.0) + std::fabs(want[i]) * st::eps_of<T>() + 1e-30;
        const double err = std::fabs(g - want[i]);
        worst = std::max(worst, err / tol);
        if (!(err <= tol)) ++bad;
    }
    INFO("worst error / tolerance " << worst);
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("cuda naive 4-bit GEMV: skinny and tiled paths within fp32 accumulation tolerance", "[cuda][gemm]") {
    for (Problem p : {Problem{1, 4096, 4096, 64, false, false, false, 0}, Problem{1, 1000, 1024, 32, false, false, true, 0},
                      Problem{1, 33, 4096 + 64, 128, false, false, false, 0}, Problem{1, 17, 96, 32, false, false, false, 1},
                      Problem{1, 70, 50, 64, false, false, false, 0}, Problem{1, 5, 0, 64, false, false, false, 0}}) {
        check_gemm<float>(p, true);
        check_gemm<kbit_half>(p, true);
        check_gemm<kbit_bf16>(p, true);
    }
}

TEST_CASE("cuda cgemm_4bit: skinny and tiled paths, nested absmax and bias", "[cuda][gemm]") {
    for (Problem p : {Problem{1, 512, 1024, 64, false, true, false, 0}, Problem{3, 300, 2048, 256, true, true, false, 0},
                      Problem{4, 64, 4096, 4096, true, false, true, 0}, Problem{5, 130, 512, 64, false, true, false, 0},
                      Problem{70, 100, 320, 32, true, true, true, 0}, Problem{2, 40, 64, 32, false, false, false, 1},
                      Problem{129, 65, 2, 32, true, true, false, 0}}) {
        check_gemm<float>(p, false);
        check_gemm<kbit_half>(p, false);
        check_gemm<kbit_bf16>(p, false);
    }
}
