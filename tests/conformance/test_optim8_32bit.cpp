// Optimizers, 32-bit state: every optimizer and parameter type trains a least-squares regression for
// 60 steps in step with the independent fp64 reference (optim_reference.h) within bitsandbytes' own
// tolerances; update-norm clipping, skip_zeros, weight-decay placement and round-to-nearest-even
// parameter stores are checked on their own.
#include <cmath>

#include <catch2/catch.hpp>

#include "optim_reference.h"

using namespace kbit_test;

namespace {

constexpr int kRows = 37, kCols = 111, kBatch = 64;  // 4107 parameters: 2 norm chunks, n % 256 = 11

// The kernel's buffers for one parameter tensor.
struct Kernel32 {
    Kernel32(const Optim32Fn& f, const std::vector<float>& p0)
        : f(f), n(p0.size()), p(to_dtype(p0, f.dtype)), g(p0.size() * dtype_size(f.dtype)),
          s1(std::vector<float>(f.kind == Kind::AdEMAMix ? 2 * p0.size() : p0.size(), 0.0f)),
          s2(std::vector<float>(p0.size(), 0.0f)), unorm(std::vector<float>{0.0f}) {}

    std::vector<float> params() const { return from_dtype(p.download(), f.dtype); }
    // Stores the gradient in the parameter type; returns the stored values.
    std::vector<double> set_gradient(const std::vector<double>& grad) {
        std::vector<float> gf(grad.begin(), grad.end());
        const auto raw = to_dtype(gf, f.dtype);
        g.upload(raw);
        return as_double(from_dtype(raw, f.dtype));
    }
    void step(const Hyper& h, float max_unorm = 0.0f, float param_norm = 0.0f) {
        require_ok(f.call(g.get(), p.get(), s1.get(), kbit::optim::two_state(f.kind) ? s2.get() : nullptr,
                          max_unorm > 0.0f ? unorm.get() : nullptr, max_unorm, param_norm, h, static_cast<int>(n)),
                   f.name.c_str());
    }

    const Optim32Fn& f;
    size_t n;
    DeviceBuffer<uint8_t> p, g;
    DeviceBuffer<float> s1, s2, unorm;
};

void check_states(const Kernel32& k, const RefOptimizer& ref, Tolerance tol) {
    const auto s1 = k.s1.download();
    const std::vector<float> m1(s1.begin(), s1.begin() + static_cast<long>(k.n));
    long at = -1;
    const long bad = count_not_close(m1, ref.s1, tol.atol, tol.rtol, &at);
    INFO("state1: " << bad << " not close, first at " << at);
    CHECK(bad == 0);
    if (k.f.kind == Kind::Adam || k.f.kind == Kind::AdEMAMix)
        CHECK(count_not_close(k.s2.download(), ref.s2, tol.atol, tol.rtol) == 0);
    if (k.f.kind == Kind::AdEMAMix) {
        const std::vector<float> m2(s1.begin() + static_cast<long>(k.n), s1.end());
        CHECK(count_not_close(m2, ref.s3, tol.atol, tol.rtol) == 0);
    }
}

}  // namespace

TEST_CASE("optim8 32-bit: every optimizer fp32/fp16/bf16 trains least squares for 60 steps like the fp64 reference",
          "[optim8][32bit]" FN_OPTIM8_32BIT) {
    const LeastSquares problem(kRows, kCols, kBatch, 21);
    train_each<Kernel32>(optim32_functions(), problem, 5, [&](Kernel32& k, float wd, const auto& p0, Tolerance tol) {
        RefOptimizer ref(k.f.kind, p0);
        const double loss0 = problem.loss(p0);
        for (int t = 1; t <= 60; ++t) {
            INFO("step " << t);
            std::vector<double> grad;
            problem.loss(k.params(), &grad);
            const auto g = k.set_gradient(grad);
            const Hyper h = default_hyper(k.f.kind, t, wd);
            k.step(h);
            ref.step(g, h);
            // Lion's sign flips where the direction is ~0 (bitsandbytes allows 15 such elements).
            long at = -1;
            const long bad = count_not_close(k.params(), ref.p, tol.atol, tol.rtol, &at);
            INFO("p: " << bad << " elements not close, first at " << at);
            CHECK(bad <= (k.f.kind == Kind::Lion ? 15 : 0));
            check_states(k, ref, tol);
            // As bitsandbytes' test: 16-bit parameters (and Lion's) are resynchronised to the
            // reference rounded to the parameter type, so that rounding differences do not grow.
            if (k.f.dtype != KBIT_DTYPE_FP32 || k.f.kind == Kind::Lion) {
                const auto sync = rounded(ref.p, k.f.dtype);
                ref.p = as_double(sync);
                k.p.upload(to_dtype(sync, k.f.dtype));
            }
        }
        CHECK(problem.loss(k.params()) < loss0);
    });
}

TEST_CASE("optim8 32-bit: update-norm clipping (max_unorm) fp32/bf16; unorm holds the norm; AdEMAMix ignores it",
          "[optim8][32bit][clip]" FN_OPTIM8_32BIT_FP32 FN_OPTIM8_32BIT_BF16) {
    if (!backend().has_optim8()) return;
    const LeastSquares problem(kRows, kCols, kBatch, 22);
    for (const auto& f : optim32_functions()) {
        if (f.dtype == KBIT_DTYPE_FP16) continue;
        INFO(f.name);
        const Tolerance tol = tolerance32(f.dtype);
        const auto p0 = initial_params(problem.size(), 6, f.dtype);
        Kernel32 k(f, p0);
        RefOptimizer ref(f.kind, p0);
        for (int t = 1; t <= 4; ++t) {  // warm the states up, unclipped
            std::vector<double> grad;
            problem.loss(k.params(), &grad);
            const auto g = k.set_gradient(grad);
            k.step(default_hyper(f.kind, t));
            ref.step(g, default_hyper(f.kind, t));
            ref.p = as_double(k.params());
        }
        std::vector<double> grad;
        const auto p = k.params();
        problem.loss(p, &grad);
        const auto g = k.set_gradient(grad);
        const Hyper h = default_hyper(f.kind, 5);
        double pnorm = 0.0;
        for (float x : p) pnorm += static_cast<double>(x) * x;
        const float param_norm = static_cast<float>(std::sqrt(pnorm));
        const bool one_state = !kbit::optim::two_state(f.kind);
        const float lion_unorm_in = 2.5e-5f;  // Lion clips with the norm its previous call left
        k.unorm.upload(std::vector<float>{f.kind == Kind::Lion ? lion_unorm_in : -1.0f});
        const double sum = ref.norm_sum(g, h);
        // max_unorm chosen so that the update is scaled to half its norm (bitsandbytes' LARS uses 0.02).
        const double target = 0.5 * std::sqrt(f.kind == Kind::Lion ? lion_unorm_in : sum);
        float max_unorm = static_cast<float>((target - (one_state ? h.eps : 0.0)) / param_norm);
        if (f.kind == Kind::AdEMAMix) max_unorm = 1.0f;  // has no norm: any positive value
        const double u = f.kind == Kind::Lion ? RefOptimizer::clip(lion_unorm_in, max_unorm, param_norm, h.eps, true)
                         : f.kind == Kind::Adagrad || f.kind == Kind::AdEMAMix
                             ? 1.0
                             : RefOptimizer::clip(sum, max_unorm, param_norm, h.eps, one_state);
        if (f.kind != Kind::Adagrad && f.kind != Kind::AdEMAMix) CHECK(u == Approx(0.5).epsilon(1e-3));
        k.step(h, max_unorm, param_norm);
        ref.step(g, h, u);
        long at = -1;
        const long bad = count_not_close(k.params(), ref.p, tol.atol, tol.rtol, &at);
        INFO("p: " << bad << " not close, first at " << at);
        CHECK(bad <= (f.kind == Kind::Lion ? 15 : 0));
        const float unorm = k.unorm.download()[0];
        if (f.kind == Kind::AdEMAMix) {
            CHECK(unorm == -1.0f);  // untouched (bitsandbytes stores a meaningless sum there)
        } else {
            const double want = f.kind == Kind::Lion ? ref.norm_sum(g, h) : sum;  // Lion: of the new state
            CHECK(unorm == Approx(want).epsilon(1e-5));
        }
    }
}

TEST_CASE("optim8 32-bit: skip_zeros leaves zero-gradient elements untouched fp32/bf16 (not with coupled decay, not AdEMAMix)",
          "[optim8][32bit][skip]" FN_OPTIM8_32BIT_FP32 FN_OPTIM8_32BIT_BF16) {
    if (!backend().has_optim8()) return;
    for (const auto& f : optim32_functions()) {
        if (f.dtype == KBIT_DTYPE_FP16) continue;
        for (float wd : {0.0f, 0.01f}) {
            INFO(f.name << " weight_decay " << wd);
            const size_t n = 3000;
            const auto p0 = initial_params(n, 7, f.dtype);
            Kernel32 k(f, p0);
            auto s1_0 = normal_floats(k.s1.size(), 8, 0.01f);
            if (f.kind == Kind::RMSprop || f.kind == Kind::Adagrad)  // sums of squares
                for (auto& x : s1_0) x = std::fabs(x);
            auto s2_0 = normal_floats(n, 9, 0.01f);
            for (auto& x : s2_0) x = std::fabs(x);
            k.s1.upload(s1_0);
            k.s2.upload(s2_0);
            RefOptimizer ref(f.kind, p0);
            ref.s1 = as_double(std::vector<float>(s1_0.begin(), s1_0.begin() + static_cast<long>(n)));
            ref.s2 = as_double(s2_0);
            if (f.kind == Kind::AdEMAMix) ref.s3 = as_double(std::vector<float>(s1_0.begin() + static_cast<long>(n), s1_0.end()));
            auto grad = as_double(normal_floats(n, 10, 0.01f));
            for (size_t i = 0; i < n; i += 5) grad[i] = 0.0;
            const auto g = k.set_gradient(grad);
            Hyper h = default_hyper(f.kind, 4, wd);
            h.skip_zeros = true;
            k.step(h);
            ref.step(g, h);
            const auto p = k.params();
            const auto s1 = k.s1.download();
            const bool skips = f.kind != Kind::AdEMAMix &&
                               !(wd > 0.0f && (f.kind == Kind::Momentum || f.kind == Kind::RMSprop || f.kind == Kind::Adagrad));
            long untouched = 0;
            for (size_t i = 0; i < n; i += 5) untouched += bits_of(p[i]) == bits_of(p0[i]) && bits_of(s1[i]) == bits_of(s1_0[i]);
            if (skips) CHECK(untouched == static_cast<long>(n / 5));  // otherwise the reference decides
            const Tolerance tol = tolerance32(f.dtype);
            CHECK(count_not_close(p, ref.p, tol.atol, tol.rtol) <= (f.kind == Kind::Lion ? 15 : 0));
        }
    }
}

TEST_CASE("optim8 32-bit: fp16 and bf16 parameters are stored rounded to nearest even", "[optim8][32bit][rounding]"
          "[fn:cmomentum32bit_grad_16][fn:kbit_momentum32bit_grad_bf16]") {
    if (!backend().has_optim8()) return;
    // Momentum at step 1 with lr 1: p_new = p - g exactly in fp32, then one rounding to the type.
    for (int32_t dtype : {KBIT_DTYPE_FP16, KBIT_DTYPE_BF16}) {
        const auto& f = optim32_function(Kind::Momentum, dtype);
        const float ulp = dtype == KBIT_DTYPE_FP16 ? 0x1p-10f : 0x1p-7f;  // at 1.0
        // ties: 1 + ulp/2 -> 1 (even); (1 + ulp) + ulp/2 -> 1 + 2 ulp (even); just above a tie -> up.
        const std::vector<float> p0{1.0f, 1.0f + ulp, 1.0f, -1.0f, 1.0f + ulp};
        const std::vector<float> g{-ulp / 2, -ulp / 2, -(ulp / 2 + ulp / 64), ulp / 2, -ulp / 4};
        const std::vector<float> want{1.0f, 1.0f + 2 * ulp, 1.0f + ulp, -1.0f, 1.0f + ulp};
        Kernel32 k(f, p0);
        k.set_gradient(as_double(g));
        Hyper h = default_hyper(Kind::Momentum, 1);
        h.lr = 1.0f;
        k.step(h);
        const auto p = k.params();
        for (size_t i = 0; i < p.size(); ++i) {
            INFO(f.name << " element " << i);
            CHECK(p[i] == want[i]);
        }
    }
}

TEST_CASE("optim8 32-bit: weight decay placement fp32: decoupled after the step (Adam, AdEMAMix), before it (Lion), coupled (others)",
          "[optim8][32bit][decay]" FN_OPTIM8_32BIT_FP32) {
    if (!backend().has_optim8()) return;
    // A large lr * wd (0.5) makes the placements differ by a large fraction of the step.
    for (const auto& f : optim32_functions()) {
        if (f.dtype != KBIT_DTYPE_FP32) continue;
        INFO(f.name);
        const size_t n = 1000;
        const auto p0 = normal_floats(n, 12, 0.1f);
        Kernel32 k(f, p0);
        RefOptimizer ref(f.kind, p0);
        const auto g = k.set_gradient(as_double(normal_floats(n, 13, 0.01f)));
        Hyper h = default_hyper(f.kind, 1);
        h.lr = 0.1f;
        h.weight_decay = 5.0f;
        k.step(h);
        ref.step(g, h);
        CHECK(count_not_close(k.params(), ref.p, 1e-6, 1e-5) == 0);
    }
}
