// 4-bit GEMV (cgemm_4bit_inference_naive_*) and fused GEMM (cgemm_4bit_*): class F, so results are
// compared with an fp64 evaluation of the same sum under a bound derived from K and fp32 rounding,
// and exactly where every product and partial sum is exact (small-integer tables and activations).
#include "kbit_code8.h"
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

// Bound for an fp32 sum of `terms` products (any order, with or without FMA, scaled once per block)
// rounded to T: gamma_{terms+4} * sum |a*w| plus one rounding to T.
template <class T>
double bound(double exact, double abs_sum, int64_t terms) {
    const double u = 0x1.0p-24, g = (terms + 4) * u / (1 - (terms + 4) * u);
    const double fp32_err = g * abs_sum + 1e-37;
    return fp32_err + unit_roundoff<T>() * (std::fabs(exact) + fp32_err) + tiny_step<T>();
}

struct Exact {
    double value = 0, abs_sum = 0;
};

// sum_k a[k] * lut[nibble(base + k)] * scale(block of base + k), in fp64 (every product exact).
template <class T, class Scale>
Exact exact_dot(const T* a, int64_t k, const uint8_t* B, int64_t base, const float* lut, int64_t bs, Scale scale) {
    Exact e;
    for (int64_t kk = 0; kk < k; ++kk) {
        const double w = static_cast<double>(lut[kbit::nibble_at(B, base + kk)]) * scale((base + kk) / bs);
        const double p = static_cast<double>(kbit::Elem<T>::load(a[kk])) * w;
        e.value += p;
        e.abs_sum += std::fabs(p);
    }
    return e;
}

std::vector<float> positive_scales(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(0.01f, 0.2f);
    std::vector<float> v(n);
    for (auto& x : v) x = uni(rng);
    return v;
}

template <class T>
std::vector<T> run_gemv(int m, int k, int ldb, int bs, const std::vector<T>& a, const std::vector<uint8_t>& B,
                        const std::vector<float>& absmax, const float* lut) {
    DeviceBuffer<T> da(a);
    DeviceBuffer<uint8_t> dB(B);
    DeviceBuffer<float> dabs(absmax);
    DeviceBuffer<float> dlut(std::vector<float>(lut, lut + 16));
    DeviceBuffer<T> out(static_cast<size_t>(m));
    require_ok(Fns4<T>::gemv()(m, 1, k, da.get(), dB.get(), dabs.get(), dlut.get(), out.get(), m, ldb, m, bs, nullptr),
               "gemv");
    return out.download();
}

// cgemm_4bit of T with plain (not nested) positive block scales, random codes of format q and normal
// activations (data from `seed`): every output within the fp32 summation bound of the fp64 dot.
template <class T>
void check_gemm_plain_scales(int M, int N, int K, int64_t bs, QuantType q, uint32_t seed) {
    const auto B = random_bytes(static_cast<size_t>(N) * K / 2, seed);
    const auto a = to_elems<T>(normal_floats(static_cast<size_t>(M) * K, seed + 1, 1.0f));
    const auto absmax = positive_scales(static_cast<size_t>(int64_t{N} * K / bs), seed + 2);
    DeviceBuffer<T> dA(a), out(static_cast<size_t>(M) * N);
    DeviceBuffer<uint8_t> dB(B);
    DeviceBuffer<float> dabs(absmax);
    const int quant_type = q == QuantType::FP4 ? 1 : 2;  // cgemm_4bit's selector, as bitsandbytes passes it
    require_ok(Fns4<T>::gemm()(dA.get(), dB.get(), dabs.get(), nullptr, nullptr, nullptr, out.get(), nullptr, M, N, K,
                               static_cast<int>(bs), quant_type, nullptr),
               "cgemm_4bit");
    const auto got = out.download();
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            const Exact e = exact_dot(a.data() + int64_t{i} * K, K, B.data(), int64_t{j} * K, kbit::ref::lut_4bit(q), bs,
                                      [&](int64_t beta) { return double(absmax[beta]); });
            const double y = kbit::Elem<T>::load(got[int64_t{i} * N + j]);
            INFO("i " << i << " j " << j << " got " << y << " exact " << e.value);
            REQUIRE(std::fabs(y - e.value) <= bound<T>(e.value, e.abs_sum, K));
        }
}

}  // namespace

TEMPLATE_TEST_CASE("4bit gemv: within the fp32 summation bound of the fp64 result", "[4bit][gemv]" FN_4BIT_GEMV,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    struct Case {
        int m, k, ldb_extra;
    };
    // k multiple of 64 (SIMD groups), with a tail, smaller than a group, rows padded (ldb > k / 2); rows
    // longer than 4096, with and without a tail.
    const Case cases[] = {{33, 256, 0}, {7, 4096, 0}, {5, 1000, 0},  {9, 30, 0},
                          {6, 192, 16}, {300, 128, 0}, {5, 4160, 0}, {6, 8192, 0}};
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        for (int64_t bs : kBlocksizes) {
            for (const Case& c : cases) {
                DYNAMIC_SECTION(qt_name(q) << " " << kbit::Elem<T>::name << " blocksize " << bs << " m " << c.m
                                           << " k " << c.k << " ldb " << c.k / 2 + c.ldb_extra) {
                    const int ldb = c.k / 2 + c.ldb_extra;
                    const int64_t nibbles = 2 * static_cast<int64_t>(ldb) * c.m;
                    const auto B = random_bytes(static_cast<size_t>(nibbles / 2), c.k + c.m);
                    const auto absmax = positive_scales(static_cast<size_t>((nibbles + bs - 1) / bs), 3);
                    const auto a = to_elems<T>(normal_floats(static_cast<size_t>(c.k), 17, 1.0f));
                    const float* lut = kbit::ref::lut_4bit(q);
                    const auto got = run_gemv<T>(c.m, c.k, ldb, static_cast<int>(bs), a, B, absmax, lut);
                    for (int r = 0; r < c.m; ++r) {
                        const Exact e = exact_dot(a.data(), c.k, B.data(), 2 * int64_t{ldb} * r, lut, bs,
                                                  [&](int64_t beta) { return double(absmax[beta]); });
                        const double y = kbit::Elem<T>::load(got[r]);
                        INFO("row " << r << " got " << y << " exact " << e.value);
                        REQUIRE(std::fabs(y - e.value) <= bound<T>(e.value, e.abs_sum, c.k));
                    }
                }
            }
        }
    }
}

TEMPLATE_TEST_CASE("4bit gemv: exact when every product and partial sum is exact", "[4bit][gemv]" FN_4BIT_GEMV,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    // Table of small integers (the datatype is used verbatim), activations in {-2..2}, power-of-two
    // scales: every partial sum is an integer far below 2^24, so any summation order is exact.
    float lut[16];
    for (int i = 0; i < 16; ++i) lut[i] = static_cast<float>(i - 8);
    for (int64_t bs : {int64_t{32}, int64_t{64}, int64_t{1024}}) {
        DYNAMIC_SECTION("custom integer table " << kbit::Elem<T>::name << " blocksize " << bs) {
            const int m = 24, k = 2048 + 96;
            const auto B = random_bytes(static_cast<size_t>(m) * k / 2, 5);
            std::vector<float> absmax(static_cast<size_t>((int64_t{m} * k + bs - 1) / bs));
            for (size_t i = 0; i < absmax.size(); ++i) absmax[i] = (i % 3 == 0) ? 0.5f : 2.0f;
            std::vector<float> af(k);
            for (int i = 0; i < k; ++i) af[i] = static_cast<float>(i % 5) - 2.0f;
            const auto a = to_elems<T>(af);
            const auto got = run_gemv<T>(m, k, k / 2, static_cast<int>(bs), a, B, absmax, lut);
            for (int r = 0; r < m; ++r) {
                const Exact e = exact_dot(a.data(), k, B.data(), int64_t{k} * r, lut, bs,
                                          [&](int64_t beta) { return double(absmax[beta]); });
                CHECK(bits_of(got[r]) == bits_of(kbit::Elem<T>::store(static_cast<float>(e.value))));
            }
        }
    }
}

TEMPLATE_TEST_CASE("4bit gemm: nested and plain scales, bias, FP4/NF4 selector", "[4bit][gemm]" FN_4BIT_GEMM,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    const auto code = dynamic_map(true);
    for (int quant_type : {1, 2, 0}) {  // 1 = FP4, anything else = NF4
        for (int64_t bs : {int64_t{32}, int64_t{64}, int64_t{256}, int64_t{4096}}) {
            for (bool nested : {false, true}) {
                for (bool with_bias : {false, true}) {
                    for (int M : {1, 3, 5, 40}) {  // 40: the prefill panels (M >= 16) where a backend has them
                        const int N = 40, K = bs >= 1024 ? 4096 : 320;  // K % 64 != 0 at blocksize 32
                        DYNAMIC_SECTION((quant_type == 1 ? "fp4 " : "nf4 ")
                                        << kbit::Elem<T>::name << " blocksize " << bs << " quant_type " << quant_type
                                        << (nested ? " nested" : "") << (with_bias ? " bias" : "") << " M " << M) {
                            const int64_t blocks = int64_t{N} * K / bs;
                            const auto B = random_bytes(static_cast<size_t>(N) * K / 2, 11);
                            const auto a = to_elems<T>(normal_floats(static_cast<size_t>(M) * K, 12, 1.0f));
                            const auto bias = to_elems<T>(normal_floats(static_cast<size_t>(N), 13, 0.5f));
                            std::vector<float> absmax = positive_scales(static_cast<size_t>(blocks), 14);
                            std::vector<uint8_t> q8(static_cast<size_t>(blocks));
                            std::vector<float> nested_absmax((blocks + 255) / 256);
                            const float offset = 0.07f;
                            if (nested) {
                                absmax = positive_scales(nested_absmax.size(), 15);
                                nested_absmax = absmax;
                                std::mt19937 rng(16);
                                for (auto& c : q8) c = static_cast<uint8_t>(rng());
                            }
                            auto scale = [&](int64_t beta) {
                                if (!nested) return double(absmax[beta]);
                                const float s = code[q8[beta]] * nested_absmax[beta >> 8];
                                return double(s + offset);  // product, then a separate fp32 add
                            };
                            DeviceBuffer<T> dA(a), dbias(bias), out(static_cast<size_t>(M) * N);
                            DeviceBuffer<uint8_t> dB(B), dq8(q8);
                            DeviceBuffer<float> dabs(absmax), dcode(code), doff(std::vector<float>{offset});
                            require_ok(Fns4<T>::gemm()(dA.get(), dB.get(), dabs.get(), nested ? dq8.get() : nullptr,
                                                       dcode.get(), doff.get(), out.get(),
                                                       with_bias ? dbias.get() : nullptr, M, N, K,
                                                       static_cast<int>(bs), quant_type, nullptr),
                                       "cgemm_4bit");
                            const auto got = out.download();
                            const float* lut = quant_type == 1 ? kbit::kFp4Values : kbit::kNf4Values;
                            for (int i = 0; i < M; ++i)
                                for (int j = 0; j < N; ++j) {
                                    Exact e = exact_dot(a.data() + int64_t{i} * K, K, B.data(), int64_t{j} * K, lut,
                                                        bs, scale);
                                    if (with_bias) {
                                        e.value += kbit::Elem<T>::load(bias[j]);
                                        e.abs_sum += std::fabs(kbit::Elem<T>::load(bias[j]));
                                    }
                                    const double y = kbit::Elem<T>::load(got[int64_t{i} * N + j]);
                                    INFO("i " << i << " j " << j << " got " << y << " exact " << e.value);
                                    REQUIRE(std::fabs(y - e.value) <= bound<T>(e.value, e.abs_sum, K + 1));
                                }
                        }
                    }
                }
            }
        }
    }
}

// Batched decode and prefill sizes: enough activation rows that a kernel may cut K into slices (the
// AVX-512 one does above ~2K columns at M >= 8), blocks split across slices, a tail past the last 128
// columns, and an odd number of weight rows; M = 15 takes every tile height of the dot kernels (4, 2,
// 1) on AVX2 and the AVX-512 prefill kernel's single tile; at M >= 16 on AVX2 the dot-form prefill
// panels (chunks of 1024 columns or one block, tiles of 4 x 3 with partial tiles at M = 70 and N =
// 19), from M = 12 on AVX-512 the outer-product prefill kernel.
TEMPLATE_TEST_CASE("4bit gemm: batched decode and prefill sizes within the fp32 summation bound", "[4bit][gemm]"
                   FN_4BIT_GEMM, float, kbit_half, kbit_bf16) {
    using T = TestType;
    for (int64_t bs : {int64_t{32}, int64_t{64}, int64_t{256}, int64_t{2048}}) {
        for (int M : {2, 8, 9, 15, 16, 32, 70}) {
            const int N = 19, K = bs == 256 ? 4352 : bs == 2048 ? 6144 : 2112;  // 2112 % 128 = 64
            DYNAMIC_SECTION(kbit::Elem<T>::name << " blocksize " << bs << " M " << M) {
                check_gemm_plain_scales<T>(M, N, K, bs, QuantType::NF4, 31);
            }
        }
    }
}

// The AVX-512 prefill kernel's blocking at its edges: more weight rows than one panel of 128 per
// thread (N = 300 on one or two threads), a last strip of fewer than 16 rows, chunks of K of 256
// columns and a shorter last one (K = 640), block scales that change inside a chunk, activation
// rows cut into tiles of unequal heights (M = 29: 10 + 10 + 9) and a single tile (M = 12).
TEST_CASE("4bit gemm: several weight panels, a partial strip, a short last chunk, uneven tiles", "[4bit][gemm]"
          "[fn:cgemm_4bit_fp32]") {
    const int N = 300, K = 640;
    for (int64_t bs : {int64_t{32}, int64_t{128}}) {
        for (int M : {12, 29}) {
            DYNAMIC_SECTION("blocksize " << bs << " M " << M) {
                check_gemm_plain_scales<float>(M, N, K, bs, QuantType::FP4, 41);
            }
        }
    }
}

TEMPLATE_TEST_CASE("4bit gemm: M = 1 agrees with the GEMV on the same weight", "[4bit][gemm]" FN_4BIT_GEMV FN_4BIT_GEMM,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    const int N = 64, K = 512, bs = 64;
    const auto B = random_bytes(static_cast<size_t>(N) * K / 2, 21);
    const auto absmax = positive_scales(static_cast<size_t>(N) * K / bs, 22);
    const auto a = to_elems<T>(normal_floats(static_cast<size_t>(K), 23, 1.0f));
    const auto gemv = run_gemv<T>(N, K, K / 2, bs, a, B, absmax, kbit::kNf4Values);
    DeviceBuffer<T> dA(a), out(static_cast<size_t>(N));
    DeviceBuffer<uint8_t> dB(B);
    DeviceBuffer<float> dabs(absmax);
    require_ok(Fns4<T>::gemm()(dA.get(), dB.get(), dabs.get(), nullptr, nullptr, nullptr, out.get(), nullptr, 1, N, K,
                               bs, 2, nullptr),
               "cgemm_4bit");
    const auto got = out.download();
    for (int j = 0; j < N; ++j) {
        const Exact e = exact_dot(a.data(), K, B.data(), int64_t{j} * K, kbit::kNf4Values, bs,
                                  [&](int64_t beta) { return double(absmax[beta]); });
        const double tol = 2 * bound<T>(e.value, e.abs_sum, K);
        CHECK(std::fabs(kbit::Elem<T>::load(got[j]) - kbit::Elem<T>::load(gemv[j])) <= tol);
    }
}
