// Optimizers, 8-bit corner cases with exact expectations: padding lanes of a partial last block,
// skip_zeros (bitsandbytes' uninitialised state fixed), all-zero blocks (the 255 code), NaN/Inf
// gradients in Adam/AdEMAMix, AdEMAMix's [m1 | m2] layout for n % 256 != 0 (bitsandbytes' scale
// index fixed), and a code table whose last entry is not 1.
#include <cmath>

#include <catch2/catch.hpp>

#include "optim8_cases.h"

using namespace kbit_test;

namespace {

// One 8-bit call on host vectors through device buffers.
struct Call8 {
    const Optim8Fn& f;
    std::vector<float> p, g, q1 = dynamic_map(true), q2 = dynamic_map(false), a1, a2;
    std::vector<uint8_t> c1, c2;
    Call8(const Optim8Fn& f, size_t n) : f(f), p(n, 0.0f), g(n, 0.0f) {
        const size_t blocks = (n + 255) / 256, twice = f.kind == Kind::AdEMAMix ? 2 : 1;
        a1.assign(twice * blocks, 0.0f);
        a2.assign(blocks, 0.0f);
        c1.assign(twice * n, 0);
        c2.assign(n, 0);
    }
    void run(const Hyper& h) {
        const bool two = kbit::optim::two_state(f.kind);
        DeviceBuffer<uint8_t> dp(to_dtype(p, f.dtype)), dg(to_dtype(g, f.dtype)), dc1(c1), dc2(c2);
        DeviceBuffer<float> dq1(q1), dq2(q2), da1(a1), da2(a2);
        require_ok(f.call(dp.get(), dg.get(), dc1.get(), two ? dc2.get() : nullptr, dq1.get(), two ? dq2.get() : nullptr,
                          da1.get(), two ? da2.get() : nullptr, h, static_cast<int>(p.size())),
                   f.name.c_str());
        p = from_dtype(dp.download(), f.dtype);
        c1 = dc1.download();
        c2 = dc2.download();
        a1 = da1.download();
        a2 = da2.download();
    }
};

}  // namespace

TEST_CASE("optim8 8-bit edges: padding lanes of a partial block enter the absmax (fp32, blocksize 256)",
          "[optim8][8bit][padding]" FN_OPTIM8_8BIT_FP32) {
    if (!backend().has_optim8()) return;
    // 100 elements with a zero state (code 127 = 0.0) under an old absmax of 1: the padding lanes'
    // code 128 decays to Q1[128] * 1 * beta, larger than anything the tiny real gradients make.
    for (const auto& f : optim8_functions()) {
        if (f.dtype != KBIT_DTYPE_FP32) continue;
        for (bool skip : {false, true}) {
            if (skip && kbit::optim::two_state(f.kind)) continue;
            INFO(f.name << (skip ? " skip_zeros" : ""));
            Call8 c(f, 100);
            std::fill(c.c1.begin(), c.c1.end(), 127);
            std::fill(c.a1.begin(), c.a1.end(), 1.0f);
            std::fill(c.g.begin(), c.g.end(), 1e-12f);
            Hyper h = default_hyper(f.kind, 3);
            h.skip_zeros = skip;
            const float q = c.q1[128];
            c.run(h);
            // The padding lane's state after the zero-gradient update, evaluated as the kernel does.
            float want = q * 1.0f;
            switch (f.kind) {
                case Kind::Adam:
                case Kind::AdEMAMix:
                case Kind::RMSprop: want = want * h.beta1 + (1.0f - h.beta1) * 0.0f; break;
                case Kind::Momentum: want = want * h.beta1 + 0.0f; break;
                case Kind::Lion: want = want * h.beta2 + (1.0f - h.beta2) * 0.0f; break;
                case Kind::Adagrad: want = want + 0.0f * 0.0f; break;
            }
            if (skip) want = q * 1.0f;  // skipped padding lanes keep their dequantized state
            CHECK(bits_of(c.a1[0]) == bits_of(want));
            if (f.kind == Kind::AdEMAMix)  // m2's padding lanes decay with beta3
                CHECK(bits_of(c.a1[1]) == bits_of(q * 1.0f * h.beta3 + (1.0f - h.beta3) * 0.0f));
        }
    }
}

TEST_CASE("optim8 8-bit edges: skip_zeros keeps skipped states (re-quantized, deterministic) and parameters fp32/bf16",
          "[optim8][8bit][skip]" "[fn:cmomentum_8bit_blockwise_grad_fp32][fn:cmomentum_8bit_blockwise_grad_bf16]"
          "[fn:crmsprop_8bit_blockwise_grad_fp32][fn:crmsprop_8bit_blockwise_grad_bf16]"
          "[fn:clion_8bit_blockwise_grad_fp32][fn:clion_8bit_blockwise_grad_bf16][fn:cadagrad_8bit_blockwise_grad_fp32]"
          "[fn:cadagrad_8bit_blockwise_grad_bf16]") {
    if (!backend().has_optim8()) return;
    for (const auto& f : optim8_functions()) {
        if (kbit::optim::two_state(f.kind) || f.dtype == KBIT_DTYPE_FP16) continue;
        INFO(f.name);
        const size_t n = 600;
        Call8 c(f, n);
        c.p = normal_floats(n, 40, 0.1f);
        for (auto& x : c.p) x = round_dtype(x, f.dtype);
        std::mt19937 rng(41);
        for (auto& x : c.c1) x = static_cast<uint8_t>(f.kind == Kind::Momentum || f.kind == Kind::Lion ? rng() : 128 + rng() % 128);
        c.a1 = {0.02f, 0.03f, 0.01f};
        c.g = normal_floats(n, 42, 0.01f);
        for (size_t i = 0; i < n; i += 3) c.g[i] = 0.0f;
        for (size_t i = 256; i < 512; ++i) c.g[i] = 0.0f;  // a whole block skipped: its absmax stays
        Hyper h = default_hyper(f.kind, 5);
        h.skip_zeros = true;
        Call8 again = c;
        const auto before = c;
        c.run(h);
        again.run(h);
        CHECK(c.c1 == again.c1);  // no uninitialised values: the same bytes every time
        CHECK(c.a1 == again.a1);
        for (size_t i = 0; i < n; ++i) {
            if (c.g[i] != 0.0f) continue;
            INFO("element " << i);
            REQUIRE(bits_of(c.p[i]) == bits_of(before.p[i]));
            // The old dequantized value, re-quantized under the block's new absmax.
            const float old = before.q1[before.c1[i]] * before.a1[i / 256];
            CHECK(c.c1[i] == kbit::optim::quantize8(c.q1.data(), old, c.a1[i / 256], true));
        }
        float skipped_max = -FLT_MAX;  // block 1 is all skipped: its absmax is its old states' maximum
        for (size_t i = 256; i < 512; ++i) skipped_max = std::max(skipped_max, std::fabs(before.q1[before.c1[i]] * before.a1[1]));
        CHECK(bits_of(c.a1[1]) == bits_of(skipped_max));
    }
}

TEST_CASE("optim8 8-bit edges: an all-zero block gives absmax 0, state1 code 255, state2 code 0 (fp32/fp16/bf16)",
          "[optim8][8bit][zero]" FN_OPTIM8_8BIT) {
    if (!backend().has_optim8()) return;
    for (const auto& f : optim8_functions()) {
        INFO(f.name);
        const size_t n = 512;
        Call8 c(f, n);  // zero states: codes 0, absmax 0
        c.p = normal_floats(n, 43, 0.1f);
        for (auto& x : c.p) x = round_dtype(x, f.dtype);
        c.g = normal_floats(n, 44, 0.01f);
        std::fill(c.g.begin(), c.g.begin() + 256, 0.0f);  // block 0: zero gradient on a zero state
        const auto p0 = c.p;
        c.run(default_hyper(f.kind, 1));
        CHECK(c.a1[0] == 0.0f);
        CHECK(c.a1[1] > 0.0f);
        for (size_t i = 0; i < 256; ++i) {
            INFO("element " << i);
            // 0 / 0 = NaN -> code 0 (-0.99), whose sign the fix corrects: 0 - 1 = 255 (+1.0 * 0).
            REQUIRE(static_cast<int>(c.c1[i]) == 255);
            if (f.kind == Kind::AdEMAMix) REQUIRE(static_cast<int>(c.c1[n + i]) == 255);
            if (kbit::optim::two_state(f.kind)) REQUIRE(static_cast<int>(c.c2[i]) == 0);
            REQUIRE(bits_of(c.p[i]) == bits_of(p0[i]));  // every update of a zero state by 0 is 0
        }
        if (kbit::optim::two_state(f.kind)) CHECK(c.a2[0] == 0.0f);
    }
}

TEST_CASE("optim8 8-bit edges: NaN/Inf gradients zero Adam's and AdEMAMix's states and leave p, weight decay or not (fp32/fp16/bf16)",
          "[optim8][8bit][nan]"
          "[fn:cadam_8bit_blockwise_grad_fp32][fn:cadam_8bit_blockwise_grad_fp16][fn:cadam_8bit_blockwise_grad_bf16]"
          "[fn:cademamix_8bit_blockwise_grad_fp32][fn:cademamix_8bit_blockwise_grad_fp16]"
          "[fn:cademamix_8bit_blockwise_grad_bf16]") {
    if (!backend().has_optim8()) return;
    for (const auto& f : optim8_functions()) {
        if (!kbit::optim::two_state(f.kind)) continue;
        for (float wd : {0.0f, 0.1f}) {
            INFO(f.name << ", weight decay " << wd);
            const size_t n = 300;
            Call8 c(f, n);
            c.p = normal_floats(n, 45, 0.1f);
            for (auto& x : c.p) x = round_dtype(x, f.dtype);
            c.p[10] = -0.0f;  // -0.0 + 0.0 would give +0.0: p must be left, not stepped by zero
            c.g = normal_floats(n, 46, 0.01f);
            std::mt19937 rng(47);
            for (auto& x : c.c1) x = static_cast<uint8_t>(rng());
            for (auto& x : c.c2) x = static_cast<uint8_t>(rng());
            std::fill(c.a1.begin(), c.a1.end(), 0.01f);
            std::fill(c.a2.begin(), c.a2.end(), 1e-4f);
            const size_t specials[] = {3, 10, 20, 280};
            c.g[3] = NAN, c.g[10] = INFINITY, c.g[20] = -INFINITY, c.g[280] = -NAN;
            const auto p0 = c.p;
            Hyper h = default_hyper(f.kind, 4, wd);
            h.lr = 0.01f;  // steps of about 10 bf16 ulps
            c.run(h);
            for (size_t i : specials) {
                INFO("element " << i);
                CHECK(bits_of(c.p[i]) == bits_of(p0[i]));
                CHECK(c.q1[c.c1[i]] == 0.0f);  // m = +0: the signed map's zero
                CHECK(c.q2[c.c2[i]] == 0.0f);
                if (f.kind == Kind::AdEMAMix) CHECK(c.q1[c.c1[n + i]] == 0.0f);
            }
            size_t moved = 0;
            for (size_t i = 0; i < n; ++i) moved += c.p[i] != p0[i];
            CHECK(moved > n / 2);  // the finite elements did step
        }
    }
}

TEST_CASE("optim8 8-bit edges: AdEMAMix state1 = [m1 | m2], absmax1 = [m1 scales | m2 scales] for n % 256 != 0 (fp32)",
          "[optim8][8bit][ademamix]" "[fn:cademamix_8bit_blockwise_grad_fp32]") {
    if (!backend().has_optim8()) return;
    const auto& f = optim8_function(Kind::AdEMAMix, KBIT_DTYPE_FP32);
    const size_t n = 300, blocks = 2;  // bitsandbytes' CUDA kernel would put m2's block-0 scale at [1]
    Call8 c(f, n);
    c.g = normal_floats(n, 48, 0.01f);
    c.g[5] = 0.5f;    // block 0's largest gradient
    c.g[290] = 0.2f;  // block 1's
    const Hyper h = default_hyper(Kind::AdEMAMix, 1);
    c.run(h);
    // From a zero state: m1 = (1 - beta1) g, m2 = (1 - beta3) g; each block's scale is its own max.
    const float m1_0 = 0.0f * h.beta1 + (1.0f - h.beta1) * 0.5f, m1_1 = 0.0f * h.beta1 + (1.0f - h.beta1) * 0.2f;
    const float m2_0 = 0.0f * h.beta3 + (1.0f - h.beta3) * 0.5f, m2_1 = 0.0f * h.beta3 + (1.0f - h.beta3) * 0.2f;
    REQUIRE(c.a1.size() == 2 * blocks);
    CHECK(c.a1[0] == m1_0);
    CHECK(c.a1[1] == m1_1);
    CHECK(c.a1[2] == m2_0);
    CHECK(c.a1[3] == m2_1);
    CHECK(c.c1[5] == 255);        // m1 at its block's max
    CHECK(c.c1[n + 5] == 255);    // m2 at its block's max, in the second half of state1
    CHECK(c.c1[290] == 255);
    CHECK(c.c1[n + 290] == 255);
    for (size_t i = 0; i < n; ++i) {  // m2 / scale equals m1 / scale up to rounding: the same codes
        INFO("element " << i);
        const float y1 = c.q1[c.c1[i]], y2 = c.q1[c.c1[n + i]];
        CHECK(std::fabs(y1 - y2) <= 0.02f);
    }
}

TEST_CASE("optim8 8-bit edges: a code table whose last entry is not 1 quantizes to the nearest entry (fp32)",
          "[optim8][8bit][table]" "[fn:cmomentum_8bit_blockwise_grad_fp32]") {
    if (!backend().has_optim8()) return;
    // kbit decision: states are quantized with kbit::code8_index on the caller's table, which compares
    // with (c[254] + c[255]) / 2; bitsandbytes' kernel uses the constant 1.0 for c[255] there.
    const auto& f = optim8_function(Kind::Momentum, KBIT_DTYPE_FP32);
    Call8 c(f, 256);
    for (int i = 128; i < 255; ++i) c.q1[i] *= 0.8f;  // positive entries below 0.8, still ascending
    c.q1[254] = 0.8f;
    c.q1[255] = 0.9f;
    c.g[0] = 1.0f;    // the block's max: y = 1
    c.g[1] = 0.88f;   // y = 0.88: nearest 0.9 (code 255); with 1.0 in place of 0.9 the midpoint is 0.9 -> 254
    c.g[2] = 0.84f;   // below both midpoints: 254
    c.run(default_hyper(Kind::Momentum, 1));  // step 1: s = g
    CHECK(c.a1[0] == 1.0f);
    CHECK(c.c1[0] == 255);
    CHECK(c.c1[1] == 255);
    CHECK(c.c1[2] == 254);
}
