// kbit_gemm_4bit_grouped (the mixture-of-experts GEMM): where every chosen expert's weights have a slice
// that cgemm_4bit can take, the grouped call must equal, byte for byte, the loop of cgemm_4bit_<dtype>
// calls over the experts (rows gathered per expert in (token, slot) order) followed by the documented
// combine; on other shapes it is held to cgemm_4bit's fp32 summation bound of the fp64 result. Bad input
// gets its specific message and leaves the output untouched; an id out of range may be found on the device,
// and is then reported by the next kbit_stream_synchronize instead of the call.
#include <cstring>

#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

template <class T> constexpr int32_t kDtype = std::is_same_v<T, float> ? KBIT_DTYPE_FP32
                                              : std::is_same_v<T, kbit_half> ? KBIT_DTYPE_FP16 : KBIT_DTYPE_BF16;

std::vector<float> scales(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(0.01f, 0.2f);
    std::vector<float> v(n);
    for (auto& x : v) x = uni(rng);
    return v;
}

// One grouped problem on the host: weights of `experts` experts, scales (plain or nested), ids with
// slot 0 always expert 0 (chosen by every token) and the last expert never chosen, combine weights.
template <class T>
struct Problem {
    int64_t experts, N, K, bs, tokens, top_k, a_rows;
    bool nested;
    int32_t qt;
    std::vector<uint8_t> B, q8;
    std::vector<float> absmax, code, offset{0.03f}, combine;
    std::vector<int32_t> ids;
    std::vector<T> A;

    Problem(int64_t e, int64_t n, int64_t k, int64_t blocksize, int64_t t, int64_t topk, int64_t rows, bool nest,
            int32_t quant, uint32_t seed)
        : experts(e), N(n), K(k), bs(blocksize), tokens(t), top_k(topk), a_rows(rows), nested(nest), qt(quant) {
        const int64_t elems = experts * N * K, blocks = (elems + bs - 1) / bs;
        B = random_bytes(static_cast<size_t>(elems / 2), seed);
        code = dynamic_map(true);
        if (nested) {
            std::mt19937 rng(seed + 1);
            q8.resize(static_cast<size_t>(blocks));
            for (auto& c : q8) c = static_cast<uint8_t>(rng());
            absmax = scales(static_cast<size_t>((blocks + 255) / 256), seed + 2);
        } else {
            absmax = scales(static_cast<size_t>(blocks), seed + 2);
        }
        A = to_elems<T>(normal_floats(static_cast<size_t>(tokens * a_rows * K), seed + 3, 1.0f));
        std::mt19937 rng(seed + 4);
        for (int64_t tk = 0; tk < tokens; ++tk)
            for (int64_t j = 0; j < top_k; ++j)
                ids.push_back(j == 0 ? 0 : static_cast<int32_t>(rng() % static_cast<uint32_t>(experts - 1)));
        combine = normal_floats(static_cast<size_t>(tokens * top_k), seed + 5, 0.5f);
    }
    int64_t pairs() const { return tokens * top_k; }
    // float(scale of block beta) as cgemm_4bit restores it.
    double scale(int64_t beta) const {
        if (!nested) return absmax[beta];
        const float s = code[q8[beta]] * absmax[beta >> 8];
        return s + offset[0];
    }
};

// Runs the grouped call; returns its status and the output (out_elems elements, pre-filled with 0x5a bytes).
template <class T>
kbit_status grouped(const Problem<T>& p, bool with_combine, std::vector<T>* got, const int32_t* ids_override = nullptr) {
    const int64_t out_elems = with_combine ? p.tokens * p.N : p.pairs() * p.N;
    DeviceBuffer<T> dA(p.A), out(static_cast<size_t>(out_elems));
    std::vector<T> fill(static_cast<size_t>(out_elems));
    if (!fill.empty()) std::memset(static_cast<void*>(fill.data()), 0x5a, fill.size() * sizeof(T));  // no NULL to memset
    out.upload(fill);
    DeviceBuffer<uint8_t> dB(p.B), dq8(p.q8.empty() ? std::vector<uint8_t>{0} : p.q8);
    DeviceBuffer<float> dabs(p.absmax), dcode(p.code), doff(p.offset),
        dcomb(p.combine.empty() ? std::vector<float>{0} : p.combine);
    std::vector<int32_t> ids = p.ids;
    if (ids_override != nullptr) ids.assign(ids_override, ids_override + p.pairs());
    DeviceBuffer<int32_t> dids(ids.empty() ? std::vector<int32_t>{0} : ids);
    const kbit_status s = backend().fns_4bit.kbit_gemm_4bit_grouped(
        kDtype<T>, dA.get(), p.a_rows, dB.get(), dabs.get(), p.nested ? dq8.get() : nullptr, dcode.get(), doff.get(),
        p.experts, p.N, p.K, p.bs, p.qt, dids.get(), p.tokens, p.top_k, with_combine ? dcomb.get() : nullptr,
        out.get(), nullptr);
    *got = out.download();
    return s;
}

// The loop a user would write: per expert (ascending), gather the rows of its pairs, cgemm_4bit on its slice,
// scatter; then the combine (products and sums rounded to fp32 separately, j in order).
template <class T>
std::vector<T> looped(const Problem<T>& p, bool with_combine) {
    std::vector<T> y(static_cast<size_t>(p.pairs() * p.N));
    for (int64_t e = 0; e < p.experts; ++e) {
        std::vector<int64_t> rows;
        for (int64_t q = 0; q < p.pairs(); ++q)
            if (p.ids[q] == e) rows.push_back(q);
        if (rows.empty()) continue;
        const int64_t M = static_cast<int64_t>(rows.size()), first = e * p.N * p.K, beta = first / p.bs;
        std::vector<T> x(static_cast<size_t>(M * p.K));
        for (int64_t i = 0; i < M; ++i) {
            const int64_t r = p.a_rows == 1 ? rows[i] / p.top_k : rows[i];
            std::copy(p.A.begin() + r * p.K, p.A.begin() + (r + 1) * p.K, x.begin() + i * p.K);
        }
        const int64_t nb = (p.N * p.K + p.bs - 1) / p.bs;
        std::vector<uint8_t> Bs(p.B.begin() + first / 2, p.B.begin() + (first + p.N * p.K) / 2);
        std::vector<uint8_t> q8s = p.nested ? std::vector<uint8_t>(p.q8.begin() + beta, p.q8.begin() + beta + nb)
                                            : std::vector<uint8_t>{0};
        std::vector<float> abs_s = p.nested ? std::vector<float>(p.absmax.begin() + beta / 256,
                                                                 p.absmax.begin() + beta / 256 + (nb + 255) / 256)
                                            : std::vector<float>(p.absmax.begin() + beta, p.absmax.begin() + beta + nb);
        DeviceBuffer<T> dx(x), dy(static_cast<size_t>(M * p.N));
        DeviceBuffer<uint8_t> dB(Bs), dq8(q8s);
        DeviceBuffer<float> dabs(abs_s), dcode(p.code), doff(p.offset);
        require_ok(Fns4<T>::gemm()(dx.get(), dB.get(), dabs.get(), p.nested ? dq8.get() : nullptr, dcode.get(),
                                   doff.get(), dy.get(), nullptr, static_cast<int>(M), static_cast<int>(p.N),
                                   static_cast<int>(p.K), static_cast<int>(p.bs), p.qt, nullptr),
                   "cgemm_4bit");
        const auto ye = dy.download();
        for (int64_t i = 0; i < M; ++i) std::copy(ye.begin() + i * p.N, ye.begin() + (i + 1) * p.N, y.begin() + rows[i] * p.N);
    }
    if (!with_combine) return y;
    std::vector<T> out(static_cast<size_t>(p.tokens * p.N));
    for (int64_t t = 0; t < p.tokens; ++t)
        for (int64_t n = 0; n < p.N; ++n) {
            float s = 0.0f;
            for (int64_t j = 0; j < p.top_k; ++j) {
                const float prod = p.combine[t * p.top_k + j] * kbit::Elem<T>::load(y[(t * p.top_k + j) * p.N + n]);
                s = s + prod;
            }
            out[t * p.N + n] = kbit::Elem<T>::store(s);
        }
    return out;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// An id out of range fails the call (a backend that reads the ids on the host) or, when the call returned
// KBIT_STATUS_SUCCESS (one that checks them on the device), the next kbit_stream_synchronize of its stream;
// either way with `message`, and once: the synchronize after that succeeds.
void check_id_error(kbit_status call, const std::string& message) {
    const auto& c = backend().fns_core;
    std::string returned;
    {
        Plumbing plumbing;  // the suite's own lookup, not a call under test
        returned = c.kbit_status_string(call);
    }
    INFO("the call returned " << returned);
    check_invalid(call == KBIT_STATUS_SUCCESS ? c.kbit_stream_synchronize(nullptr) : call, message);
    CHECK(c.kbit_stream_synchronize(nullptr) == KBIT_STATUS_SUCCESS);
}

}  // namespace

#define FN_GROUPED "[fn:kbit_gemm_4bit_grouped][fn:cgemm_4bit_fp32][fn:cgemm_4bit_fp16][fn:cgemm_4bit_bf16]"

TEMPLATE_TEST_CASE("4bit grouped gemm: byte for byte the per-expert cgemm_4bit loop", "[4bit][grouped]" FN_GROUPED,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    for (bool nested : {false, true})
        for (int32_t qt : {KBIT_QUANT_NF4, KBIT_QUANT_FP4})
            for (int64_t tokens : {1, 5, 24})  // 24 tokens: expert 0 gets 24 rows (prefill paths where a backend has them)
                for (int64_t top_k : {1, 3})
                    for (bool per_choice : {false, true})
                        for (bool with_combine : {false, true}) {
                            // nested slices need N*K % (256 * blocksize) == 0: 32 * 512 = 16384 = 256 * 64
                            const int64_t E = 5, N = nested ? 32 : 24, K = nested ? 512 : 160, bs = nested ? 64 : 32;
                            DYNAMIC_SECTION(kbit::Elem<T>::name << (nested ? " nested" : " plain") << " qt " << qt
                                                                << " tokens " << tokens << " top_k " << top_k
                                                                << (per_choice ? " rows per choice" : " rows per token")
                                                                << (with_combine ? " combine" : "")) {
                                Problem<T> p(E, N, K, bs, tokens, top_k, per_choice ? top_k : 1, nested, qt,
                                             static_cast<uint32_t>(tokens * 7 + top_k));
                                std::vector<T> got;
                                require_ok(grouped(p, with_combine, &got), "kbit_gemm_4bit_grouped");
                                CHECK(same_bytes(got, looped(p, with_combine)));
                            }
                        }
}

TEST_CASE("4bit grouped gemm: more experts and pairs than a work-group, byte for byte the loop", "[4bit][grouped]"
          "[fn:kbit_gemm_4bit_grouped][fn:cgemm_4bit_fp32]") {
    // 600 experts and 900 pairs: a device backend that groups the pairs in one work-group of a few
    // hundred items must cover both in several steps.
    for (bool with_combine : {false, true}) {
        DYNAMIC_SECTION((with_combine ? "combine" : "no combine")) {
            Problem<float> p(600, 8, 64, 64, 300, 3, 1, false, KBIT_QUANT_FP4, 13);
            std::vector<float> got;
            require_ok(grouped(p, with_combine, &got), "kbit_gemm_4bit_grouped");
            CHECK(same_bytes(got, looped(p, with_combine)));
        }
    }
}

TEMPLATE_TEST_CASE("4bit grouped gemm: no token, no choice or no feature touches nothing", "[4bit][grouped]"
                   "[fn:kbit_gemm_4bit_grouped]", float, kbit_half, kbit_bf16) {
    using T = TestType;
    Problem<T> p(3, 8, 64, 64, 0, 2, 1, false, KBIT_QUANT_NF4, 9);
    std::vector<T> got;
    CHECK(grouped(p, false, &got) == KBIT_STATUS_SUCCESS);
    Problem<T> q(3, 8, 64, 64, 2, 2, 1, false, KBIT_QUANT_NF4, 9);
    q.N = 0;  // nothing to compute: out untouched (one element of 0x5a bytes from the fill)
    std::vector<T> fill(1);
    std::memset(static_cast<void*>(fill.data()), 0x5a, sizeof(T));
    DeviceBuffer<T> out(fill);
    CHECK(backend().fns_4bit.kbit_gemm_4bit_grouped(kDtype<T>, nullptr, 1, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                    3, 0, 64, 64, KBIT_QUANT_NF4, nullptr, 2, 2, nullptr, out.get(),
                                                    nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(same_bytes(out.download(), fill));
}

TEMPLATE_TEST_CASE("4bit grouped gemm: experts without a slice, within the fp32 summation bound of fp64",
                   "[4bit][grouped][fn:kbit_gemm_4bit_grouped]", float, kbit_half, kbit_bf16) {
    using T = TestType;
    for (bool nested : {false, true})
        for (int64_t K : {38, 302}) {
            // N * K = 190 or 1510: experts start inside a block of 32
            DYNAMIC_SECTION(kbit::Elem<T>::name << (nested ? " nested" : " plain") << " K " << K) {
                Problem<T> p(4, 5, K, 32, 6, 2, 2, nested, KBIT_QUANT_NF4, static_cast<uint32_t>(K));
                std::vector<T> got;
                require_ok(grouped(p, false, &got), "kbit_gemm_4bit_grouped");
                for (int64_t q = 0; q < p.pairs(); ++q)
                    for (int64_t n = 0; n < p.N; ++n) {
                        double value = 0, abs_sum = 0;
                        for (int64_t k = 0; k < K; ++k) {
                            const int64_t i = (p.ids[q] * p.N + n) * K + k;
                            const double w = double(kbit::kNf4Values[kbit::nibble_at(p.B.data(), i)]) * p.scale(i / 32);
                            const double prod = double(kbit::Elem<T>::load(p.A[q * K + k])) * w;
                            value += prod;
                            abs_sum += std::fabs(prod);
                        }
                        const double u = 0x1.0p-24, g = (K + 5) * u / (1 - (K + 5) * u);
                        const double err = g * abs_sum + 1e-37;
                        const double bound = err + unit_roundoff<T>() * (std::fabs(value) + err) + tiny_step<T>();
                        const double y = kbit::Elem<T>::load(got[q * p.N + n]);
                        INFO("pair " << q << " n " << n << " got " << y << " exact " << value);
                        REQUIRE(std::fabs(y - value) <= bound);
                    }
            }
        }
}

TEST_CASE("4bit grouped gemm: bad input gets its message and writes nothing", "[4bit][grouped][errors]"
          "[fn:kbit_gemm_4bit_grouped][fn:kbit_stream_synchronize]") {
    using T = float;
    const std::string fn = "kbit_gemm_4bit_grouped: ";
    Problem<T> p(3, 8, 64, 64, 2, 2, 1, false, KBIT_QUANT_NF4, 5);
    std::vector<T> got, fill(static_cast<size_t>(p.pairs() * p.N));
    if (!fill.empty()) std::memset(static_cast<void*>(fill.data()), 0x5a, fill.size() * sizeof(T));  // no NULL to memset
    const int32_t bad_ids[] = {0, 1, 2, 7};
    check_id_error(grouped(p, false, &got, bad_ids), fn + "ids[3] (token 1, slot 1) is 7, must be in [0, 3)");
    CHECK(same_bytes(got, fill));
    const int32_t negative[] = {0, -1, 2, 7};
    check_id_error(grouped(p, false, &got, negative), fn + "ids[1] (token 0, slot 1) is -1, must be in [0, 3)");
    CHECK(same_bytes(got, fill));
    std::vector<T> comb_fill(static_cast<size_t>(p.tokens * p.N));
    std::memset(static_cast<void*>(comb_fill.data()), 0x5a, comb_fill.size() * sizeof(T));
    check_id_error(grouped(p, true, &got, bad_ids), fn + "ids[3] (token 1, slot 1) is 7, must be in [0, 3)");
    CHECK(same_bytes(got, comb_fill));

    Problem<T> r = p;
    r.a_rows = 3;
    check_invalid(grouped(r, false, &got), fn + "a_rows_per_token is 3, must be 1 or top_k (2)");
    CHECK(same_bytes(got, fill));
    r = p;
    r.K = 63;
    check_invalid(grouped(r, false, &got), fn + "K is 63, must be even");
    r = p;
    r.bs = 48;
    check_invalid(grouped(r, false, &got), fn + "blocksize 48 is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096");
    r = p;
    r.qt = 0;
    check_invalid(grouped(r, false, &got), fn + "quant_type 0 is not KBIT_QUANT_FP4 (1) or KBIT_QUANT_NF4 (2)");
    DeviceBuffer<T> out(fill);
    auto call = [&](const void* A, const uint8_t* B, const float* absmax, const int32_t* ids, void* o) {
        return backend().fns_4bit.kbit_gemm_4bit_grouped(KBIT_DTYPE_FP32, A, 1, B, absmax, nullptr, nullptr, nullptr, 3,
                                                         8, 64, 64, KBIT_QUANT_NF4, ids, 2, 2, nullptr, o, nullptr);
    };
    DeviceBuffer<T> dA(p.A);
    DeviceBuffer<uint8_t> dB(p.B);
    DeviceBuffer<float> dabs(p.absmax);
    DeviceBuffer<int32_t> dids(p.ids);
    check_invalid(backend().fns_4bit.kbit_gemm_4bit_grouped(KBIT_DTYPE_FP32, dA.get(), 1, dB.get(), dabs.get(), nullptr,
                                                            nullptr, nullptr, 3, 8, 64, 64, KBIT_QUANT_NF4, dids.get(),
                                                            -1, 2, nullptr, out.get(), nullptr),
                  fn + "tokens is -1, must be >= 0");
    check_invalid(backend().fns_4bit.kbit_gemm_4bit_grouped(KBIT_DTYPE_FP32, dA.get(), 1, dB.get(), dabs.get(), nullptr,
                                                            nullptr, nullptr, 3, 8, 64, 64, KBIT_QUANT_NF4, dids.get(),
                                                            int64_t{1} << 20, int64_t{1} << 12, nullptr, out.get(),
                                                            nullptr),
                  fn + "tokens * top_k is 1048576 * 4096, must be <= 2^31 - 1");
    // No experts at all: every id is out of range (a device backend still runs its plan over zero experts).
    check_id_error(backend().fns_4bit.kbit_gemm_4bit_grouped(KBIT_DTYPE_FP32, dA.get(), 1, dB.get(), dabs.get(),
                                                             nullptr, nullptr, nullptr, 0, 8, 64, 64, KBIT_QUANT_NF4,
                                                             dids.get(), 2, 2, nullptr, out.get(), nullptr),
                   fn + "ids[0] (token 0, slot 0) is 0, must be in [0, 0)");
    CHECK(same_bytes(out.download(), fill));
    check_invalid(call(dA.get(), dB.get(), dabs.get(), nullptr, out.get()), fn + "ids is NULL");
    check_invalid(call(dA.get(), dB.get(), dabs.get(), dids.get(), nullptr), fn + "out is NULL");
    check_invalid(call(nullptr, dB.get(), dabs.get(), dids.get(), out.get()), fn + "A is NULL");
    check_invalid(call(dA.get(), nullptr, dabs.get(), dids.get(), out.get()), fn + "B is NULL");
    check_invalid(call(dA.get(), dB.get(), nullptr, dids.get(), out.get()), fn + "absmax is NULL");
    CHECK(same_bytes(out.download(), fill));
    check_invalid(backend().fns_4bit.kbit_gemm_4bit_grouped(7, dA.get(), 1, dB.get(), dabs.get(), nullptr, nullptr, nullptr, 3,
                                                    8, 64, 64, KBIT_QUANT_NF4, dids.get(), 2, 2, nullptr, out.get(),
                                                    nullptr),
                  fn + "dtype 7 is not KBIT_DTYPE_FP32 (0), KBIT_DTYPE_FP16 (1) or KBIT_DTYPE_BF16 (2)");
}

TEST_CASE("4bit grouped gemm: an id error is its call's alone", "[4bit][grouped][errors]"
          "[fn:kbit_gemm_4bit_grouped][fn:cgemm_4bit_fp32][fn:kbit_stream_synchronize]") {
    using T = float;
    const std::string fn = "kbit_gemm_4bit_grouped: ";
    Problem<T> p(4, 24, 160, 32, 3, 2, 1, false, KBIT_QUANT_NF4, 11);
    const auto& c = backend().fns_core;
    std::vector<T> got;
    for (bool with_combine : {false, true}) {
        DYNAMIC_SECTION((with_combine ? "combine" : "no combine")) {
            // Two bad calls before one synchronize: the first call's error is the one reported, then none.
            const int32_t late[] = {0, 1, 2, 3, 0, 9}, early[] = {4, 1, 2, 3, 0, 1};
            const kbit_status first = grouped(p, with_combine, &got, late);
            const kbit_status second = grouped(p, with_combine, &got, early);
            const std::string message = fn + "ids[5] (token 2, slot 1) is 9, must be in [0, 4)";
            if (first == KBIT_STATUS_SUCCESS) {
                CHECK(second == KBIT_STATUS_SUCCESS);
                check_invalid(c.kbit_stream_synchronize(nullptr), message);
            } else {  // each call failed itself; the thread keeps the second one's message
                CHECK(first == KBIT_STATUS_INVALID_ARGUMENT);
                check_invalid(second, fn + "ids[0] (token 0, slot 0) is 4, must be in [0, 4)");
            }
            CHECK(c.kbit_stream_synchronize(nullptr) == KBIT_STATUS_SUCCESS);
            // A good call right after a bad one, before and after the bad one's error is taken: the loop's
            // bytes (a successful call leaves the thread's message as it was).
            const std::vector<T> want = looped(p, with_combine);
            const kbit_status bad = grouped(p, with_combine, &got, late);
            require_ok(grouped(p, with_combine, &got), "kbit_gemm_4bit_grouped");
            CHECK(same_bytes(got, want));
            check_id_error(bad, message);
            require_ok(grouped(p, with_combine, &got), "kbit_gemm_4bit_grouped");
            CHECK(same_bytes(got, want));
        }
    }
}
