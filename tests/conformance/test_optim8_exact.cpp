// Optimizers, bit-exactness: every 32-bit and 8-bit optimizer of the backend equals the scalar
// reference (kbit::ref, the order of kbit_optim_math.h) byte for byte, for sizes around the vector,
// block and norm-chunk boundaries, weight decay, skip_zeros, clipping, special gradients and custom
// code tables, with the backend's OpenMP runtime at 1 and at 2 threads. Floating-point outputs
// (parameters, 32-bit states, unorm) may differ only where both values are NaN: the contract leaves
// NaN payloads unspecified (x86 propagates an operand's, a GPU returns its canonical NaN).
#include <cmath>
#include <cstring>

#include <catch2/catch.hpp>

#include "optim8_cases.h"
#include "optim_configs.h"
#include "test_8bit_util.h"
#include "ref_optim8.h"

using namespace kbit_test;

namespace {

using Config = OptimConfig;

std::vector<float> abs_floats(std::vector<float> v) {
    for (auto& x : v) x = std::fabs(x);
    return v;
}

template <class T>
void require_same(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
    const long at = first_bit_difference(got, want);
    INFO(what << ": first difference at " << at);
    REQUIRE(at == -1);
}

bool is_nan_element(const uint8_t* x, int32_t dtype) {
    if (dtype == KBIT_DTYPE_FP32) {
        float f;
        std::memcpy(&f, x, 4);
        return std::isnan(f);
    }
    uint16_t h;
    std::memcpy(&h, x, 2);
    return std::isnan(dtype == KBIT_DTYPE_FP16 ? kbit::half_to_float(h) : kbit::bf16_to_float(h));
}

// Raw elements of `dtype` equal bit for bit, or both NaN.
void require_same_values(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int32_t dtype,
                         const char* what) {
    REQUIRE(got.size() == want.size());
    const size_t size = dtype_size(dtype);
    long at = -1;
    for (size_t i = 0; i < got.size() && at < 0; i += size)
        if (std::memcmp(&got[i], &want[i], size) != 0 && !(is_nan_element(&got[i], dtype) && is_nan_element(&want[i], dtype)))
            at = static_cast<long>(i / size);
    INFO(what << ": first difference at " << at);
    REQUIRE(at == -1);
}

void require_same_values(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    std::vector<uint8_t> g(got.size() * 4), w(want.size() * 4);
    std::memcpy(g.data(), got.data(), g.size());
    std::memcpy(w.data(), want.data(), w.size());
    require_same_values(g, w, KBIT_DTYPE_FP32, what);
}

void check_32bit(const Optim32Fn& f, int n, const Config& cfg, uint32_t seed) {
    const size_t states1 = f.kind == Kind::AdEMAMix ? 2 * n : n;
    const bool two = kbit::optim::two_state(f.kind);
    const auto g = to_dtype(optim_gradients(n, seed, cfg), f.dtype);
    const auto p = to_dtype(normal_floats(n, seed + 2, 0.1f), f.dtype);
    const auto s1 = normal_floats(states1, seed + 3, 0.01f);
    const auto s2 = abs_floats(normal_floats(n, seed + 4, 1e-2f));
    const float unorm0 = 0.25f, param_norm = 0.05f;
    Hyper h = default_hyper(f.kind, cfg.step, cfg.wd);
    h.skip_zeros = cfg.skip_zeros;
    h.gnorm_scale = cfg.gnorm_scale;

    // Reference on host copies.
    auto rp = p;
    auto rs1 = s1, rs2 = s2;
    float runorm = unorm0;
    const kbit::ref::Mem32 mem{g.data(), rp.data(), rs1.data(), two ? rs2.data() : nullptr, n};
    kbit::ref::optim32_step(f.dtype, f.kind, h, mem, &runorm, cfg.max_unorm, param_norm);

    for (int threads : {1, 2}) {
        ThreadScope scope(threads);
        INFO(f.name << " n " << n << " " << cfg.label << " threads " << threads);
        {
            DeviceBuffer<uint8_t> dg(g), dp(p);
            DeviceBuffer<float> ds1(s1), ds2(s2), du(std::vector<float>{unorm0});
            require_ok(f.call(dg.get(), dp.get(), ds1.get(), two ? ds2.get() : nullptr, du.get(), cfg.max_unorm,
                              param_norm, h, n),
                       f.name.c_str());
            require_same_values(dp.download(), rp, f.dtype, "p");
            require_same_values(ds1.download(), rs1, "state1");
            if (two) require_same_values(ds2.download(), rs2, "state2");
            require_same_values(du.download(), std::vector<float>{runorm}, "unorm");
            require_same(dg.download(), g, "g (unchanged)");
        }
    }
}

// Code tables: the dynamic maps, and tables that exercise the backend's fast paths' corners.
struct Tables {
    const char* label;
    std::vector<float> q1, q2;
};

std::vector<Tables> tables() {
    std::vector<Tables> t;
    t.push_back({"dynamic maps", dynamic_map(true), dynamic_map(false)});
    // Linear maps with a repeated 0.0 (bitsandbytes' create_linear_map) and top entry 0.9 (!= 1).
    std::vector<float> lin, ulin;
    for (int i = 0; i < 255; ++i) lin.push_back(-1.0f + 2.0f * static_cast<float>(i) / 254.0f);
    lin.insert(lin.begin() + 127, 0.0f);
    for (int i = 0; i < 256; ++i) ulin.push_back(0.9f * static_cast<float>(i) / 255.0f);
    t.push_back({"linear maps, repeated zero, top 0.9", lin, ulin});
    // Clustered entries one ulp apart (several midpoints per 16-bit prefix) and an infinite entry
    // (the bucket table's irregular buckets).
    auto crowd = dynamic_map(true);
    for (int i = 200; i < 240; ++i) crowd[i] = std::nextafter(crowd[199], 2.0f) + static_cast<float>(i - 200) * 1e-7f;
    std::sort(crowd.begin(), crowd.end());
    auto inf_top = dynamic_map(false);
    inf_top[255] = INFINITY;
    t.push_back({"crowded signed map, unsigned map ending in +inf", crowd, inf_top});
    return t;
}

void check_8bit(const Optim8Fn& f, int n, const Config& cfg, const Tables& tb, bool fresh_state, uint32_t seed) {
    const bool two = kbit::optim::two_state(f.kind);
    const int64_t blocks = (n + 255) / 256;
    const size_t codes1 = f.kind == Kind::AdEMAMix ? 2 * n : n;
    const size_t scales1 = f.kind == Kind::AdEMAMix ? 2 * blocks : blocks;
    auto gv = optim_gradients(n, seed, cfg);
    if (n > 600) std::fill(gv.begin() + 256, gv.begin() + 512, 0.0f);  // an all-zero gradient block
    const auto g = to_dtype(gv, f.dtype);
    const auto p = to_dtype(normal_floats(n, seed + 2, 0.1f), f.dtype);
    std::vector<uint8_t> c1(codes1, 0), c2(n, 0);
    std::vector<float> a1(scales1, 0.0f), a2(blocks, 0.0f);
    if (!fresh_state) {
        std::mt19937 rng(seed + 3);
        for (auto& c : c1) c = static_cast<uint8_t>(rng());
        for (auto& c : c2) c = static_cast<uint8_t>(rng());
        a1 = abs_floats(normal_floats(scales1, seed + 4, 0.02f));
        a2 = abs_floats(normal_floats(blocks, seed + 5, 1e-4f));
        if (blocks > 2) a1[1] = a2[1] = 0.0f;  // an all-zero state block
    }
    Hyper h = default_hyper(f.kind, cfg.step, cfg.wd);
    h.skip_zeros = cfg.skip_zeros;
    h.gnorm_scale = cfg.gnorm_scale;

    auto rp = p;
    auto rc1 = c1, rc2 = c2;
    auto ra1 = a1, ra2 = a2;
    const kbit::ref::Mem8 mem{rp.data(), g.data(), rc1.data(), two ? rc2.data() : nullptr, tb.q1.data(),
                              two ? tb.q2.data() : nullptr, ra1.data(), two ? ra2.data() : nullptr, n};
    kbit::ref::optim8_step(f.dtype, f.kind, h, mem);

    for (int threads : {1, 2}) {
        ThreadScope scope(threads);
        INFO(f.name << " n " << n << " " << cfg.label << ", " << tb.label
                    << (fresh_state ? ", zero state" : ", random state") << ", threads " << threads);
        {
            DeviceBuffer<uint8_t> dg(g), dp(p), dc1(c1), dc2(c2);
            DeviceBuffer<float> dq1(tb.q1), dq2(tb.q2), da1(a1), da2(a2);
            require_ok(f.call(dp.get(), dg.get(), dc1.get(), two ? dc2.get() : nullptr, dq1.get(),
                              two ? dq2.get() : nullptr, da1.get(), two ? da2.get() : nullptr, h, n),
                       f.name.c_str());
            require_same_values(dp.download(), rp, f.dtype, "p");
            require_same(dc1.download(), rc1, "state1 codes");
            require_same(da1.download(), ra1, "absmax1");
            if (two) {
                require_same(dc2.download(), rc2, "state2 codes");
                require_same(da2.download(), ra2, "absmax2");
            }
            require_same(dq1.download(), tb.q1, "quantiles1 (unchanged)");
        }
    }
}

}  // namespace

TEST_CASE("optim8 exact: 32-bit optimizers fp32/fp16/bf16 equal the scalar reference bit for bit", "[optim8][exact]"
          FN_OPTIM8_32BIT) {
    if (!backend().has_optim8()) return;
    uint32_t seed = 100;
    for (const auto& f : optim32_functions()) {
        for (int n : {1, 13, 256, 4095, 2 * 4096 + 37, 40000})
            for (const auto& cfg : kOptimConfigs) check_32bit(f, n, cfg, seed++);
        // Large enough for the CPU backend to split it over threads (>= 64K elements per thread).
        check_32bit(f, 300007, kOptimConfigs[1], seed++);
        check_32bit(f, 300007, kOptimConfigs[2], seed++);
    }
}

TEST_CASE("optim8 exact: 8-bit blockwise optimizers fp32/fp16/bf16 blocksize 256 equal the scalar reference",
          "[optim8][exact]" FN_OPTIM8_8BIT) {
    if (!backend().has_optim8()) return;
    uint32_t seed = 500;
    const auto tbs = tables();
    for (const auto& f : optim8_functions()) {
        for (int n : {1, 200, 256, 257, 1000, 256 * 40 + 100})
            for (const auto& cfg : kOptimConfigs) {
                if (cfg.max_unorm > 0.0f) continue;  // no clipping in 8-bit
                check_8bit(f, n, cfg, tbs[0], cfg.step == 1, seed++);
            }
        for (const auto& tb : tbs) check_8bit(f, 3000, kOptimConfigs[1], tb, false, seed++);
        check_8bit(f, 256 * 300 + 77, kOptimConfigs[1], tbs[0], false, seed++);  // split over threads
    }
}

TEST_CASE("optim8 exact: the backend's OpenMP thread count is really varied by the tests", "[optim8][threads]") {
    BackendThreads threads;
    if (!threads.available()) {
        WARN("backend has no OpenMP runtime: thread-count independence is not exercised");
        return;
    }
    const int saved = threads.get();
    threads.set(1);
    CHECK(threads.get() == 1);
    threads.set(2);
    CHECK(threads.get() == 2);
    threads.set(saved);
}

namespace {

// Whether the code of state s under absmax depends on computing s / absmax exactly: the reference's
// code (quantize8, a division) differs from the code of s * (1 / absmax), the multiply a kernel may
// use instead.
bool division_decides(const std::vector<float>& code, bool is_signed, float s, float absmax) {
    uint8_t fast = kbit::code8_index(code.data(), s * (1.0f / absmax));
    if (is_signed) fast = kbit::optim::sign_fix8(code.data(), fast, s);
    return fast != kbit::optim::quantize8(code.data(), s, absmax, is_signed);
}

}  // namespace

TEST_CASE("optim8 exact: 8-bit Adam re-quantizes states a few ulps from a code boundary like the reference (fp32)",
          "[optim8][exact][boundary]" "[fn:cadam_8bit_blockwise_grad_fp32]") {
    if (!backend().has_optim8()) return;
    // beta1 = beta2 = 0 on a zero state: m = g and v = RN(g * g), so the gradients place the states.
    // Each block's lane 0 holds g = A, the absmax of m (and RN(A * A) that of v), A different per
    // block; its other lanes hold gradients whose m or v the division decides the code of: near a
    // midpoint of the map's neighbouring entries times the absmax.
    const auto q1 = dynamic_map(true), q2 = dynamic_map(false);
    const auto& f = optim8_function(Kind::Adam, KBIT_DTYPE_FP32);
    std::vector<float> g;
    size_t m_count = 0, v_count = 0;
    for (int e = -12; e <= 12; ++e) {
        const float A = 0.3f * std::pow(1.37f, static_cast<float>(e)), A2 = A * A;
        std::vector<float> m_grads, v_grads;
        for (float y : midpoint_neighbours(q1, 4)) {
            const float m = y * A;
            if (std::fabs(m) < A && division_decides(q1, true, m, A)) m_grads.push_back(m);
        }
        for (float y : midpoint_neighbours(q2, 4)) {
            const float root = std::sqrt(y * A2);
            for (float r : {std::nextafter(root, 0.0f), root, std::nextafter(root, INFINITY)})
                if (r < A && division_decides(q2, false, r * r, A2))
                    v_grads.push_back(v_grads.size() % 2 ? -r : r);  // v = g * g: either sign
        }
        m_count += m_grads.size();
        v_count += v_grads.size();
        for (const auto* src : {&m_grads, &v_grads}) {
            for (size_t i = 0; i < src->size(); i += 255) {
                g.push_back(A);
                for (size_t j = 0; j < 255; ++j) g.push_back((*src)[(i + j) % src->size()]);
            }
        }
    }
    INFO(m_count << " state1 and " << v_count << " state2 boundary gradients");
    // Enough of them that a kernel deciding by the multiply alone gets codes wrong.
    REQUIRE(m_count >= 500);
    REQUIRE(v_count >= 500);
    const int n = static_cast<int>(g.size());
    const int64_t blocks = n / 256;
    Hyper h = default_hyper(Kind::Adam, 1);
    h.beta1 = h.beta2 = 0.0f;
    const auto gd = to_dtype(g, KBIT_DTYPE_FP32);
    const auto p = to_dtype(normal_floats(n, 7, 0.1f), KBIT_DTYPE_FP32);
    std::vector<uint8_t> c1(n, 0), c2(n, 0);
    std::vector<float> a1(blocks, 0.0f), a2(blocks, 0.0f);
    auto rp = p;
    auto rc1 = c1, rc2 = c2;
    auto ra1 = a1, ra2 = a2;
    kbit::ref::optim8_step(KBIT_DTYPE_FP32, Kind::Adam, h,
                           {rp.data(), gd.data(), rc1.data(), rc2.data(), q1.data(), q2.data(), ra1.data(),
                            ra2.data(), n});
    for (int threads : {1, 2}) {
        ThreadScope scope(threads);
        INFO(f.name << ", n " << n << ", threads " << threads);
        DeviceBuffer<uint8_t> dg(gd), dp(p), dc1(c1), dc2(c2);
        DeviceBuffer<float> dq1(q1), dq2(q2), da1(a1), da2(a2);
        require_ok(f.call(dp.get(), dg.get(), dc1.get(), dc2.get(), dq1.get(), dq2.get(), da1.get(), da2.get(), h, n),
                   f.name.c_str());
        require_same(da1.download(), ra1, "absmax1");
        require_same(da2.download(), ra2, "absmax2");
        require_same(dc1.download(), rc1, "state1 codes");
        require_same(dc2.download(), rc2, "state2 codes");
        require_same_values(dp.download(), rp, KBIT_DTYPE_FP32, "p");
    }
}
