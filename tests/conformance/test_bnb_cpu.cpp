// The optional bitsandbytes-CPU interface (include/kbit/kbit_bnb_cpu.h), where the backend file exports
// it (the CPU backend; other backends skip these cases). Its functions take host memory and are not in
// the loader's tables: open_backend() resolves them from the backend's file with dlsym. Checked: the GEMV on
// bitsandbytes' repacked layout against an fp64 evaluation (the class F bound of test_4bit_gemv.cpp)
// and exactly where every sum is exact; the 8-bit and 4-bit functions against the reference for
// blocksizes kbit's own interfaces do not take; the feature queries against the kernels in use.
#include "kbit/kbit_bnb_cpu.h"
#include "kbit_dynamic_map.h"
#include "ref_8bit.h"
#include "test_4bit_util.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

// The interface's functions of the backend under test, or nullptr when its file does not export it.
const Fns_bnb_cpu* bnb_fns() { return backend().has_bnb_cpu() ? &backend().fns_bnb_cpu : nullptr; }

using GemvFn = kbit_status (*)(int64_t, int64_t, int64_t, const kbit_bf16*, const unsigned char*, const kbit_bf16*,
                               kbit_bf16*, int64_t, int64_t, int64_t);

// bitsandbytes' CPU layout of an N x K nibble matrix q (row-major): see kbit_bnb_cpu.h.
std::vector<uint8_t> repack(const std::vector<uint8_t>& q, int64_t N, int64_t K) {
    std::vector<uint8_t> w(static_cast<size_t>(N * K / 2));
    for (int64_t o = 0; o < N; ++o)
        for (int64_t k = 0; k < K; ++k) {
            const int64_t g = o / 32, r = o % 32;
            uint8_t& byte = w[static_cast<size_t>((g * (K / 2) + k / 2) * 32 + 2 * (r % 16) + k % 2)];
            byte = static_cast<uint8_t>(r < 16 ? (byte & 0xF0) | q[o * K + k] : (byte & 0x0F) | (q[o * K + k] << 4));
        }
    return w;
}

kbit_bf16 bf16(float x) { return kbit_bf16{kbit::float_to_bf16(x)}; }
double as_double(kbit_bf16 x) { return kbit::bf16_to_float(x.bits); }

// The interface's functions of element type T (fp32, fp16, bf16).
template <class T>
auto quantize_8bit(const Fns_bnb_cpu& f) {
    if constexpr (std::is_same_v<T, float>) return f.cquantize_blockwise_cpu_fp32;
    else if constexpr (std::is_same_v<T, kbit_half>) return f.cquantize_blockwise_cpu_fp16;
    else return f.cquantize_blockwise_cpu_bf16;
}
template <class T>
auto dequantize_8bit(const Fns_bnb_cpu& f) {
    if constexpr (std::is_same_v<T, float>) return f.cdequantize_blockwise_cpu_fp32;
    else if constexpr (std::is_same_v<T, kbit_half>) return f.cdequantize_blockwise_cpu_fp16;
    else return f.cdequantize_blockwise_cpu_bf16;
}
template <class T>
auto dequantize_4bit(const Fns_bnb_cpu& f, QuantType q) {
    const bool nf4 = q == QuantType::NF4;
    if constexpr (std::is_same_v<T, float>)
        return nf4 ? f.cdequantize_blockwise_cpu_nf4_fp32 : f.cdequantize_blockwise_cpu_fp4_fp32;
    else if constexpr (std::is_same_v<T, kbit_half>)
        return nf4 ? f.cdequantize_blockwise_cpu_nf4_fp16 : f.cdequantize_blockwise_cpu_fp4_fp16;
    else return nf4 ? f.cdequantize_blockwise_cpu_nf4_bf16 : f.cdequantize_blockwise_cpu_fp4_bf16;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Quantizes x with the interface's 8-bit quantize of TIn and dequantizes the codes to TOut: codes,
// absmax and elements equal the reference byte for byte, and the table is only read.
template <class TIn, class TOut>
void check_8bit_blockwise(const Fns_bnb_cpu& f, const std::vector<float>& code, const std::vector<TIn>& x, int64_t bs) {
    const auto n = static_cast<int64_t>(x.size());
    const auto blocks = static_cast<size_t>((n + bs - 1) / bs);
    std::vector<float> absmax(blocks), exp_absmax(blocks);
    std::vector<uint8_t> q(x.size()), exp_q(x.size());
    auto c = code;
    require_ok(quantize_8bit<TIn>(f)(c.data(), const_cast<TIn*>(x.data()), absmax.data(), q.data(), bs, n), "quantize");
    kbit::ref::quantize_blockwise_8bit(code.data(), x.data(), exp_absmax.data(), exp_q.data(), bs, n);
    CHECK(q == exp_q);
    CHECK(same_bytes(absmax, exp_absmax));
    std::vector<TOut> deq(x.size()), exp_deq(x.size());
    require_ok(dequantize_8bit<TOut>(f)(c.data(), q.data(), absmax.data(), deq.data(), bs, n), "dequantize");
    kbit::ref::dequantize_blockwise_8bit(code.data(), q.data(), absmax.data(), exp_deq.data(), bs, n);
    CHECK(same_bytes(deq, exp_deq));
    CHECK(c == code);
}

}  // namespace

TEST_CASE("bnb_cpu: GEMV on bitsandbytes' CPU layout within the class F bound", "[bnb_cpu][gemv]"
          "[fn:gemv_4bit_inference_cpu_fp4_bf16][fn:gemv_4bit_inference_cpu_nf4_bf16]") {
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    struct Case {
        int64_t M, N, K, bs;
    };
    const Case cases[] = {{1, 32, 64, 64},    {1, 64, 4096, 64}, {3, 96, 512, 128}, {1, 32, 8192, 4096},
                          {2, 32, 96, 32},    {1, 32, 32, 2},    {5, 64, 1024, 256}, {4, 128, 320, 10}};
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        const GemvFn fn = q == QuantType::NF4 ? f->gemv_4bit_inference_cpu_nf4_bf16 : f->gemv_4bit_inference_cpu_fp4_bf16;
        const float* lut = kbit::ref::lut_4bit(q);
        for (const Case& c : cases) {
            DYNAMIC_SECTION(qt_name(q) << " M " << c.M << " N " << c.N << " K " << c.K << " blocksize " << c.bs) {
                const auto nib = random_bytes(static_cast<size_t>(c.N * c.K), static_cast<uint32_t>(c.K + c.N));
                std::vector<uint8_t> q4(nib.size());
                for (size_t i = 0; i < nib.size(); ++i) q4[i] = nib[i] & 0x0F;
                const auto w = repack(q4, c.N, c.K);
                const auto scales = normal_floats(static_cast<size_t>(c.K / c.bs * c.N), 7);
                std::vector<kbit_bf16> absmax(scales.size());
                for (size_t i = 0; i < scales.size(); ++i) absmax[i] = bf16(std::fabs(scales[i]) + 0.01f);
                const auto xs = normal_floats(static_cast<size_t>(c.M * c.K), 11);
                std::vector<kbit_bf16> x(xs.size());
                for (size_t i = 0; i < xs.size(); ++i) x[i] = bf16(xs[i]);
                const int64_t ldo = c.N + 5;  // the gaps must stay untouched
                std::vector<kbit_bf16> out(static_cast<size_t>(c.M * ldo), bf16(7.0f));
                require_ok(fn(c.M, c.N, c.K, x.data(), w.data(), absmax.data(), out.data(), c.bs, c.K, ldo), "gemv");
                for (int64_t m = 0; m < c.M; ++m)
                    for (int64_t o = 0; o < ldo; ++o) {
                        const double got = as_double(out[static_cast<size_t>(m * ldo + o)]);
                        if (o >= c.N) {
                            CHECK(got == 7.0);
                            continue;
                        }
                        double exact = 0, abs_sum = 0;
                        for (int64_t k = 0; k < c.K; ++k) {
                            const double p = as_double(x[static_cast<size_t>(m * c.K + k)]) *
                                             static_cast<double>(lut[q4[static_cast<size_t>(o * c.K + k)]]) *
                                             as_double(absmax[static_cast<size_t>((k / c.bs) * c.N + o)]);
                            exact += p;
                            abs_sum += std::fabs(p);
                        }
                        const double u = 0x1.0p-24, g = (c.K + 4) * u / (1 - (c.K + 4) * u);
                        const double bound = g * abs_sum + 0x1.0p-8 * (std::fabs(exact) + g * abs_sum) + 0x1.0p-133;
                        INFO("m " << m << " o " << o << " got " << got << " exact " << exact);
                        CHECK(std::fabs(got - exact) <= bound);
                    }
            }
        }
    }
}

TEST_CASE("bnb_cpu: GEMV is exact when every product and sum is", "[bnb_cpu][gemv]"
          "[fn:gemv_4bit_inference_cpu_nf4_bf16]") {
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    const int64_t M = 2, N = 64, K = 128, bs = 64;
    // NF4 codes 7, 15, 0 are 0, 1, -1; activations small integers, scales powers of two.
    std::vector<uint8_t> q4(static_cast<size_t>(N * K));
    for (size_t i = 0; i < q4.size(); ++i) q4[i] = static_cast<uint8_t>(i % 3 == 0 ? 7 : i % 3 == 1 ? 15 : 0);
    std::vector<kbit_bf16> absmax(static_cast<size_t>(K / bs * N));
    for (size_t i = 0; i < absmax.size(); ++i) absmax[i] = bf16(i % 2 ? 0.5f : 2.0f);
    std::vector<kbit_bf16> x(static_cast<size_t>(M * K));
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16(static_cast<float>(static_cast<int>(i % 7) - 3));
    std::vector<kbit_bf16> out(static_cast<size_t>(M * N));
    const auto w = repack(q4, N, K);
    require_ok(f->gemv_4bit_inference_cpu_nf4_bf16(M, N, K, x.data(), w.data(), absmax.data(), out.data(), bs, K, N),
               "gemv");
    for (int64_t m = 0; m < M; ++m)
        for (int64_t o = 0; o < N; ++o) {
            double exact = 0;
            for (int64_t k = 0; k < K; ++k)
                exact += as_double(x[static_cast<size_t>(m * K + k)]) * kbit::kNf4Values[q4[static_cast<size_t>(o * K + k)]] *
                         as_double(absmax[static_cast<size_t>((k / bs) * N + o)]);
            CHECK(as_double(out[static_cast<size_t>(m * N + o)]) == static_cast<double>(kbit::bf16_to_float(kbit::float_to_bf16(static_cast<float>(exact)))));
        }
}

TEST_CASE("bnb_cpu: 8-bit blockwise for any blocksize equals the reference", "[bnb_cpu][8bit]"
          "[fn:cquantize_blockwise_cpu_fp32][fn:cdequantize_blockwise_cpu_bf16]") {
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    const auto code = dynamic_map(true);
    const int64_t n = 3 * 16384 + 101;
    const auto x = normal_floats(static_cast<size_t>(n), 5, 2.0f);
    // Odd blocksizes put block ends at every position of a SIMD step (33, 1001), even ones at some.
    for (int64_t bs : {int64_t{1}, int64_t{3}, int64_t{33}, int64_t{100}, int64_t{1001}, int64_t{4096}, int64_t{16384},
                       int64_t{1} << 20}) {
        DYNAMIC_SECTION("blocksize " << bs) {
            check_8bit_blockwise<float, kbit_bf16>(*f, code, x, bs);
        }
    }
}

// Every element type, with zeros, signed zeros, NaN, infinities, all-NaN and subnormal blocks.
TEMPLATE_TEST_CASE("bnb_cpu: 8-bit blockwise of each element type equals the reference", "[bnb_cpu][8bit]"
                   FN_BNB_CPU_8BIT, float, kbit_half, kbit_bf16) {
    using T = TestType;
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    const auto code = dynamic_map(true);
    for (int64_t bs : {int64_t{1}, int64_t{33}, int64_t{256}, int64_t{4096}}) {
        DYNAMIC_SECTION("blocksize " << bs) {
            const int64_t n = 9 * bs + 17;  // every special block of special_input(), a partial last block
            check_8bit_blockwise<T, T>(*f, code, to_elems<T>(special_input(n, bs, 31)), bs);
        }
    }
}

TEMPLATE_TEST_CASE("bnb_cpu: 4-bit (m, n) dequantize over flat blocks equals the reference", "[bnb_cpu][4bit]"
                   FN_BNB_CPU_DEQUANTIZE_4BIT, float, kbit_half, kbit_bf16) {
    using T = TestType;
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    struct Case {
        int64_t bs, m, n;
    };
    for (const Case c : {Case{64, 3, 256}, Case{48, 7, 96}, Case{100, 3, 50}, Case{16384, 1, 40000}, Case{7, 1, 1}}) {
        for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
            DYNAMIC_SECTION(qt_name(q) << " blocksize " << c.bs << " m " << c.m << " n " << c.n) {
                const int64_t total = c.m * c.n;
                const auto packed = random_bytes(static_cast<size_t>((total + 1) / 2), 3);
                const auto scales = normal_floats(static_cast<size_t>((total + c.bs - 1) / c.bs), 9);
                std::vector<T> out(static_cast<size_t>(total)), exp(static_cast<size_t>(total));
                require_ok(dequantize_4bit<T>(*f, q)(const_cast<uint8_t*>(packed.data()), scales.data(), out.data(),
                                                     c.bs, c.m, c.n),
                           "dequantize");
                kbit::ref::dequantize_4bit_range(q, packed.data(), scales.data(), exp.data(), c.bs, 0, total);
                CHECK(same_bytes(out, exp));
            }
        }
    }
}

TEST_CASE("bnb_cpu: bad arguments are rejected before anything is written", "[bnb_cpu][errors]"
          "[fn:cquantize_blockwise_cpu_fp32][fn:cquantize_blockwise_cpu_bf16][fn:cdequantize_blockwise_cpu_fp32]"
          "[fn:cdequantize_blockwise_cpu_nf4_fp32][fn:gemv_4bit_inference_cpu_fp4_bf16]"
          "[fn:gemv_4bit_inference_cpu_nf4_bf16]") {
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    std::vector<float> code = dynamic_map(true), x(64, 1.0f), absmax(4, 5.0f);
    std::vector<uint8_t> q(64, 9);
    check_invalid(f->cquantize_blockwise_cpu_fp32(code.data(), x.data(), absmax.data(), q.data(), 0, 64),
                  "cquantize_blockwise_cpu_fp32: blocksize is 0, must be > 0");
    check_invalid(f->cdequantize_blockwise_cpu_fp32(code.data(), q.data(), absmax.data(), x.data(), 64, -3),
                  "cdequantize_blockwise_cpu_fp32: n is -3, must be >= 0");
    check_invalid(f->cdequantize_blockwise_cpu_nf4_fp32(q.data(), absmax.data(), nullptr, 64, 1, 64),
                  "cdequantize_blockwise_cpu_nf4_fp32: out is NULL");
    std::vector<kbit_bf16> xb(64, bf16(1.0f)), ab(64, bf16(1.0f)), ob(64, bf16(3.0f));
    check_invalid(f->gemv_4bit_inference_cpu_nf4_bf16(1, 40, 64, xb.data(), q.data(), ab.data(), ob.data(), 64, 64, 40),
                  "gemv_4bit_inference_cpu_nf4_bf16: N is 40, must be a multiple of 32");
    check_invalid(f->gemv_4bit_inference_cpu_fp4_bf16(1, 32, 64, xb.data(), q.data(), ab.data(), ob.data(), 48, 64, 32),
                  "gemv_4bit_inference_cpu_fp4_bf16: K is 64, must be a multiple of blocksize 48");
    CHECK(q == std::vector<uint8_t>(64, 9));
    CHECK(absmax == std::vector<float>(4, 5.0f));
    for (kbit_bf16 v : ob) CHECK(as_double(v) == 3.0);
    CHECK(f->cquantize_blockwise_cpu_bf16(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("bnb_cpu: feature queries name the kernels in use", "[bnb_cpu][core]"
          "[fn:kbit_backend_info][fn:has_avx512f_cpu][fn:has_avx512bf16_cpu]") {
    const Fns_bnb_cpu* f = bnb_fns();
    if (f == nullptr) return;
    const std::string info = backend().fns_core.kbit_backend_info();
    const bool avx512 = info.find("kernels: avx512 ") != std::string::npos ||  // or any level above it
                        info.find("kernels: avx512vbmi ") != std::string::npos;
    // kbit_bnb_cpu_interface_version(), read by open_backend().
    CHECK(backend().bnb_cpu_version == ((KBIT_BNB_CPU_VERSION_MAJOR << 16) | KBIT_BNB_CPU_VERSION_MINOR));
    CHECK(f->has_avx512f_cpu() == avx512);
    if (!avx512) CHECK_FALSE(f->has_avx512bf16_cpu());
#if defined(__x86_64__)
    if (avx512) CHECK(f->has_avx512bf16_cpu() == static_cast<bool>(__builtin_cpu_supports("avx512bf16")));
#endif
}
