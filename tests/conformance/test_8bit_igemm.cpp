// cigemmlt_32 / _8 / _8_rowscale in bitsandbytes' convention (m = K, n = tokens, k = outputs, A = the
// weight [k][lda], B = the activations [n][ldb], C [n][ldc]) against an exact int64 product computed
// here, over shapes that reach every blocking edge, padded leading dimensions and extreme values.
#include <memory>

#include <catch2/catch.hpp>

#include "kbit_int8_rules.h"
#include "ref_8bit.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

struct Shape {
    int m, n, k, pad_a, pad_b, pad_c;
};

// C[t][o] = sum_i A[o][i] * B[t][i] in int64, then wrapped to int32 as an int32 accumulator does.
std::vector<int64_t> exact_product(const Shape& s, const std::vector<int8_t>& A, const std::vector<int8_t>& B) {
    const int lda = s.m + s.pad_a, ldb = s.m + s.pad_b;
    std::vector<int64_t> c(static_cast<size_t>(s.n) * s.k);
    for (int t = 0; t < s.n; ++t)
        for (int o = 0; o < s.k; ++o) {
            int64_t acc = 0;
            for (int i = 0; i < s.m; ++i) acc += int64_t{A[size_t(o) * lda + i]} * int64_t{B[size_t(t) * ldb + i]};
            c[size_t(t) * s.k + o] = acc;
        }
    return c;
}

int32_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

std::vector<int8_t> int8_data(size_t n, uint32_t seed, int mode) {
    std::mt19937 rng(seed);
    std::vector<int8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        switch (mode) {
            case 0: v[i] = static_cast<int8_t>(rng() >> 24); break;                  // full range
            case 1: v[i] = (rng() & 1) ? int8_t{127} : int8_t{-128}; break;         // extremes
            default: v[i] = int8_t{-128}; break;                                      // largest products
        }
    }
    return v;
}

// Runs one cigemmlt variant; checks the padding of C (sentinel) is untouched.
template <class T>
std::vector<T> run(kbit_status (*fn)(kbit_context*, int, int, int, const int8_t*, const int8_t*, void*, float*, int, int,
                                     int, void*),
                   const Shape& s, const std::vector<int8_t>& A, const std::vector<int8_t>& B, const float* row_scale) {
    const int lda = s.m + s.pad_a, ldb = s.m + s.pad_b, ldc = s.k + s.pad_c;
    kbit_context* ctx = backend().fns_8bit.get_context();
    REQUIRE(ctx != nullptr);
    DeviceBuffer<int8_t> dA(A), dB(B);
    DeviceBuffer<T> dC(static_cast<size_t>(s.n) * ldc);
    dC.fill_bytes(0x7E);
    std::vector<float> scale(row_scale ? row_scale : nullptr, row_scale ? row_scale + s.k : nullptr);
    DeviceBuffer<float> dscale(scale.empty() ? std::vector<float>(1, 0.0f) : scale);
    const kbit_status st = fn(ctx, s.m, s.n, s.k, dA.get(), dB.get(), dC.get(), row_scale ? dscale.get() : nullptr, lda,
                              ldb, ldc, nullptr);
    CHECK(backend().fns_8bit.kbit_context_destroy(ctx) == KBIT_STATUS_SUCCESS);
    require_ok(st, "cigemmlt");
    const auto all = dC.download();
    T sentinel;
    std::memset(&sentinel, 0x7E, sizeof sentinel);
    std::vector<T> c(static_cast<size_t>(s.n) * s.k);
    for (int t = 0; t < s.n; ++t)
        for (int o = 0; o < ldc; ++o) {
            const T v = all[size_t(t) * ldc + o];
            if (o < s.k) c[size_t(t) * s.k + o] = v;
            else REQUIRE(bits_of(v) == bits_of(sentinel));  // ldc padding untouched
        }
    return c;
}

const Shape kShapes[] = {
    {1, 1, 1, 0, 0, 0},        {3, 5, 7, 0, 0, 0},       {16, 16, 16, 0, 0, 0},    {4096, 1, 64, 0, 0, 0},
    {17, 4, 33, 5, 3, 2},      {300, 100, 77, 0, 0, 0},  {513, 37, 161, 16, 1, 9}, {1030, 20, 96, 0, 0, 0},
    {1000, 70, 200, 3, 64, 5}, {2048, 16, 81, 0, 0, 0},  {64, 33, 1, 0, 0, 0},     {31, 129, 250, 1, 1, 1},
    {4096, 48, 240, 0, 0, 0},  {7, 300, 5, 0, 0, 0},
};

}  // namespace

TEST_CASE("8bit igemm: cigemmlt_32 equals the exact int64 product (shapes, padded ld, extremes)", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32]") {
    for (const Shape& s : kShapes)
        for (int mode : {0, 1, 2}) {
            INFO("m " << s.m << " n " << s.n << " k " << s.k << " pads " << s.pad_a << "," << s.pad_b << "," << s.pad_c
                      << " data mode " << mode);
            const auto A = int8_data(size_t(s.k) * (s.m + s.pad_a), 100 + mode, mode);
            const auto B = int8_data(size_t(s.n) * (s.m + s.pad_b), 200 + mode, mode == 2 ? 2 : 0);
            const auto want = exact_product(s, A, B);
            const auto got = run<int32_t>(backend().fns_8bit.cigemmlt_32, s, A, B, nullptr);
            size_t bad = 0;
            for (size_t i = 0; i < want.size(); ++i) bad += got[i] != wrap32(want[i]);
            CHECK(bad == 0);
        }
}

TEST_CASE("8bit igemm: cigemmlt_32 wraps like an int32 accumulator beyond 2^31", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32]") {
    // 200000 products of (-128)(-128) = 3276800000 > INT32_MAX.
    const Shape s{200000, 2, 3, 0, 0, 0};
    const auto A = int8_data(size_t(s.k) * s.m, 1, 2);
    const auto B = int8_data(size_t(s.n) * s.m, 2, 2);
    const auto got = run<int32_t>(backend().fns_8bit.cigemmlt_32, s, A, B, nullptr);
    for (int32_t v : got) CHECK(v == wrap32(int64_t{16384} * 200000));
}

TEST_CASE("8bit igemm: m == 0 gives zeros, n or k == 0 writes nothing", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32][fn:cigemmlt_8]") {
    const Shape s{0, 3, 4, 0, 0, 0};
    const auto got = run<int32_t>(backend().fns_8bit.cigemmlt_32, s, {}, {}, nullptr);
    CHECK(got == std::vector<int32_t>(12, 0));
    kbit_context* ctx = backend().fns_8bit.get_context();
    CHECK(backend().fns_8bit.cigemmlt_32(ctx, 8, 0, 4, nullptr, nullptr, nullptr, nullptr, 8, 8, 4, nullptr) ==
          KBIT_STATUS_SUCCESS);
    CHECK(backend().fns_8bit.cigemmlt_8(ctx, 8, 4, 0, nullptr, nullptr, nullptr, nullptr, 8, 8, 0, nullptr) ==
          KBIT_STATUS_SUCCESS);
    backend().fns_8bit.kbit_context_destroy(ctx);
}

TEST_CASE("8bit igemm: cigemmlt_8 saturates the exact sum to int8", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_8]") {
    for (const Shape& s : {Shape{40, 9, 13, 2, 0, 3}, Shape{600, 20, 70, 0, 0, 0}}) {
        INFO("m " << s.m << " n " << s.n << " k " << s.k);
        // Small values so that many sums fall inside [-128, 127].
        auto A = int8_data(size_t(s.k) * (s.m + s.pad_a), 7, 0);
        auto B = int8_data(size_t(s.n) * (s.m + s.pad_b), 8, 0);
        for (auto& v : A) v = static_cast<int8_t>(v / 40);
        for (auto& v : B) v = static_cast<int8_t>(v / 40);
        const auto want = exact_product(s, A, B);
        const auto got = run<int8_t>(backend().fns_8bit.cigemmlt_8, s, A, B, nullptr);
        int inside = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            const int64_t w = want[i] > 127 ? 127 : (want[i] < -128 ? -128 : want[i]);
            REQUIRE(int(got[i]) == w);
            inside += (want[i] > -128 && want[i] < 127);
        }
        CHECK(inside > 0);
    }
}

TEST_CASE("8bit igemm: cigemmlt_8_rowscale rounds half to even and saturates", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_8_rowscale]") {
    const Shape s{50, 11, 9, 0, 0, 0};
    auto A = int8_data(size_t(s.k) * s.m, 9, 0);
    auto B = int8_data(size_t(s.n) * s.m, 10, 0);
    for (auto& v : A) v = static_cast<int8_t>(v / 16);
    for (auto& v : B) v = static_cast<int8_t>(v / 16);
    // 0.5 makes every odd sum a tie; NaN gives 0; infinities saturate.
    const std::vector<float> scale = {0.5f, 0.25f, 1.0f / 3.0f, 1e-3f, 2.0f, NAN, INFINITY, -INFINITY, -0.5f};
    const auto want = exact_product(s, A, B);
    const auto got = run<int8_t>(backend().fns_8bit.cigemmlt_8_rowscale, s, A, B, scale.data());
    for (int t = 0; t < s.n; ++t)
        for (int o = 0; o < s.k; ++o) {
            const float v = static_cast<float>(wrap32(want[size_t(t) * s.k + o])) * scale[o];
            float r = std::isnan(v) ? 0.0f : std::nearbyint(v);
            r = r > 127.0f ? 127.0f : (r < -128.0f ? -128.0f : r);
            INFO("t " << t << " o " << o << " value " << v);
            REQUIRE(int(got[size_t(t) * s.k + o]) == int(r));
        }
    // The shared store rules themselves (kbit_int8_rules.h): ties to even, saturation, NaN -> 0.
    CHECK(kbit::int8_saturate_rn(2.5f) == 2);
    CHECK(kbit::int8_saturate_rn(-3.5f) == -4);
    CHECK(kbit::int8_saturate_rn(200.0f) == 127);
    CHECK(kbit::int8_saturate_rn(-INFINITY) == -128);
    CHECK(kbit::int8_saturate_rn(NAN) == 0);
    for (int32_t v : {0, 127, 128, -128, -129, INT32_MAX, INT32_MIN})
        CHECK(kbit::int8_saturate(v) == (v > 127 ? 127 : (v < -128 ? -128 : v)));
}

TEST_CASE("8bit igemm: contexts are independent and destroy accepts NULL", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy]") {
    kbit_context* a = backend().fns_8bit.get_context();
    kbit_context* b = backend().fns_8bit.get_context();
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(a != b);
    CHECK(backend().fns_8bit.kbit_context_destroy(a) == KBIT_STATUS_SUCCESS);
    CHECK(backend().fns_8bit.kbit_context_destroy(b) == KBIT_STATUS_SUCCESS);
    CHECK(backend().fns_8bit.kbit_context_destroy(nullptr) == KBIT_STATUS_SUCCESS);
}

// cigemmlt_32 called 4 times concurrently from a caller's OpenMP region. Only backend calls run in the
// region (Catch assertions are not thread-safe).
void check_calls_from_openmp_region(const Shape& s) {
    INFO("m " << s.m << " n " << s.n << " k " << s.k);
    const auto A = int8_data(size_t(s.k) * s.m, 31, 0);
    const auto B = int8_data(size_t(s.n) * s.m, 32, 0);
    const auto want = exact_product(s, A, B);
    DeviceBuffer<int8_t> dA(A), dB(B);
    std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> dC;
    for (int i = 0; i < 4; ++i) dC.push_back(std::make_unique<DeviceBuffer<int32_t>>(size_t(s.n) * s.k));
    kbit_context* ctx = backend().fns_8bit.get_context();
    std::vector<kbit_status> status(4, -1);
#pragma omp parallel for num_threads(4)
    for (int i = 0; i < 4; ++i)
        status[i] = backend().fns_8bit.cigemmlt_32(ctx, s.m, s.n, s.k, dA.get(), dB.get(), dC[i]->get(), nullptr, s.m, s.m,
                                             s.k, nullptr);
    backend().fns_8bit.kbit_context_destroy(ctx);
    for (int i = 0; i < 4; ++i) {
        CHECK(status[i] == KBIT_STATUS_SUCCESS);
        const auto got = dC[i]->download();
        size_t bad = 0;
        for (size_t j = 0; j < got.size(); ++j) bad += got[j] != wrap32(want[j]);
        CHECK(bad == 0);
    }
}

TEST_CASE("8bit igemm: calls from inside a caller's OpenMP region are exact", "[8bit][igemm]"
          "[fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32]") {
    // Per-worker scratch must not be indexed by the caller's thread number. The second shape is a
    // single job, which the CPU backend runs on the calling thread without a parallel region.
    check_calls_from_openmp_region(Shape{700, 40, 170, 0, 0, 0});
    check_calls_from_openmp_region(Shape{700, 12, 60, 0, 0, 0});
}
