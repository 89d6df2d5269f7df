// Host check of the blockwise quantizers' work split (src/cuda/blockwise_kernel.cuh): threads of 8
// elements, per-thread absmax folds from -FLT_MAX with elements past n read as 0, the max over the
// blocksize / 8 threads of a block, then x * (1 / absmax) coded by the format rule. Replayed here
// thread by thread and compared with kbit::ref's 4-bit and 8-bit quantizers byte for byte, so the
// argument that this split equals the shared absmax_start/absmax_fold rule (all-NaN full blocks
// -FLT_MAX, all-NaN partial last blocks 0) is checked for every blocksize.
#include <catch2/catch.hpp>

#include "code8_search.h"
#include "host_util.h"
#include "kbit_formats.h"
#include "ref_4bit.h"
#include "ref_8bit.h"

namespace {

using hostcheck::kInf;
using hostcheck::kNaN;

constexpr int kThreads = 256, kVec = 8;  // blockwise_kernel.cuh: kQuantThreads, kQuantVec

struct Split {
    std::vector<float> absmax;
};

// The kernel's absmax for each block, computed the way its threads do.
template <class T>
Split kernel_absmax(const std::vector<T>& A, int64_t blocksize) {
    const int64_t n = static_cast<int64_t>(A.size());
    const int64_t group = std::min<int64_t>(blocksize / kVec, kThreads);
    const int64_t chunks = blocksize > kThreads * kVec ? blocksize / (kThreads * kVec) : 1;
    const int64_t tile = int64_t{kThreads} * kVec * chunks;
    Split s;
    s.absmax.assign(static_cast<size_t>((n + blocksize - 1) / blocksize), std::nanf("unwritten"));
    for (int64_t t = 0; t * tile < n; ++t) {
        std::vector<float> thread_max(kThreads, -FLT_MAX);
        for (int th = 0; th < kThreads; ++th)
            for (int64_t c = 0; c < chunks; ++c) {
                const int64_t i0 = t * tile + (c * kThreads + th) * kVec;
                for (int e = 0; e < kVec; ++e) {
                    const float v = i0 + e < n ? kbit::Elem<T>::load(A[i0 + e]) : 0.0f;
                    thread_max[th] = kbit::absmax_fold(thread_max[th], v);
                }
            }
        for (int th = 0; th < kThreads; th += static_cast<int>(group)) {
            float m = thread_max[th];
            for (int k = 1; k < group; ++k) m = std::fmax(m, thread_max[th + k]);  // the shuffles' fmaxf
            const int64_t i0 = t * tile + int64_t{th} * kVec;
            if (i0 < n) s.absmax[static_cast<size_t>(i0 / blocksize)] = m;
        }
    }
    return s;
}

// Inputs with every special block kind at several blocksizes: NaN inside, all NaN, zero, Inf, huge,
// subnormal, and a partial last block of NaN (n not a multiple of the blocksize).
std::vector<float> inputs(int64_t blocksize, int64_t full_blocks, int64_t tail) {
    auto v = hostcheck::normal(static_cast<size_t>(full_blocks * blocksize + tail), 17, 1.0f);
    for (int64_t b = 0; b < full_blocks; ++b) {
        float* x = v.data() + b * blocksize;
        switch (b % 7) {
            case 1: x[blocksize / 3] = kNaN; break;
            case 2: std::fill(x, x + blocksize, kNaN); break;
            case 3: std::fill(x, x + blocksize, 0.0f); break;
            case 4: x[0] = -kInf; break;
            case 5: for (int64_t i = 0; i < blocksize; ++i) x[i] *= 1e-39f; break;
            case 6: x[1] = 3e38f; break;
            default: break;
        }
    }
    for (int64_t i = full_blocks * blocksize; i < full_blocks * blocksize + tail; ++i) v[i] = kNaN;
    return v;
}

}  // namespace

TEMPLATE_TEST_CASE("blockwise quantizers (CUDA split): absmax and codes equal kbit::ref for every blocksize",
                   "[cuda][blockwise]", float, kbit_half, kbit_bf16) {
    using T = TestType;
    const auto code = hostcheck::dynamic_map(true);
    float node[128];
    kbit::code8_build_nodes(code.data(), node);
    for (int64_t bs = 32; bs <= 4096; bs *= 2) {
        for (int64_t tail : {int64_t{0}, int64_t{3}, bs / 2 + 1}) {
            const int64_t full = std::max<int64_t>(8, 2 * kThreads * kVec / bs + 2);
            INFO(kbit::Elem<T>::name << " blocksize " << bs << " full blocks " << full << " tail " << tail);
            const auto A = hostcheck::to_elems<T>(inputs(bs, full, tail));
            const int64_t n = static_cast<int64_t>(A.size()), blocks = (n + bs - 1) / bs;
            const Split s = kernel_absmax(A, bs);

            std::vector<float> absmax8(blocks);
            std::vector<uint8_t> q8(n);
            kbit::ref::quantize_blockwise_8bit(code.data(), A.data(), absmax8.data(), q8.data(), bs, n);
            REQUIRE(hostcheck::first_bit_difference(s.absmax, absmax8) == -1);
            if (tail > 0) CHECK(s.absmax.back() == 0.0f);  // all-NaN partial block
            std::vector<uint8_t> got8(n);
            for (int64_t i = 0; i < n; ++i) {  // Coder8: code8_index_bfs(x * (1 / absmax))
                const float r = 1.0f / s.absmax[i / bs];
                got8[i] = kbit::code8_index_bfs(node, code.data(), kbit::Elem<T>::load(A[i]) * r);
            }
            CHECK(hostcheck::first_bit_difference(got8, q8) == -1);

            for (kbit::QuantType q : {kbit::QuantType::NF4, kbit::QuantType::FP4}) {
                std::vector<float> absmax4(blocks);
                std::vector<uint8_t> q4((n + 1) / 2);
                kbit::ref::quantize_4bit(q, A.data(), absmax4.data(), q4.data(), bs, n);
                CHECK(hostcheck::first_bit_difference(s.absmax, absmax4) == -1);
                std::vector<uint8_t> got4((n + 1) / 2);
                for (int64_t i = 0; i < n; i += 2) {  // Coder4: pairs, the odd tail padded with 0
                    const float r = 1.0f / s.absmax[i / bs];
                    const float y0 = kbit::Elem<T>::load(A[i]) * r;
                    const float y1 = (i + 1 < n ? kbit::Elem<T>::load(A[i + 1]) : 0.0f) * r;
                    got4[i / 2] = kbit::pack_nibbles(kbit::ref::index_4bit(q, y0), kbit::ref::index_4bit(q, y1));
                }
                CHECK(hostcheck::first_bit_difference(got4, q4) == -1);
            }
        }
    }
}
