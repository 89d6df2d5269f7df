// Optimizers, 8-bit blockwise state: every optimizer and parameter type trains a least-squares
// regression for 60 steps; at every step (a) the parameters equal an fp64 step on the dequantized
// states within the 32-bit tolerances, (b) each new absmax is the block's largest new state, padding
// lanes included, and (c) every re-quantized state lies within the code interval that holds it
// (the error the 8-bit map's resolution allows); and the run stays as close to the 32-bit optimizer
// (fp64 reference) as bitsandbytes' own 8-bit test demands.
#include <cmath>

#include <catch2/catch.hpp>

#include "optim_reference.h"

using namespace kbit_test;

namespace {

constexpr int kRows = 37, kCols = 111, kBatch = 64;  // 4107 parameters: 17 blocks, the last partial

struct Kernel8 {
    Kernel8(const Optim8Fn& f, const std::vector<float>& p0)
        : f(f), n(p0.size()), blocks((p0.size() + 255) / 256), ademamix(f.kind == Kind::AdEMAMix),
          two(kbit::optim::two_state(f.kind)), q1v(dynamic_map(true)), q2v(dynamic_map(false)),
          p(to_dtype(p0, f.dtype)), g(p0.size() * dtype_size(f.dtype)),
          c1(std::vector<uint8_t>(ademamix ? 2 * n : n, 0)), c2(std::vector<uint8_t>(n, 0)), q1(q1v), q2(q2v),
          a1(std::vector<float>(ademamix ? 2 * blocks : blocks, 0.0f)), a2(std::vector<float>(blocks, 0.0f)) {}

    std::vector<float> params() const { return from_dtype(p.download(), f.dtype); }
    std::vector<double> set_gradient(const std::vector<double>& grad) {
        const auto raw = to_dtype(std::vector<float>(grad.begin(), grad.end()), f.dtype);
        g.upload(raw);
        return as_double(from_dtype(raw, f.dtype));
    }
    void step(const Hyper& h) {
        require_ok(f.call(p.get(), g.get(), c1.get(), two ? c2.get() : nullptr, q1.get(), two ? q2.get() : nullptr,
                          a1.get(), two ? a2.get() : nullptr, h, static_cast<int>(n)),
                   f.name.c_str());
    }
    // Dequantized states (code value * block absmax, the fp32 product the kernel forms).
    std::vector<double> state(int which) const {  // 1: state1 (m1), 2: state2, 3: AdEMAMix m2
        const auto codes = (which == 2 ? c2 : c1).download();
        const auto scales = (which == 2 ? a2 : a1).download();
        const auto& table = which == 2 ? q2v : q1v;
        const size_t off = which == 3 ? n : 0, soff = which == 3 ? blocks : 0;
        std::vector<double> s(n);
        for (size_t i = 0; i < n; ++i) s[i] = table[codes[off + i]] * scales[soff + i / 256];
        return s;
    }

    const Optim8Fn& f;
    size_t n, blocks;
    bool ademamix, two;
    std::vector<float> q1v, q2v;
    DeviceBuffer<uint8_t> p, g, c1, c2;
    DeviceBuffer<float> q1, q2, a1, a2;
};

// Checks one 8-bit state after a step against the fp64 states `want` computed from the previous
// dequantized states; `pad` is the value the padding lanes of the last block contribute.
void check_state(const Kernel8& k, int which, const std::vector<double>& want, double pad, const char* name) {
    const auto codes = (which == 2 ? k.c2 : k.c1).download();
    const auto scales = (which == 2 ? k.a2 : k.a1).download();
    const auto& table = which == 2 ? k.q2v : k.q1v;
    const size_t off = which == 3 ? k.n : 0, soff = which == 3 ? k.blocks : 0;
    long bad_absmax = 0, bad_code = 0, first = -1;
    for (size_t b = 0; b < k.blocks; ++b) {
        double mx = 0.0;
        const size_t end = std::min(k.n, 256 * (b + 1));
        for (size_t i = 256 * b; i < end; ++i) mx = std::max(mx, std::fabs(want[i]));
        if (end - 256 * b < 256) mx = std::max(mx, std::fabs(pad));
        const double absmax = scales[soff + b];
        if (std::fabs(absmax - mx) > 1e-5 * mx + 1e-30) ++bad_absmax;
        for (size_t i = 256 * b; i < end; ++i) {
            const double y = absmax > 0 ? want[i] / absmax : 0.0;
            const double allowed = (which == 2 ? 0.5 : 1.0) * code_interval(table, y) + 2e-6;
            if (absmax > 0 && std::fabs(table[codes[off + i]] - y) > allowed) {
                if (bad_code++ == 0) first = static_cast<long>(i);
            }
        }
    }
    INFO(name << ": absmax off in " << bad_absmax << " blocks; codes outside their interval: " << bad_code
              << ", first at " << first);
    CHECK(bad_absmax == 0);
    CHECK(bad_code == 0);
}

}  // namespace

TEST_CASE("optim8 8-bit: every optimizer fp32/fp16/bf16 blocksize 256 takes exact steps on its dequantized states and re-quantizes within the map's resolution",
          "[optim8][8bit]" FN_OPTIM8_8BIT) {
    const LeastSquares problem(kRows, kCols, kBatch, 31);
    train_each<Kernel8>(optim8_functions(), problem, 15, [&](Kernel8& k, float wd, const auto& p0, Tolerance tol) {
        const double loss0 = problem.loss(p0);
        const auto q1 = dynamic_map(true);
        for (int t = 1; t <= 60; ++t) {
            INFO("step " << t);
            std::vector<double> s1 = k.state(1), s2 = k.two ? k.state(2) : std::vector<double>(k.n),
                                s3 = k.ademamix ? k.state(3) : std::vector<double>(k.n);
            const auto a1 = k.a1.download();
            std::vector<double> p = as_double(k.params());
            std::vector<double> grad;
            problem.loss(k.params(), &grad);
            const auto g = k.set_gradient(grad);
            const Hyper h = default_hyper(k.f.kind, t, wd);
            for (size_t i = 0; i < k.n; ++i) ref8_element(k.f.kind, h, k.f.dtype, g[i], p[i], s1[i], s2[i], s3[i]);
            // Padding lanes: g = 0, p = 0, state1/m2 code 128, state2 code 0, old block scales.
            double pp = 0.0, pad1 = q1[128] * a1[k.blocks - 1], pad2 = 0.0,
                   pad3 = k.ademamix ? q1[128] * a1[2 * k.blocks - 1] : 0.0;
            ref8_element(k.f.kind, h, k.f.dtype, 0.0, pp, pad1, pad2, pad3);
            k.step(h);
            long at = -1;
            const long bad = count_not_close(k.params(), p, tol.atol, tol.rtol, &at);
            INFO("p: " << bad << " not close, first at " << at);
            CHECK(bad <= (k.f.kind == Kind::Lion ? 15 : 0));
            check_state(k, 1, s1, pad1, "state1");
            if (k.two) check_state(k, 2, s2, pad2, "state2");
            if (k.ademamix) check_state(k, 3, s3, pad3, "m2");
        }
        // bitsandbytes' 8-bit RMSprop/Adagrad step p with the raw gradient but accumulate the
        // decayed one (kbit keeps this, see abi/ABI.md): where g ~ -p*wd the step explodes, so
        // with weight decay these two need not descend.
        const bool raw_step = (k.f.kind == Kind::RMSprop || k.f.kind == Kind::Adagrad) && wd > 0.0f;
        if (!raw_step) CHECK(problem.loss(k.params()) < loss0);
    });
}

TEST_CASE("optim8 8-bit: 60 steps stay as close to the 32-bit optimizer as bitsandbytes' 8-bit test requires",
          "[optim8][8bit]" FN_OPTIM8_8BIT) {
    if (!backend().has_optim8()) return;
    // bitsandbytes' setting (test_optimizer8bit): p ~ 0.1 N(0,1), fresh gradients ~ 0.01 N(0,1) each
    // step, parameters resynchronised after each step; its thresholds are calibrated for this.
    const size_t n = 4097 * 8;  // n % 256 = 8
    for (const auto& f : optim8_functions()) {
        INFO(f.name);
        const auto p0 = initial_params(n, 16, f.dtype);
        Kernel8 k(f, p0);
        RefOptimizer ref(f.kind, p0);
        const bool bf16 = f.dtype == KBIT_DTYPE_BF16;
        for (int t = 1; t <= 60; ++t) {
            INFO("step " << t);
            const auto g = k.set_gradient(as_double(normal_floats(n, 1000 + t, 0.01f)));
            const Hyper h = default_hyper(f.kind, t);
            k.step(h);
            ref.step(g, h);
            // Fewer than 20 dequantized state elements outside atol 3e-3 / rtol 1e-3.
            auto not_close = [&](int which, const std::vector<double>& want) {
                const auto s = k.state(which);
                return count_not_close(std::vector<float>(s.begin(), s.end()), want, 3e-3, 1e-3);
            };
            CHECK(not_close(1, ref.s1) < 20);
            if (k.two) CHECK(not_close(2, ref.s2) < 20);
            if (k.ademamix) CHECK(not_close(3, ref.s3) < 20);
            // Parameter error: mean abs < 6e-5 (bf16 1.7e-4), mean relative < 6e-4 (bf16 1.6e-3). The
            // relative mean leaves out parameters within 1e-3 of zero: with 32K elements (bitsandbytes
            // uses 4M) one parameter crossing zero would dominate it.
            const auto p = k.params();
            double err = 0.0, rel = 0.0;
            size_t counted = 0;
            for (size_t i = 0; i < p.size(); ++i) {
                const double e = std::fabs(p[i] - ref.p[i]);
                err += e;
                if (std::fabs(ref.p[i]) >= 1e-3) rel += e / std::fabs(ref.p[i]), ++counted;
            }
            err /= static_cast<double>(p.size());
            rel /= static_cast<double>(counted);
            // RMSprop and Adagrad keep a sum of squares in the signed map (127 positive codes, ~3%
            // apart at y ~ 0.05, a typical state / absmax): their steps err by up to ~1.5%, where
            // bitsandbytes' thresholds were calibrated on first moments. They get 4x the relative one.
            const double rel_factor = f.kind == Kind::RMSprop || f.kind == Kind::Adagrad ? 4.0 : 1.0;
            CHECK(err < (bf16 ? 1.7e-4 : 6e-5));
            CHECK(rel < (bf16 ? 1.6e-3 : 6e-4) * rel_factor);
            const auto sync = rounded(ref.p, f.dtype);
            ref.p = as_double(sync);
            k.p.upload(to_dtype(sync, f.dtype));
        }
    }
}
