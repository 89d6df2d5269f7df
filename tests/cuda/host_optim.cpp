// Host checks of the CUDA optimizer kernels' decomposition (src/cuda/optim_lanes.h, optim_rules.h):
// the 32-bit update norm as the kernels split it (16 lanes per 4096-element chunk, fold, tree levels
// into a second buffer, the clip factor from set_clip, Lion's order) and the 8-bit block procedure as
// a warp runs it (32 lanes of 8 elements, per-lane absmax folds combined across lanes, the code
// search on the breadth-first table copy), replayed on the host and compared with kbit::ref's
// optim32_step / optim8_step bit for bit for every optimizer, dtype, special gradient and state.
#include <catch2/catch.hpp>

#include "host_util.h"
#include "optim_configs.h"
#include "optim_hyper.h"
#include "optim_lanes.h"
#include "ref_optim8.h"

namespace {

using kbit::optim::Consts;
using kbit::optim::Hyper;
using kbit::optim::Kind;
using hostcheck::kInf;
using hostcheck::kNaN;

const Kind kKinds[] = {Kind::Adam, Kind::Momentum, Kind::RMSprop, Kind::Lion, Kind::Adagrad, Kind::AdEMAMix};

Hyper hyper(Kind kind, int step, float wd, bool skip_zeros, float gnorm_scale) {
    Hyper h = kbit_test::default_hyper(kind, step, wd);
    h.skip_zeros = skip_zeros;
    h.gnorm_scale = gnorm_scale;
    return h;
}

using Config = kbit_test::OptimConfig;
using kbit_test::kOptimConfigs;
using kbit_test::optim_gradients;

// ---- 32-bit: optim32.cu's launch sequence ------------------------------------------------------------

// finish_kernel's tree: level by level from `sums` into alternating buffers.
float tree_by_levels(std::vector<float> src) {
    int64_t count = static_cast<int64_t>(src.size());
    std::vector<float> dst(static_cast<size_t>(count / 2 + 1));
    while (count > 1) {
        const int64_t next = kbit::cuda::tree_level_count(count);
        for (int64_t i = next - 1; i >= 0; --i) dst[i] = kbit::cuda::tree_level_value(src.data(), count, i);  // any order
        src.swap(dst);
        count = next;
    }
    return src[0];
}

template <class T, Kind K>
void cuda_run32(const Hyper& h, const T* g, T* p, float* s1, float* s2, float* unorm, float max_unorm,
                float param_norm, int64_t n) {
    const Consts c = kbit::optim::make_consts(h);
    const bool clip = max_unorm > 0.0f && K != Kind::AdEMAMix;
    const int64_t chunks = (n + kbit::optim::kNormChunk - 1) / kbit::optim::kNormChunk;
    auto norm = [&] {  // norm_chunk_kernel, then finish_kernel's tree
        std::vector<float> sums(static_cast<size_t>(chunks));
        for (int64_t ch = 0; ch < chunks; ++ch) {
            float acc[kbit::optim::kNormLanes];
            for (int l = 0; l < kbit::optim::kNormLanes; ++l) acc[l] = kbit::cuda::norm_lane_sum<T, K>(c, g, s1, s2, n, ch, l);
            sums[ch] = kbit::optim::fold_lanes(acc);
        }
        return tree_by_levels(sums);
    };
    Consts cu = c;  // update32_kernel's constants with the clip factor of finish_kernel
    if (clip) {
        const float total = K == Kind::Lion ? *unorm : norm();
        if (K != Kind::Lion) *unorm = total;
        Consts f = c;
        kbit::optim::set_clip(f, total, max_unorm, param_norm, !kbit::optim::two_state(K));
        cu.u = f.u;
        cu.su = f.su;
    }
    for (int64_t i = 0; i < n; ++i) {  // update32_kernel
        float pv = kbit::Elem<T>::load(p[i]), a = s1[i];
        float b = kbit::optim::two_state(K) ? s2[i] : 0.0f;
        float m2 = K == Kind::AdEMAMix ? s1[n + i] : 0.0f;
        kbit::optim::step32<T, K>(cu, kbit::Elem<T>::load(g[i]), pv, a, b, m2);
        p[i] = kbit::Elem<T>::store(pv);
        s1[i] = a;
        if (kbit::optim::two_state(K)) s2[i] = b;
        if (K == Kind::AdEMAMix) s1[n + i] = m2;
    }
    if (clip && K == Kind::Lion) *unorm = norm();
}

template <class T, Kind K>
void check32(int64_t n, const Config& cfg) {
    INFO(kbit::Elem<T>::name << " kind " << static_cast<int>(K) << " n " << n << " " << cfg.label);
    const bool two = kbit::optim::two_state(K);
    const size_t states1 = static_cast<size_t>(K == Kind::AdEMAMix ? 2 * n : n);
    const auto g = hostcheck::to_elems<T>(optim_gradients(static_cast<size_t>(n), static_cast<uint32_t>(n), cfg));
    const auto p0 = hostcheck::to_elems<T>(hostcheck::normal(static_cast<size_t>(n), 2, 0.1f));
    const auto s10 = hostcheck::normal(states1, 3, 0.01f);
    auto s20 = hostcheck::normal(static_cast<size_t>(n), 4, 0.01f);
    for (auto& x : s20) x = std::fabs(x);
    const Hyper h = hyper(K, cfg.step, cfg.wd, cfg.skip_zeros, cfg.gnorm_scale);

    auto rp = p0, cp = p0;
    auto rs1 = s10, cs1 = s10, rs2 = s20, cs2 = s20;
    float runorm = 0.25f, cunorm = 0.25f;
    const kbit::ref::Mem32 mem{g.data(), rp.data(), rs1.data(), two ? rs2.data() : nullptr, n};
    kbit::ref::optim32_step(kbit::Elem<T>::dtype, K, h, mem, &runorm, cfg.max_unorm, 0.05f);
    cuda_run32<T, K>(h, g.data(), cp.data(), cs1.data(), two ? cs2.data() : nullptr, &cunorm, cfg.max_unorm, 0.05f, n);
    CHECK(hostcheck::first_bit_difference(cp, rp) == -1);
    CHECK(hostcheck::first_bit_difference(cs1, rs1) == -1);
    if (two) CHECK(hostcheck::first_bit_difference(cs2, rs2) == -1);
    CHECK(hostcheck::bits_of(cunorm) == hostcheck::bits_of(runorm));
}

// ---- 8-bit: optim8_blockwise.cu's warp procedure ----------------------------------------------------

template <class T, Kind K>
void cuda_run8(const Hyper& h, T* p, const T* g, uint8_t* s1, uint8_t* s2, const float* q1, const float* q2,
               float* a1, float* a2, int64_t n) {
    using Lane = kbit::cuda::Block8Lane<T, K>;
    const Consts c = kbit::optim::make_consts(h);
    float node1[128], node2[128];
    kbit::code8_build_nodes(q1, node1);
    if (Lane::kTwo) kbit::code8_build_nodes(q2, node2);
    const int64_t blocks = (n + kbit::optim::kBlock - 1) / kbit::optim::kBlock;
    uint8_t* m2 = s1 + n;
    for (int64_t b = 0; b < blocks; ++b) {
        std::vector<Lane> w(32);
        float new1 = -FLT_MAX, new2 = -FLT_MAX, new3 = -FLT_MAX;  // combined over lanes
        const float old1 = a1[b], old2 = Lane::kTwo ? a2[b] : 0.0f, old3 = Lane::kMix ? a1[blocks + b] : 0.0f;
        for (int lane = 0; lane < 32; ++lane) {
            const int64_t i0 = b * kbit::optim::kBlock + lane * Lane::kElems;
            float l1 = -FLT_MAX, l2 = -FLT_MAX, l3 = -FLT_MAX;
            w[lane].load(g, p, s1, s2, m2, i0, n);
            w[lane].update(c, q1, q2, old1, old2, old3, l1, l2, l3);
            new1 = kbit::cuda::absmax_combine(new1, l1);
            new2 = kbit::cuda::absmax_combine(new2, l2);
            new3 = kbit::cuda::absmax_combine(new3, l3);
        }
        a1[b] = new1;
        if (Lane::kTwo) a2[b] = new2;
        if (Lane::kMix) a1[blocks + b] = new3;
        for (int lane = 0; lane < 32; ++lane) {
            const int64_t i0 = b * kbit::optim::kBlock + lane * Lane::kElems;
            T po[Lane::kElems];
            w[lane].finish(c, q1, node1, q2, node2, new1, new2, new3, po);
            for (int j = 0; j < Lane::kElems && i0 + j < n; ++j) {
                p[i0 + j] = po[j];
                s1[i0 + j] = w[lane].c1[j];
                if (Lane::kTwo) s2[i0 + j] = w[lane].c2[j];
                if (Lane::kMix) m2[i0 + j] = w[lane].c3[j];
            }
        }
    }
}

struct Tables {
    const char* label;
    std::vector<float> q1, q2;
};

std::vector<Tables> tables() {
    std::vector<Tables> t;
    t.push_back({"dynamic maps", hostcheck::dynamic_map(true), hostcheck::dynamic_map(false)});
    auto crowd = hostcheck::dynamic_map(true);
    for (int i = 200; i < 240; ++i) crowd[i] = std::nextafter(crowd[199], 2.0f) + static_cast<float>(i - 200) * 1e-7f;
    std::sort(crowd.begin(), crowd.end());
    auto inf_top = hostcheck::dynamic_map(false);
    inf_top[255] = kInf;
    t.push_back({"crowded signed map, unsigned map ending in +inf", crowd, inf_top});
    return t;
}

template <class T, Kind K>
void check8(int64_t n, const Config& cfg, const Tables& tb, bool fresh) {
    INFO(kbit::Elem<T>::name << " kind " << static_cast<int>(K) << " n " << n << " " << cfg.label << ", " << tb.label
                             << (fresh ? ", zero state" : ", random state"));
    const bool two = kbit::optim::two_state(K);
    const int64_t blocks = (n + 255) / 256;
    const size_t codes1 = static_cast<size_t>(K == Kind::AdEMAMix ? 2 * n : n);
    const size_t scales1 = static_cast<size_t>(K == Kind::AdEMAMix ? 2 * blocks : blocks);
    auto gv = optim_gradients(static_cast<size_t>(n), static_cast<uint32_t>(n) + 7, cfg);
    if (n > 600) std::fill(gv.begin() + 256, gv.begin() + 512, 0.0f);  // an all-zero gradient block
    const auto g = hostcheck::to_elems<T>(gv);
    const auto p0 = hostcheck::to_elems<T>(hostcheck::normal(static_cast<size_t>(n), 8, 0.1f));
    std::vector<uint8_t> c1(codes1, 0), c2(static_cast<size_t>(n), 0);
    std::vector<float> a1(scales1, 0.0f), a2(static_cast<size_t>(blocks), 0.0f);
    if (!fresh) {
        std::mt19937 rng(11);
        for (auto& x : c1) x = static_cast<uint8_t>(rng());
        for (auto& x : c2) x = static_cast<uint8_t>(rng());
        a1 = hostcheck::normal(scales1, 12, 0.02f);
        a2 = hostcheck::normal(static_cast<size_t>(blocks), 13, 1e-4f);
        for (auto& x : a1) x = std::fabs(x);
        for (auto& x : a2) x = std::fabs(x);
        if (blocks > 2) a1[1] = a2[1] = 0.0f;  // an all-zero state block
    }
    const Hyper h = hyper(K, cfg.step, cfg.wd, cfg.skip_zeros, cfg.gnorm_scale);
    auto rp = p0, cp = p0;
    auto rc1 = c1, cc1 = c1, rc2 = c2, cc2 = c2;
    auto ra1 = a1, ca1 = a1, ra2 = a2, ca2 = a2;
    const kbit::ref::Mem8 mem{rp.data(), g.data(), rc1.data(), two ? rc2.data() : nullptr, tb.q1.data(),
                              two ? tb.q2.data() : nullptr, ra1.data(), two ? ra2.data() : nullptr, n};
    kbit::ref::optim8_step(kbit::Elem<T>::dtype, K, h, mem);
    cuda_run8<T, K>(h, cp.data(), g.data(), cc1.data(), two ? cc2.data() : nullptr, tb.q1.data(),
                    two ? tb.q2.data() : nullptr, ca1.data(), two ? ca2.data() : nullptr, n);
    CHECK(hostcheck::first_bit_difference(cp, rp) == -1);
    CHECK(hostcheck::first_bit_difference(cc1, rc1) == -1);
    CHECK(hostcheck::first_bit_difference(ca1, ra1) == -1);
    if (two) {
        CHECK(hostcheck::first_bit_difference(cc2, rc2) == -1);
        CHECK(hostcheck::first_bit_difference(ca2, ra2) == -1);
    }
}

template <class T, Kind K>
void check_kind() {
    for (const Config& cfg : kOptimConfigs) {
        for (int64_t n : {int64_t{1}, int64_t{200}, int64_t{4096}, int64_t{3 * 4096 + 5}})
            check32<T, K>(n, cfg);
        for (const Tables& tb : tables())
            for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{3 * 256 + 17}})
                for (bool fresh : {true, false}) check8<T, K>(n, cfg, tb, fresh);
    }
}

template <class T>
void check_all_kinds() {
    check_kind<T, Kind::Adam>();
    check_kind<T, Kind::Momentum>();
    check_kind<T, Kind::RMSprop>();
    check_kind<T, Kind::Lion>();
    check_kind<T, Kind::Adagrad>();
    check_kind<T, Kind::AdEMAMix>();
}

}  // namespace

TEST_CASE("optim (CUDA): tree levels into a second buffer equal optim::tree_sum", "[cuda][optim]") {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1e3f, 1e3f);
    for (int64_t count = 1; count <= 2100; count += (count < 70 ? 1 : 97)) {
        std::vector<float> s(static_cast<size_t>(count));
        for (auto& x : s) x = u(rng) * (rng() % 3 == 0 ? 1e-6f : 1.0f);
        auto in_place = s;
        const float want = kbit::optim::tree_sum(in_place.data(), count);
        INFO("count " << count);
        CHECK(hostcheck::bits_of(tree_by_levels(s)) == hostcheck::bits_of(want));
    }
}

TEST_CASE("optim (CUDA): quantize8 on the breadth-first table copy equals optim::quantize8", "[cuda][optim]") {
    for (const Tables& tb : tables()) {
        for (bool is_signed : {true, false}) {
            const auto& q = is_signed ? tb.q1 : tb.q2;
            float node[128];
            kbit::code8_build_nodes(q.data(), node);
            long bad = 0;
            for (float absmax : {1.0f, 0.37f, 0.0f, kInf, -FLT_MAX, kNaN, 1e-40f, 3e38f})
                for (float s : hostcheck::probe_floats(3000, 9))
                    bad += kbit::cuda::quantize8_bfs(q.data(), node, s, absmax, is_signed) !=
                           kbit::optim::quantize8(q.data(), s, absmax, is_signed);
            INFO(tb.label << (is_signed ? ", signed" : ", unsigned"));
            CHECK(bad == 0);
        }
    }
}

TEMPLATE_TEST_CASE("optim (CUDA decomposition): 32-bit and 8-bit steps equal kbit::ref bit for bit", "[cuda][optim]",
                   float, kbit_half, kbit_bf16) {
    check_all_kinds<TestType>();
}
