// CUDA self-test: the optimizer interface against kbit::ref beyond what the conformance suite's
// aligned, moderately sized buffers reach: unaligned buffers and odd n (the 8-bit kernel's scalar
// path, AdEMAMix's misaligned m2 codes), and sizes whose update-norm tree spans several levels of more
// than one CTA's worth of values. Every byte must match, except that a NaN matches any NaN (the
// optimizer contract leaves NaN payloads unspecified).
#include "kbit_optim_math.h"
#include "ref_optim8.h"
#include "selftest_util.h"

namespace {

using kbit::optim::Hyper;
using kbit::optim::Kind;

const Kind kKinds[] = {Kind::Adam, Kind::Momentum, Kind::RMSprop, Kind::Lion, Kind::Adagrad, Kind::AdEMAMix};

template <class T>
bool is_nan(T x) {
    const float f = kbit::Elem<T>::load(x);
    return f != f;
}

// First index whose bits differ and that is not NaN on both sides, or -1.
template <class T>
long first_difference_nan_any(const std::vector<T>& got, const std::vector<T>& want) {
    if (got.size() != want.size()) return 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (st::bits_of(got[i]) != st::bits_of(want[i]) && !(is_nan(got[i]) && is_nan(want[i]))) return static_cast<long>(i);
    return -1;
}

Hyper hyper(Kind kind, int step) {
    Hyper h{0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 0.01f, 1e-3f, 0.8f, step, false};
    if (kind == Kind::Lion) h.beta2 = 0.99f, h.lr = 1e-4f;
    if (kind == Kind::AdEMAMix) h.beta3 = 0.9999f, h.alpha = 5.0f;
    if (kind == Kind::Momentum || kind == Kind::RMSprop || kind == Kind::Adagrad) h.skip_zeros = true;
    return h;
}

std::vector<float> gradients(size_t n, uint32_t seed) {
    std::vector<float> g = st::weights(n, seed, false);
    for (size_t i = 0; i < n; ++i) {
        g[i] *= 0.01f;
        if (i % 97 == 5) g[i] = 0.0f;
        if (i % 1999 == 7) g[i] = i % 2 ? INFINITY : std::nanf("");
    }
    return g;
}

template <class T>
kbit_status call32(Kind k, T* g, T* p, float* s1, float* s2, float* u, float mu, float pn, const Hyper& h, int n) {
#define KBIT_ST_ARGS g, p, s1, s2, u, mu, pn, h.beta1, h.beta2, h.beta3, h.alpha, h.eps, h.weight_decay, h.step, h.lr, \
                     h.gnorm_scale, h.skip_zeros, n
    if constexpr (std::is_same<T, float>::value) {
        switch (k) {
            case Kind::Adam: return cadam32bit_grad_fp32(KBIT_ST_ARGS);
            case Kind::Momentum: return cmomentum32bit_grad_32(KBIT_ST_ARGS);
            case Kind::RMSprop: return crmsprop32bit_grad_32(KBIT_ST_ARGS);
            case Kind::Lion: return clion32bit_grad_fp32(KBIT_ST_ARGS);
            case Kind::Adagrad: return cadagrad32bit_grad_32(KBIT_ST_ARGS);
            default: return cademamix32bit_grad_fp32(KBIT_ST_ARGS);
        }
    } else if constexpr (std::is_same<T, kbit_half>::value) {
        switch (k) {
            case Kind::Adam: return cadam32bit_grad_fp16(KBIT_ST_ARGS);
            case Kind::Momentum: return cmomentum32bit_grad_16(KBIT_ST_ARGS);
            case Kind::RMSprop: return crmsprop32bit_grad_16(KBIT_ST_ARGS);
            case Kind::Lion: return clion32bit_grad_fp16(KBIT_ST_ARGS);
            case Kind::Adagrad: return cadagrad32bit_grad_16(KBIT_ST_ARGS);
            default: return cademamix32bit_grad_fp16(KBIT_ST_ARGS);
        }
    } else {
        switch (k) {
            case Kind::Adam: return cadam32bit_grad_bf16(KBIT_ST_ARGS);
            case Kind::Momentum: return kbit_momentum32bit_grad_bf16(KBIT_ST_ARGS);
            case Kind::RMSprop: return kbit_rmsprop32bit_grad_bf16(KBIT_ST_ARGS);
            case Kind::Lion: return clion32bit_grad_bf16(KBIT_ST_ARGS);
            case Kind::Adagrad: return kbit_adagrad32bit_grad_bf16(KBIT_ST_ARGS);
            default: return cademamix32bit_grad_bf16(KBIT_ST_ARGS);
        }
    }
#undef KBIT_ST_ARGS
}

template <class T>
kbit_status call8(Kind k, T* p, T* g, uint8_t* s1, uint8_t* s2, float* q1, float* q2, float* a1, float* a2, const Hyper& h,
                  int n) {
#define KBIT_ST_ARGS p, g, s1, s2, h.beta1, h.beta2, h.beta3, h.alpha, h.eps, h.step, h.lr, q1, q2, a1, a2, \
                     h.weight_decay, h.gnorm_scale, h.skip_zeros, n
#define KBIT_ST_CASES(dt)                                                          \
    switch (k) {                                                                   \
        case Kind::Adam: return cadam_8bit_blockwise_grad_##dt(KBIT_ST_ARGS);      \
        case Kind::Momentum: return cmomentum_8bit_blockwise_grad_##dt(KBIT_ST_ARGS); \
        case Kind::RMSprop: return crmsprop_8bit_blockwise_grad_##dt(KBIT_ST_ARGS); \
        case Kind::Lion: return clion_8bit_blockwise_grad_##dt(KBIT_ST_ARGS);      \
        case Kind::Adagrad: return cadagrad_8bit_blockwise_grad_##dt(KBIT_ST_ARGS); \
        default: return cademamix_8bit_blockwise_grad_##dt(KBIT_ST_ARGS);          \
    }
    if constexpr (std::is_same<T, float>::value) KBIT_ST_CASES(fp32)
    else if constexpr (std::is_same<T, kbit_half>::value) KBIT_ST_CASES(fp16)
    else KBIT_ST_CASES(bf16)
#undef KBIT_ST_CASES
#undef KBIT_ST_ARGS
}

template <class T>
void check32(Kind kind, int n, float max_unorm, size_t offset) {
    INFO("32-bit kind " << static_cast<int>(kind) << " " << kbit::Elem<T>::name << " n " << n << " max_unorm " << max_unorm
                        << " offset " << offset);
    const bool two = kbit::optim::two_state(kind);
    const size_t states1 = kind == Kind::AdEMAMix ? 2 * size_t(n) : size_t(n);
    const auto g = st::to_elems<T>(gradients(n, 3));
    const auto p = st::to_elems<T>(st::weights(n, 4, false));
    const auto s1 = st::weights(states1, 5, false);
    auto s2 = st::weights(n, 6, false);
    for (auto& x : s2) x = std::fabs(x) * 1e-3f;
    const Hyper h = hyper(kind, 5);
    auto rp = p;
    auto rs1 = s1, rs2 = s2;
    float ru = 0.3f;
    const kbit::ref::Mem32 mem{g.data(), rp.data(), rs1.data(), two ? rs2.data() : nullptr, n};
    kbit::ref::optim32_step(kbit::Elem<T>::dtype, kind, h, mem, &ru, max_unorm, 0.5f);
    st::Buf<T> dg(g, offset), dp(p, offset);
    st::Buf<float> ds1(s1, offset), ds2(s2, offset), du(std::vector<float>{0.3f});
    st::kbit_ok(call32<T>(kind, dg.get(), dp.get(), ds1.get(), two ? ds2.get() : nullptr, du.get(), max_unorm, 0.5f, h, n),
                "32-bit optimizer");
    CHECK(first_difference_nan_any(dp.download(), rp) == -1);
    CHECK(first_difference_nan_any(ds1.download(), rs1) == -1);
    if (two) CHECK(first_difference_nan_any(ds2.download(), rs2) == -1);
    CHECK(first_difference_nan_any(du.download(), std::vector<float>{ru}) == -1);
}

template <class T>
void check8(Kind kind, int n, size_t offset) {
    INFO("8-bit kind " << static_cast<int>(kind) << " " << kbit::Elem<T>::name << " n " << n << " offset " << offset);
    const bool two = kbit::optim::two_state(kind);
    const int blocks = (n + 255) / 256;
    const size_t codes1 = kind == Kind::AdEMAMix ? 2 * size_t(n) : size_t(n);
    const size_t scales1 = kind == Kind::AdEMAMix ? 2 * size_t(blocks) : size_t(blocks);
    const auto g = st::to_elems<T>(gradients(n, 7));
    const auto p = st::to_elems<T>(st::weights(n, 8, false));
    std::mt19937 rng(9);
    std::vector<uint8_t> c1(codes1), c2(n);
    for (auto& c : c1) c = static_cast<uint8_t>(rng());
    for (auto& c : c2) c = static_cast<uint8_t>(rng());
    std::vector<float> a1 = st::weights(scales1, 10, false), a2 = st::weights(blocks, 11, false);
    for (auto& x : a1) x = std::fabs(x) * 0.01f;
    for (auto& x : a2) x = std::fabs(x) * 1e-4f;
    const auto q1 = st::dynamic_map(true), q2 = st::dynamic_map(false);
    const Hyper h = hyper(kind, 3);
    auto rp = p;
    auto rc1 = c1, rc2 = c2;
    auto ra1 = a1, ra2 = a2;
    const kbit::ref::Mem8 mem{rp.data(), g.data(), rc1.data(), two ? rc2.data() : nullptr, q1.data(),
                              two ? q2.data() : nullptr, ra1.data(), two ? ra2.data() : nullptr, n};
    kbit::ref::optim8_step(kbit::Elem<T>::dtype, kind, h, mem);
    st::Buf<T> dp(p, offset), dg(g, offset);
    st::Buf<uint8_t> dc1(c1, offset), dc2(c2, offset);
    st::Buf<float> dq1(q1), dq2(q2), da1(a1, offset), da2(a2, offset);
    st::kbit_ok(call8<T>(kind, dp.get(), dg.get(), dc1.get(), two ? dc2.get() : nullptr, dq1.get(),
                         two ? dq2.get() : nullptr, da1.get(), two ? da2.get() : nullptr, h, n),
                "8-bit optimizer");
    CHECK(first_difference_nan_any(dp.download(), rp) == -1);
    CHECK(st::first_bit_difference(dc1.download(), rc1) == -1);
    CHECK(st::first_bit_difference(da1.download(), ra1) == -1);
    if (two) {
        CHECK(st::first_bit_difference(dc2.download(), rc2) == -1);
        CHECK(st::first_bit_difference(da2.download(), ra2) == -1);
    }
}

template <class T>
void check_all() {
    for (Kind kind : kKinds) {
        for (int n : {1, 4095, 4096 * 1024 + 7})  // the last: 1025 chunk sums, a tree wider than one CTA
            for (float max_unorm : {0.0f, 0.05f}) check32<T>(kind, n, max_unorm, n == 1 ? 0 : 1);
        for (int n : {1, 257, 256 * 4096, 256 * 4096 + 77})
            for (size_t offset : {size_t{0}, size_t{1}}) check8<T>(kind, n, offset);
    }
}

}  // namespace

TEMPLATE_TEST_CASE("cuda optimizers equal kbit::ref (unaligned buffers, odd n, wide norm trees)", "[cuda][optim8]", float,
                   kbit_half, kbit_bf16) {
    check_all<TestType>();
}
