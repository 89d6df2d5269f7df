// kbit_gemm_4bit_precision (4bit 1.2, docs/behaviour.md §3.6; its bf16 class 4bit 1.3, §3.7). KBIT_PRECISION_EXACT
// must be cgemm_4bit_<dtype>'s bytes. KBIT_PRECISION_INT8 must stay within the class's bound of the fp64 product of
// the dequantized weights (every output checked), must be the reference's bytes on the CPU backend at every
// instruction set (which it states), must not depend on the thread count, turns a chunk with Inf or NaN into NaN
// outputs of its row and nothing else, and rejects bad input with its message, writing nothing. KBIT_PRECISION_BF16
// the same: its bound (which includes the bf16 roundings), the reference's bytes on the CPU backend, the same bytes
// at every thread count and on every call, IEEE propagation of Inf and NaN; a backend at 4bit 1.2 rejects it with
// the message of 1.2. A backend at 4bit 1.1 (CUDA, OpenCL) has the loader's stub instead: these cases check that it
// says so.
#include <cstring>

#include "optim8_cases.h"  // ThreadScope
#include "kbit_validate_4bit.h"
#include "ref_4bit_bf16.h"
#include "ref_4bit_int8.h"
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

#define FN_PRECISION "[fn:kbit_gemm_4bit_precision]"
// The int8 cases ask the backend's name: on the CPU backend they also compare bytes with the reference.
#define FN_PRECISION_INT8 FN_PRECISION "[fn:kbit_backend_name]"
#define FN_PRECISION_BF16 FN_PRECISION "[fn:kbit_backend_name]"

template <class T> constexpr int32_t kDtype = std::is_same_v<T, float> ? KBIT_DTYPE_FP32
                                              : std::is_same_v<T, kbit_half> ? KBIT_DTYPE_FP16 : KBIT_DTYPE_BF16;

int backend_4bit_minor() { return static_cast<int>(KBIT_VERSION_MINOR_OF(backend().version[KBIT_INTERFACE_4BIT])); }
bool backend_has_precision() { return backend_4bit_minor() >= 2; }
bool backend_has_bf16() { return backend_4bit_minor() >= 3; }
// The classes the message of a rejected precision lists: those of the backend's 4bit minor.
std::string precision_message(int value) {
    return "kbit_gemm_4bit_precision: precision is " + std::to_string(value) +
           (backend_has_bf16() ? ", must be KBIT_PRECISION_EXACT (0), KBIT_PRECISION_BF16 (1) or KBIT_PRECISION_INT8 (2)"
                               : ", must be KBIT_PRECISION_EXACT (0) or KBIT_PRECISION_INT8 (2)");
}
bool backend_is_cpu() { return std::string(backend().fns_core.kbit_backend_name()) == "cpu"; }

// A backend without 4bit 1.2 answers with the loader's stub; the case ends there.
bool skip_without_precision() {
    if (backend_has_precision()) return false;
    DeviceBuffer<float> out(std::vector<float>(4, 0.0f));
    const kbit_status s = backend().fns_4bit.kbit_gemm_4bit_precision(KBIT_PRECISION_INT8, KBIT_DTYPE_FP32, nullptr,
                                                                      nullptr, nullptr, nullptr, nullptr, nullptr,
                                                                      out.get(), nullptr, 2, 2, 0, 64, 2, nullptr);
    CHECK(s == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK_THAT(std::string(backend().fns_core.kbit_last_error_message()),
               Catch::Contains("(kbit_gemm_4bit_precision is 4bit 1.2)"));
    return true;
}

// One problem on the host: activations M x K, weight N x K (random nibbles), scales plain or nested, bias.
template <class T>
struct Problem {
    int64_t M, N, K, bs;
    int32_t qt;
    bool nested, with_bias;
    std::vector<T> A, bias;
    std::vector<uint8_t> B, q8;
    std::vector<float> absmax, code, offset{0.0125f};

    Problem(int64_t m, int64_t n, int64_t k, int64_t blocksize, int32_t quant, bool nest, bool b, uint32_t seed)
        : M(m), N(n), K(k), bs(blocksize), qt(quant), nested(nest), with_bias(b) {
        const int64_t blocks = (N * K + bs - 1) / bs;
        A = to_elems<T>(normal_floats(static_cast<size_t>(M * K), seed, 1.0f));
        // A few rows with a large outlier, so that chunks have very different scales.
        std::mt19937 rng(seed + 7);
        for (int64_t i = 0; i < M * K / 50; ++i) {
            auto& x = A[rng() % static_cast<uint32_t>(M * K)];
            x = kbit::Elem<T>::store(kbit::Elem<T>::load(x) * 30.0f);
        }
        B = random_bytes(static_cast<size_t>(N * K / 2), seed + 1);
        code = dynamic_map(true);
        std::uniform_real_distribution<float> uni(0.01f, 0.2f);
        if (nested) {
            q8.resize(static_cast<size_t>(blocks));
            for (auto& c : q8) c = static_cast<uint8_t>(rng());
            absmax.resize(static_cast<size_t>((blocks + 255) / 256));
        } else {
            absmax.resize(static_cast<size_t>(blocks));
        }
        for (auto& s : absmax) s = uni(rng);
        if (with_bias) bias = to_elems<T>(normal_floats(static_cast<size_t>(N), seed + 2, 0.5f));
    }
    // The block scale as cgemm_4bit restores it (behaviour.md §3.2).
    float scale(int64_t beta) const {
        return kbit::ref::gemm_block_scale(beta, absmax.data(), nested ? q8.data() : nullptr, code.data(),
                                           offset.data());
    }
    const float* lut() const { return qt == KBIT_QUANT_FP4 ? kbit::kFp4Values : kbit::kNf4Values; }
    const int8_t* levels() const { return kbit::int8_levels(qt == KBIT_QUANT_FP4 ? QuantType::FP4 : QuantType::NF4); }
};

// Calls kbit_gemm_4bit_precision on the problem; `got` is the output, pre-filled with 0x5a bytes.
template <class T>
kbit_status precision_call(const Problem<T>& p, int32_t precision, std::vector<T>* got) {
    DeviceBuffer<T> dA(p.A.empty() ? std::vector<T>(1) : p.A), out(static_cast<size_t>(std::max<int64_t>(1, p.M * p.N)));
    std::vector<T> fill(static_cast<size_t>(std::max<int64_t>(1, p.M * p.N)));
    std::memset(static_cast<void*>(fill.data()), 0x5a, fill.size() * sizeof(T));
    out.upload(fill);
    DeviceBuffer<uint8_t> dB(p.B.empty() ? std::vector<uint8_t>{0} : p.B), dq8(p.q8.empty() ? std::vector<uint8_t>{0} : p.q8);
    DeviceBuffer<float> dabs(p.absmax), dcode(p.code), doff(p.offset);
    DeviceBuffer<T> dbias(p.bias.empty() ? std::vector<T>(1) : p.bias);
    const kbit_status s = backend().fns_4bit.kbit_gemm_4bit_precision(
        precision, kDtype<T>, dA.get(), dB.get(), dabs.get(), p.nested ? dq8.get() : nullptr, dcode.get(), doff.get(),
        out.get(), p.with_bias ? dbias.get() : nullptr, p.M, p.N, p.K, p.bs, p.qt, nullptr);
    *got = out.download();
    got->resize(static_cast<size_t>(p.M * p.N));
    return s;
}

template <class T>
std::vector<T> cgemm(const Problem<T>& p) {
    DeviceBuffer<T> dA(p.A), out(static_cast<size_t>(p.M * p.N)), dbias(p.bias.empty() ? std::vector<T>(1) : p.bias);
    DeviceBuffer<uint8_t> dB(p.B), dq8(p.q8.empty() ? std::vector<uint8_t>{0} : p.q8);
    DeviceBuffer<float> dabs(p.absmax), dcode(p.code), doff(p.offset);
    require_ok(Fns4<T>::gemm()(dA.get(), dB.get(), dabs.get(), p.nested ? dq8.get() : nullptr, dcode.get(),
                               doff.get(), out.get(), p.with_bias ? dbias.get() : nullptr, static_cast<int>(p.M),
                               static_cast<int>(p.N), static_cast<int>(p.K), static_cast<int>(p.bs), p.qt, nullptr),
               "cgemm_4bit");
    return out.download();
}

template <class T>
std::vector<T> reference_int8(const Problem<T>& p) {
    std::vector<T> out(static_cast<size_t>(p.M * p.N));
    kbit::ref::gemm_4bit_int8(p.A.data(), p.B.data(), p.absmax.data(), p.nested ? p.q8.data() : nullptr,
                              p.code.data(), p.offset.data(), out.data(), p.with_bias ? p.bias.data() : nullptr, p.M,
                              p.N, p.K, p.bs, p.qt);
    return out;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The int8 class's bound (behaviour.md §3.6) on every output, against the fp64 product of the dequantized
// weights: with u = 2^-24, per element k of chunk c (amax_c = max |x|, d_c = amax_c / 127, s the block scale,
// level and lambda = |L/127 - level| of its nibble):
//   E_q  = sum |s| * (d_c * (1/2 + 512u) * (|level| + lambda) + |x| * lambda)       activations, levels
//   E_fp = gamma(K/32 + 4) * (sum |s| * (|x| + d_c) * (|level| + lambda) + |bias|)   fp32 terms and sums
//   |y - exact| <= E + u_T * (|exact| + E) + tiny_T,   E = E_q + E_fp + 1e-37
template <class T>
void check_int8_bound(const Problem<T>& p, const std::vector<T>& got) {
    const double u = 0x1.0p-24, nc = static_cast<double>(p.K / 32);
    const double gamma = (nc + 4) * u / (1 - (nc + 4) * u);
    for (int64_t i = 0; i < p.M; ++i) {
        std::vector<double> d(static_cast<size_t>(p.K / 32));
        for (int64_t c = 0; c < p.K / 32; ++c) {
            double amax = 0;
            for (int64_t k = c * 32; k < (c + 1) * 32; ++k)
                amax = std::max(amax, std::fabs(double(kbit::Elem<T>::load(p.A[i * p.K + k]))));
            d[c] = amax / 127;
        }
        for (int64_t j = 0; j < p.N; ++j) {
            double exact = 0, e_q = 0, s_abs = 0;
            for (int64_t k = 0; k < p.K; ++k) {
                const int64_t g = j * p.K + k;
                const int nib = kbit::nibble_at(p.B.data(), g);
                const double level = p.lut()[nib], lambda = std::fabs(p.levels()[nib] / 127.0 - level);
                const double s = p.scale(g / p.bs), x = kbit::Elem<T>::load(p.A[i * p.K + k]), dc = d[k / 32];
                exact += x * level * s;
                e_q += std::fabs(s) * (dc * (0.5 + 512 * u) * (std::fabs(level) + lambda) + std::fabs(x) * lambda);
                s_abs += std::fabs(s) * (std::fabs(x) + dc) * (std::fabs(level) + lambda);
            }
            const double b = p.with_bias ? double(kbit::Elem<T>::load(p.bias[j])) : 0.0;
            exact += b;
            const double e = e_q + gamma * (s_abs + std::fabs(b)) + 1e-37;
            const double bound = e + unit_roundoff<T>() * (std::fabs(exact) + e) + tiny_step<T>();
            const double y = kbit::Elem<T>::load(got[i * p.N + j]);
            INFO("row " << i << " output " << j << " got " << y << " exact " << exact << " bound " << bound);
            REQUIRE(std::fabs(y - exact) <= bound);
        }
    }
}

// The int8 class on one problem: within the bound, and on the CPU backend the reference's bytes.
template <class T>
void check_int8(const Problem<T>& p) {
    std::vector<T> got;
    require_ok(precision_call(p, KBIT_PRECISION_INT8, &got), "kbit_gemm_4bit_precision");
    check_int8_bound(p, got);
    if (backend_is_cpu()) CHECK(same_bytes(got, reference_int8(p)));
}

template <class T>
std::vector<T> reference_bf16(const Problem<T>& p) {
    std::vector<T> out(static_cast<size_t>(p.M * p.N));
    kbit::ref::gemm_4bit_bf16(p.A.data(), p.B.data(), p.absmax.data(), p.nested ? p.q8.data() : nullptr,
                              p.code.data(), p.offset.data(), out.data(), p.with_bias ? p.bias.data() : nullptr, p.M,
                              p.N, p.K, p.bs, p.qt);
    return out;
}

// The bf16 class's bound (behaviour.md §3.7) on every output, against the fp64 sum of x * w + bias with x the
// activation as fp32 and w = fp32(level * s) the dequantized fp32 weight: with u_b = 2^-8 (bf16), u = 2^-24,
// K_p = 32 * ceil(K / 32), S = sum |x * w|, gamma(m) = m * u / (1 - m * u),
//   E = (2 u_b + u_b^2) * S + gamma(K_p / 16 + 5) * ((1 + u_b)^2 * S + |bias|) + 2^-125 * (K_p + sum (|x| + |w|))
//   |y - exact| <= E + u_T * (|exact| + E) + tiny_T
template <class T>
void check_bf16_bound(const Problem<T>& p, const std::vector<T>& got) {
    const double u = 0x1.0p-24, ub = 0x1.0p-8, kp = static_cast<double>((p.K + 31) / 32 * 32);
    const double gamma = (kp / 16 + 5) * u / (1 - (kp / 16 + 5) * u);
    for (int64_t i = 0; i < p.M; ++i)
        for (int64_t j = 0; j < p.N; ++j) {
            double exact = 0, S = 0, tiny = kp;
            for (int64_t k = 0; k < p.K; ++k) {
                const int64_t g = j * p.K + k;
                const double w = static_cast<float>(p.lut()[kbit::nibble_at(p.B.data(), g)] * p.scale(g / p.bs));
                const double x = kbit::Elem<T>::load(p.A[i * p.K + k]);
                exact += x * w;
                S += std::fabs(x * w);
                tiny += std::fabs(x) + std::fabs(w);
            }
            const double b = p.with_bias ? double(kbit::Elem<T>::load(p.bias[j])) : 0.0;
            exact += b;
            const double e = (2 * ub + ub * ub) * S + gamma * ((1 + ub) * (1 + ub) * S + std::fabs(b)) + 0x1.0p-125 * tiny;
            const double bound = e + unit_roundoff<T>() * (std::fabs(exact) + e) + tiny_step<T>();
            const double y = kbit::Elem<T>::load(got[i * p.N + j]);
            INFO("row " << i << " output " << j << " got " << y << " exact " << exact << " bound " << bound);
            REQUIRE(std::fabs(y - exact) <= bound);
        }
}

// The bf16 class on one problem: within the bound, and on the CPU backend the reference's bytes.
template <class T>
void check_bf16(const Problem<T>& p) {
    std::vector<T> got;
    require_ok(precision_call(p, KBIT_PRECISION_BF16, &got), "kbit_gemm_4bit_precision");
    check_bf16_bound(p, got);
    if (backend_is_cpu()) CHECK(same_bytes(got, reference_bf16(p)));
}

// A backend at 4bit 1.2 rejects the bf16 class with 1.2's message; the case ends there.
bool skip_without_bf16() {
    if (skip_without_precision()) return true;
    if (backend_has_bf16()) return false;
    const Problem<float> p(2, 8, 64, 64, KBIT_QUANT_NF4, false, false, 5);
    std::vector<float> got;
    check_invalid(precision_call(p, KBIT_PRECISION_BF16, &got), precision_message(KBIT_PRECISION_BF16));
    return true;
}

}  // namespace

TEMPLATE_TEST_CASE("4bit precision: EXACT is cgemm_4bit's bytes", "[4bit][precision]" FN_PRECISION
                   "[fn:cgemm_4bit_fp32][fn:cgemm_4bit_fp16][fn:cgemm_4bit_bf16]",
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    if (skip_without_precision()) return;
    // K = 38 is no multiple of 32 (EXACT takes it); M = 20 reaches the prefill kernels.
    for (int32_t qt : {KBIT_QUANT_NF4, KBIT_QUANT_FP4})
        for (bool nested : {false, true})
            for (int64_t M : {1, 3, 20})
                for (int64_t K : {38, 256})
                    DYNAMIC_SECTION(kbit::Elem<T>::name << " qt " << qt << (nested ? " nested" : " plain") << " M " << M
                                                        << " K " << K) {
                        const Problem<T> p(M, 37, K, 64, qt, nested, M != 3, static_cast<uint32_t>(M * 1000 + K));
                        std::vector<T> got;
                        require_ok(precision_call(p, KBIT_PRECISION_EXACT, &got), "kbit_gemm_4bit_precision");
                        CHECK(same_bytes(got, cgemm(p)));
                    }
}

TEMPLATE_TEST_CASE("4bit precision: INT8 within its bound of fp64 at every blocksize, plain and nested",
                   "[4bit][precision]" FN_PRECISION_INT8, float, kbit_half, kbit_bf16) {
    using T = TestType;
    if (skip_without_precision()) return;
    // K = 96: blocks cross rows for every blocksize > 32 and rows cross blocks for 64 (K % bs != 0);
    // K = 512: rows start blocks up to 512.
    for (int32_t qt : {KBIT_QUANT_NF4, KBIT_QUANT_FP4})
        for (bool nested : {false, true})
            for (int64_t bs : kBlocksizes)
                for (int64_t K : {96, 512})
                    DYNAMIC_SECTION(kbit::Elem<T>::name << " qt " << qt << (nested ? " nested" : " plain") << " bs "
                                                        << bs << " K " << K) {
                        check_int8(Problem<T>(3, 37, K, bs, qt, nested, true, static_cast<uint32_t>(bs + K + qt)));
                    }
}

TEMPLATE_TEST_CASE("4bit precision: INT8 for M = 1, 3, 8, 16, 17 and odd N", "[4bit][precision]" FN_PRECISION_INT8,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    if (skip_without_precision()) return;
    // N = 37 leaves partial tiles of 8 and 16 output rows; M = 17 is one tile of 16 and one of 1.
    for (int32_t qt : {KBIT_QUANT_NF4, KBIT_QUANT_FP4})
        for (int64_t M : {1, 3, 8, 16, 17})
            for (int64_t N : {1, 37})
                DYNAMIC_SECTION(kbit::Elem<T>::name << " qt " << qt << " M " << M << " N " << N) {
                    check_int8(Problem<T>(M, N, 1024, 64, qt, M % 2 == 1, N != 1, static_cast<uint32_t>(M * 7 + N)));
                }
}

TEST_CASE("4bit precision: INT8 does not depend on the thread count", "[4bit][precision]" FN_PRECISION) {
    if (skip_without_precision()) return;
    // 4099 output rows: threads split them on the kernel's tile, never inside a sum.
    const Problem<float> p(5, 4099, 256, 128, KBIT_QUANT_NF4, false, true, 99);
    std::vector<float> one, many;
    {
        ThreadScope threads(1);
        require_ok(precision_call(p, KBIT_PRECISION_INT8, &one), "one thread");
    }
    {
        ThreadScope threads(7);
        require_ok(precision_call(p, KBIT_PRECISION_INT8, &many), "seven threads");
    }
    CHECK(same_bytes(one, many));
}

TEST_CASE("4bit precision: INT8 special chunks (Inf, NaN, zeros, subnormals)", "[4bit][precision]" FN_PRECISION_INT8) {
    if (skip_without_precision()) return;
    Problem<float> p(4, 19, 128, 64, KBIT_QUANT_NF4, false, false, 3);
    p.A[0 * 128 + 40] = std::numeric_limits<float>::infinity();   // row 0, chunk 1
    p.A[1 * 128 + 100] = std::numeric_limits<float>::quiet_NaN();  // row 1, chunk 3
    for (int k = 0; k < 32; ++k) p.A[2 * 128 + k] = 0.0f;          // row 2: chunk 0 all zeros
    for (int k = 32; k < 64; ++k) p.A[2 * 128 + k] = (k % 3 - 1) * 1e-40f;  // chunk 1 subnormal: 127 / amax = inf
    std::vector<float> got;
    require_ok(precision_call(p, KBIT_PRECISION_INT8, &got), "kbit_gemm_4bit_precision");
    for (int64_t j = 0; j < p.N; ++j) {
        INFO("output " << j);
        CHECK(std::isnan(got[0 * p.N + j]));
        CHECK(std::isnan(got[1 * p.N + j]));
        CHECK(std::isfinite(got[2 * p.N + j]));
        CHECK(std::isfinite(got[3 * p.N + j]));
    }
    // Rows 2 and 3 within the bound (rows 0 and 1 cut off).
    Problem<float> finite = p;
    finite.M = 2;
    finite.A.erase(finite.A.begin(), finite.A.begin() + 2 * 128);
    std::vector<float> rows23(got.begin() + 2 * p.N, got.end());
    check_int8_bound(finite, rows23);
    if (backend_is_cpu()) {
        const auto ref = reference_int8(p);
        for (size_t i = 0; i < got.size(); ++i) {
            INFO("element " << i);
            if (std::isnan(ref[i])) CHECK(std::isnan(got[i]));
            else CHECK(std::memcmp(&got[i], &ref[i], 4) == 0);
        }
    }
}

TEST_CASE("4bit precision: the int8 levels are round(127 * level)", "[4bit][precision]") {
    // The table behaviour.md §3.6 prints, against the format tables; and its largest rounding.
    double nf4_max = 0, fp4_max = 0;
    for (int i = 0; i < 16; ++i) {
        CHECK(kbit::kNf4Int8Levels[i] == static_cast<int>(std::lround(127.0 * kbit::kNf4Values[i])));
        CHECK(kbit::kFp4Int8Levels[i] == static_cast<int>(std::lround(127.0 * kbit::kFp4Values[i])));
        nf4_max = std::max(nf4_max, std::fabs(kbit::kNf4Int8Levels[i] / 127.0 - kbit::kNf4Values[i]));
        fp4_max = std::max(fp4_max, std::fabs(kbit::kFp4Int8Levels[i] / 127.0 - kbit::kFp4Values[i]));
    }
    CHECK(nf4_max == Approx(0.0036711).margin(1e-7));
    CHECK(fp4_max == Approx(1.0 / 254).margin(1e-9));
}

TEST_CASE("4bit precision: K = 0 gives the bias, M = 0 or N = 0 touches nothing", "[4bit][precision]" FN_PRECISION) {
    if (skip_without_precision()) return;
    for (int32_t precision : {KBIT_PRECISION_EXACT, KBIT_PRECISION_BF16, KBIT_PRECISION_INT8}) {
        if (precision == KBIT_PRECISION_BF16 && !backend_has_bf16()) continue;
        const float bias[3] = {1.5f, -2.0f, 0.25f};
        DeviceBuffer<float> dbias(std::vector<float>(bias, bias + 3)), out(std::vector<float>(6, 9.0f));
        require_ok(backend().fns_4bit.kbit_gemm_4bit_precision(precision, KBIT_DTYPE_FP32, nullptr, nullptr, nullptr,
                                                               nullptr, nullptr, nullptr, out.get(), dbias.get(), 2, 3,
                                                               0, 64, KBIT_QUANT_NF4, nullptr),
                   "K = 0");
        CHECK(out.download() == std::vector<float>{1.5f, -2.0f, 0.25f, 1.5f, -2.0f, 0.25f});
        CHECK(backend().fns_4bit.kbit_gemm_4bit_precision(precision, KBIT_DTYPE_FP32, nullptr, nullptr, nullptr,
                                                          nullptr, nullptr, nullptr, nullptr, nullptr, 0, 3, 64, 64,
                                                          KBIT_QUANT_NF4, nullptr) == KBIT_STATUS_SUCCESS);
        CHECK(backend().fns_4bit.kbit_gemm_4bit_precision(precision, KBIT_DTYPE_FP32, nullptr, nullptr, nullptr,
                                                          nullptr, nullptr, nullptr, nullptr, nullptr, 2, 0, 64, 64,
                                                          KBIT_QUANT_NF4, nullptr) == KBIT_STATUS_SUCCESS);
    }
}

TEST_CASE("4bit precision: bad input gets its message and writes nothing", "[4bit][precision][errors]" FN_PRECISION) {
    if (skip_without_precision()) return;
    const std::string fn = "kbit_gemm_4bit_precision: ";
    const Problem<float> p(2, 8, 64, 64, KBIT_QUANT_NF4, false, false, 5);
    std::vector<float> fill(16);
    std::memset(static_cast<void*>(fill.data()), 0x5a, fill.size() * sizeof(float));
    DeviceBuffer<float> dA(p.A), dabs(p.absmax), out(fill);
    DeviceBuffer<uint8_t> dB(p.B);
    auto call = [&](int32_t precision, int32_t dtype, const void* A, const uint8_t* B, const float* absmax, void* o,
                    int64_t M, int64_t N, int64_t K, int64_t bs) {
        return backend().fns_4bit.kbit_gemm_4bit_precision(precision, dtype, A, B, absmax, nullptr, nullptr, nullptr, o,
                                                           nullptr, M, N, K, bs, KBIT_QUANT_NF4, nullptr);
    };
    const auto F = KBIT_DTYPE_FP32;
    if (!backend_has_bf16())
        check_invalid(call(KBIT_PRECISION_BF16, F, dA.get(), dB.get(), dabs.get(), out.get(), 2, 8, 64, 64),
                      precision_message(1));
    check_invalid(call(3, F, dA.get(), dB.get(), dabs.get(), out.get(), 2, 8, 64, 64), precision_message(3));
    check_invalid(call(-1, F, dA.get(), dB.get(), dabs.get(), out.get(), 0, 0, 0, 64), precision_message(-1));
    // The bf16 class has the exact class's rules: any even K.
    check_invalid(call(backend_has_bf16() ? KBIT_PRECISION_BF16 : KBIT_PRECISION_EXACT, F, dA.get(), dB.get(),
                       dabs.get(), out.get(), 2, 8, 63, 64),
                  fn + "K is 63, must be even");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(), out.get(), 2, 4, 48, 64),
                  fn + "K is 48, must be a multiple of 32 for KBIT_PRECISION_INT8");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(), out.get(), 0, 4, 48, 64),
                  fn + "K is 48, must be a multiple of 32 for KBIT_PRECISION_INT8");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(), out.get(), 2, 8, 63, 64),
                  fn + "K is 63, must be even");
    check_invalid(call(KBIT_PRECISION_INT8, 5, dA.get(), dB.get(), dabs.get(), out.get(), 2, 8, 64, 64),
                  fn + "dtype 5 is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(), out.get(), -1, 8, 64, 64),
                  fn + "M is -1, must be >= 0");
    check_invalid(call(KBIT_PRECISION_EXACT, F, dA.get(), dB.get(), dabs.get(), out.get(), 2, int64_t{1} << 31, 64, 64),
                  fn + "N is 2147483648, must be <= 2147483647");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(), out.get(), 2, 8, 64, 48),
                  fn + "blocksize 48 is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096");
    check_invalid(call(KBIT_PRECISION_INT8, F, nullptr, dB.get(), dabs.get(), out.get(), 2, 8, 64, 64), fn + "A is NULL");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), nullptr, dabs.get(), out.get(), 2, 8, 64, 64), fn + "B is NULL");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), nullptr, out.get(), 2, 8, 64, 64),
                  fn + "absmax is NULL");
    check_invalid(call(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(), nullptr, 2, 8, 64, 64), fn + "out is NULL");
    check_invalid(backend().fns_4bit.kbit_gemm_4bit_precision(KBIT_PRECISION_INT8, F, dA.get(), dB.get(), dabs.get(),
                                                              dB.get(), nullptr, nullptr, out.get(), nullptr, 2, 8, 64,
                                                              64, KBIT_QUANT_NF4, nullptr),
                  fn + "absmax_code is NULL");
    CHECK(same_bytes(out.download(), fill));
}

TEMPLATE_TEST_CASE("4bit precision: BF16 within its bound of fp64 at every blocksize, plain and nested",
                   "[4bit][precision]" FN_PRECISION_BF16, float, kbit_half, kbit_bf16) {
    using T = TestType;
    if (skip_without_bf16()) return;
    // K = 96: blocks cross rows for every blocksize > 32; K = 38 and 70: a last group of 6 elements and groups of
    // 32 that cross blocks (K % 32 != 0); K = 512: rows start blocks up to 512.
    for (int32_t qt : {KBIT_QUANT_NF4, KBIT_QUANT_FP4})
        for (bool nested : {false, true})
            for (int64_t bs : kBlocksizes)
                for (int64_t K : {38, 70, 96, 512})
                    DYNAMIC_SECTION(kbit::Elem<T>::name << " qt " << qt << (nested ? " nested" : " plain") << " bs "
                                                        << bs << " K " << K) {
                        check_bf16(Problem<T>(3, 37, K, bs, qt, nested, true, static_cast<uint32_t>(bs + K + qt)));
                    }
}

TEMPLATE_TEST_CASE("4bit precision: BF16 for M = 1 .. 17, 33 and odd N", "[4bit][precision]" FN_PRECISION_BF16,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    if (skip_without_bf16()) return;
    // Every tile height of the kernels (1 .. 16), a tile of 16 and one of 1, three tiles; N = 37 leaves partial
    // tiles of weight rows.
    for (int32_t qt : {KBIT_QUANT_NF4, KBIT_QUANT_FP4})
        for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 33})
            for (int64_t N : {1, 37})
                DYNAMIC_SECTION(kbit::Elem<T>::name << " qt " << qt << " M " << M << " N " << N) {
                    check_bf16(Problem<T>(M, N, 512, 64, qt, M % 2 == 1, N != 1, static_cast<uint32_t>(M * 7 + N)));
                }
}

TEST_CASE("4bit precision: BF16 is the same on every call and at 1, 2 and 3 threads", "[4bit][precision]" FN_PRECISION) {
    if (skip_without_bf16()) return;
    // 4099 output rows: threads split them on the kernel's tile, never inside a sum.
    for (int64_t M : {1, 5, 20}) {
        INFO("M " << M);
        const Problem<float> p(M, 4099, 256, 128, KBIT_QUANT_NF4, M == 5, true, 99);
        std::vector<float> first, again;
        {
            ThreadScope threads(1);
            require_ok(precision_call(p, KBIT_PRECISION_BF16, &first), "one thread");
            require_ok(precision_call(p, KBIT_PRECISION_BF16, &again), "one thread again");
            CHECK(same_bytes(first, again));
        }
        for (int n : {2, 3}) {
            ThreadScope threads(n);
            require_ok(precision_call(p, KBIT_PRECISION_BF16, &again), "threads");
            CHECK(same_bytes(first, again));
        }
    }
}

TEST_CASE("4bit precision: BF16 with Inf, NaN, subnormals and underflowing products", "[4bit][precision]" FN_PRECISION_BF16) {
    if (skip_without_bf16()) return;
    Problem<float> p(6, 19, 128, 64, KBIT_QUANT_NF4, false, false, 3);
    p.A[0 * 128 + 40] = std::numeric_limits<float>::quiet_NaN();   // row 0: NaN everywhere
    p.A[1 * 128 + 100] = std::numeric_limits<float>::infinity();   // row 1: +-Inf, or NaN where its weight is 0
    for (int k = 0; k < 128; ++k) p.A[2 * 128 + k] = (k % 3 - 1) * 1e-40f;  // row 2: subnormal (read as zero)
    for (int k = 0; k < 128; ++k) p.A[3 * 128 + k] *= 1e-20f;               // row 3: products near and below 2^-126
    for (int k = 0; k < 128; ++k) p.A[4 * 128 + k] *= 3e-18f;
    std::vector<float> got;
    require_ok(precision_call(p, KBIT_PRECISION_BF16, &got), "kbit_gemm_4bit_precision");
    for (int64_t j = 0; j < p.N; ++j) {
        INFO("output " << j);
        CHECK(std::isnan(got[0 * p.N + j]));
        const int nib = kbit::nibble_at(p.B.data(), j * 128 + 100);
        if (kbit::kNf4Values[nib] == 0.0f) CHECK(std::isnan(got[1 * p.N + j]));
        else CHECK(!std::isfinite(got[1 * p.N + j]));
        CHECK(got[2 * p.N + j] == 0.0f);
    }
    // Rows 2 .. 5 within the bound (rows 0 and 1 cut off).
    Problem<float> finite = p;
    finite.M = 4;
    finite.A.erase(finite.A.begin(), finite.A.begin() + 2 * 128);
    check_bf16_bound(finite, std::vector<float>(got.begin() + 2 * p.N, got.end()));
    if (backend_is_cpu()) {
        const auto ref = reference_bf16(p);
        for (size_t i = 0; i < got.size(); ++i) {
            INFO("element " << i);
            if (std::isnan(ref[i])) CHECK(std::isnan(got[i]));
            else CHECK(std::memcmp(&got[i], &ref[i], 4) == 0);
        }
    }
}

TEST_CASE("4bit precision: BF16 with tiny block scales (subnormal weights, flushed lanes)", "[4bit][precision]" FN_PRECISION_BF16) {
    if (skip_without_bf16()) return;
    // Scales near 2^-126: some weights are subnormal (read as zero), sums cross the subnormal range.
    Problem<float> p(3, 23, 256, 32, KBIT_QUANT_FP4, false, true, 11);
    for (size_t b = 0; b < p.absmax.size(); ++b) p.absmax[b] = std::ldexp(1.0f + (b % 7) / 8.0f, -120 - static_cast<int>(b % 12));
    for (auto& x : p.A) x *= 4.0f;
    for (auto& b : p.bias) b *= 1e-37f;
    check_bf16(p);
}

TEST_CASE("4bit precision: a backend at 4bit 1.2 rejects KBIT_PRECISION_BF16 by its minor", "[4bit][precision][errors]") {
    // The shared check (kbit_validate_4bit.h) that every backend's export runs, at the minors 1.2 and 1.3.
    const uint8_t b = 0;
    const float f = 0.0f;
    bool empty = false;
    for (int minor : {2, 3}) {
        INFO("minor " << minor);
        const kbit_status s = kbit::validate_gemm_4bit_precision("kbit_gemm_4bit_precision", minor, KBIT_PRECISION_BF16,
                                                                 KBIT_DTYPE_FP32, &f, &b, &f, nullptr, nullptr,
                                                                 nullptr, &f, 1, 1, 2, 64, &empty);
        CHECK(s == (minor >= 3 ? KBIT_STATUS_SUCCESS : KBIT_STATUS_INVALID_ARGUMENT));
    }
}
