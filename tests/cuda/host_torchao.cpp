// Host checks of the CUDA torchao NF4 path (src/cuda/torchao_math.h, torchao_nf4.cu): each per-block
// and per-element function the kernels run, and the kernels' composition with the host scaler stage,
// against the reference kbit::ref::torchao_* byte for byte, for fp32, fp16 and bf16, with NaN, Inf,
// zero blocks and subnormals.
#include <catch2/catch.hpp>

#include "host_util.h"
#include "ref_4bit.h"
#include "torchao_math.h"

namespace {

using hostcheck::kInf;
using hostcheck::kNaN;

// The CUDA kernels' table: torchao's literals as double -> fp32 -> T, as fp32.
template <class T>
std::vector<float> cuda_table() {
    const double values[16] = {KBIT_TORCHAO_NF4_VALUES};
    std::vector<float> t(16);
    for (int j = 0; j < 16; ++j) t[j] = kbit::round_to<T>(static_cast<float>(values[j]));
    return t;
}

// Weights with special blocks (block_size 64): NaN inside, all zero, +-Inf, subnormal, -0.0.
template <class T>
std::vector<T> weights(int64_t blocks, uint32_t seed) {
    auto v = hostcheck::normal(static_cast<size_t>(blocks * 64), seed, 0.05f);
    for (int64_t b = 0; b < blocks; ++b) {
        float* x = v.data() + b * 64;
        switch (b % 9) {
            case 1: x[5] = kNaN; break;
            case 2: std::fill(x, x + 64, 0.0f); break;
            case 3: x[0] = kInf; break;
            case 4: x[63] = -kInf; break;
            case 5: for (int i = 0; i < 64; ++i) x[i] *= 1e-38f; break;
            case 6: std::fill(x, x + 64, -0.0f); x[7] = kNaN; break;
            default: break;
        }
    }
    return hostcheck::to_elems<T>(v);
}

template <class T>
void check_quantize(int64_t blocks, int64_t scaler_block_size) {
    INFO(kbit::Elem<T>::name << " blocks " << blocks << " scaler_block_size " << scaler_block_size);
    const int64_t bs = 64, n = blocks * bs, groups = blocks / scaler_block_size;
    const auto w = weights<T>(blocks, static_cast<uint32_t>(blocks));
    // Reference.
    std::vector<uint8_t> rd(n / 2);
    std::vector<int8_t> rq(blocks);
    std::vector<T> rf(groups), rm(1);
    kbit::ref::torchao_quantize(w.data(), rd.data(), rq.data(), rf.data(), rm.data(), n, bs, scaler_block_size);
    // The CUDA decomposition: per-block scalers (block_scaler_kernel), the host scaler stage
    // (torchao_nf4.cu calls ref::torchao_scalers), the per-byte indices (nf4_index_kernel).
    std::vector<T> scalers(blocks);
    for (int64_t b = 0; b < blocks; ++b) scalers[b] = kbit::torchao_block_scaler(w.data() + b * bs, bs);
    std::vector<T> ref_scalers(blocks);
    kbit::ref::torchao_block_absmax(w.data(), ref_scalers.data(), 0, blocks, bs);
    REQUIRE(hostcheck::first_bit_difference(scalers, ref_scalers) == -1);
    std::vector<int8_t> q(blocks);
    std::vector<T> f(groups), m(1);
    kbit::ref::torchao_scalers(scalers.data(), q.data(), f.data(), m.data(), blocks, scaler_block_size);
    const auto table = cuda_table<T>();
    std::vector<uint8_t> d(n / 2);
    for (int64_t j = 0; j < n / 2; ++j) {
        const float s = kbit::Elem<T>::load(scalers[2 * j / bs]);
        const uint8_t hi = kbit::torchao_element_index<T>(kbit::Elem<T>::load(w[2 * j]), s, table.data());
        const uint8_t lo = kbit::torchao_element_index<T>(kbit::Elem<T>::load(w[2 * j + 1]), s, table.data());
        d[j] = kbit::pack_nibbles(hi, lo);
    }
    CHECK(hostcheck::first_bit_difference(d, rd) == -1);
    CHECK(hostcheck::first_bit_difference(q, rq) == -1);
    CHECK(hostcheck::first_bit_difference(f, rf) == -1);
    CHECK(hostcheck::first_bit_difference(m, rm) == -1);
}

template <class T>
void check_dequantize(int64_t blocks, int64_t scaler_block_size) {
    INFO(kbit::Elem<T>::name << " blocks " << blocks << " scaler_block_size " << scaler_block_size);
    const int64_t bs = 64, n = blocks * bs, groups = blocks / scaler_block_size;
    std::mt19937 rng(static_cast<uint32_t>(blocks));
    std::vector<uint8_t> data(n / 2);
    for (auto& x : data) x = static_cast<uint8_t>(rng());
    std::vector<int8_t> q(blocks);
    for (auto& x : q) x = static_cast<int8_t>(rng());
    q[0] = -128, q[1] = 127, q[2] = 0;
    std::vector<float> ff = hostcheck::normal(groups, 9, 500.0f);
    const float specials[] = {0.0f, -0.0f, kInf, kNaN, 1e-40f};
    for (int64_t g = 0; g < groups && g < 5; ++g) ff[g] = specials[g];
    const auto f = hostcheck::to_elems<T>(ff);
    for (float mean : {0.0123f, -0.5f, kNaN}) {
        INFO("mean " << mean);
        const std::vector<T> m = hostcheck::to_elems<T>({mean});
        std::vector<T> want(n), got(n);
        kbit::ref::torchao_dequantize(data.data(), q.data(), f.data(), m.data(), want.data(), n, bs, scaler_block_size);
        const auto table = cuda_table<T>();
        const float mf = kbit::Elem<T>::load(m[0]);
        for (int64_t j = 0; j < n / 2; ++j) {  // torchao_dequantize_kernel, one thread per byte
            const int64_t b = 2 * j / bs;
            const float s = kbit::torchao_restored_scaler<T>(q[b], kbit::Elem<T>::load(f[b / scaler_block_size]), mf);
            got[2 * j] = kbit::torchao_dequantize_element<T>(table[data[j] >> 4], s);
            got[2 * j + 1] = kbit::torchao_dequantize_element<T>(table[data[j] & 0xF], s);
        }
        CHECK(hostcheck::first_bit_difference(got, want) == -1);
    }
}

}  // namespace

TEMPLATE_TEST_CASE("torchao (CUDA decomposition): table equals the reference's", "[cuda][torchao]", float, kbit_half,
                   kbit_bf16) {
    const auto table = cuda_table<TestType>();
    const TestType* want = kbit::ref::torchao_nf4_table<TestType>();
    for (int j = 0; j < 16; ++j) CHECK(hostcheck::bits_of(kbit::Elem<TestType>::store(table[j])) == hostcheck::bits_of(want[j]));
}

TEMPLATE_TEST_CASE("torchao (CUDA decomposition): quantize equals ref::torchao_quantize byte for byte, block_size 64",
                   "[cuda][torchao]", float, kbit_half, kbit_bf16) {
    for (auto [blocks, sbs] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {256, 256}, {1024, 64}, {4096 + 256, 256}})
        check_quantize<TestType>(blocks, sbs);
}

TEMPLATE_TEST_CASE("torchao (CUDA decomposition): dequantize equals ref::torchao_dequantize byte for byte",
                   "[cuda][torchao]", float, kbit_half, kbit_bf16) {
    for (auto [blocks, sbs] : {std::pair<int64_t, int64_t>{5, 1}, {256, 64}, {1000, 8}})
        check_dequantize<TestType>(blocks, sbs);
}

TEMPLATE_TEST_CASE("torchao (CUDA decomposition): element index equals the reference on probe values",
                   "[cuda][torchao]", float, kbit_half, kbit_bf16) {
    using T = TestType;
    // Two-element blocks: ref::torchao_quantize_elements packs (w, w) with scaler s.
    const auto table = cuda_table<T>();
    long bad = 0, checked = 0;
    const auto values = hostcheck::probe_floats(2000, 5);
    for (float sv : {1.0f, 0.37f, 0.0f, -0.0f, kInf, kNaN, 1e-38f, 65504.0f}) {
        const T s = kbit::Elem<T>::store(sv);
        for (float wv : values) {
            const T w[2] = {kbit::Elem<T>::store(wv), kbit::Elem<T>::store(-wv)};
            uint8_t want = 0;
            kbit::ref::torchao_quantize_elements(w, &s, &want, 0, 1, 2);
            const float sf = kbit::Elem<T>::load(s);
            const uint8_t got = kbit::pack_nibbles(kbit::torchao_element_index<T>(kbit::Elem<T>::load(w[0]), sf, table.data()),
                                                   kbit::torchao_element_index<T>(kbit::Elem<T>::load(w[1]), sf, table.data()));
            bad += got != want;
            ++checked;
        }
    }
    CHECK(bad == 0);
    CHECK(checked > 40000);
}
