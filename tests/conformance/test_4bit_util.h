// test_4bit_util.h — typed access to the 4-bit functions of the backend under test and data shared
// by the 4-bit conformance tests.
#pragma once

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kbit_formats.h"
#include "kbit_half.h"
#include "ref_4bit.h"
#include "testutil.h"

namespace kbit_test {

using kbit::QuantType;

inline const std::vector<int64_t> kBlocksizes = {32, 64, 128, 256, 512, 1024, 2048, 4096};

inline const char* qt_name(QuantType q) { return q == QuantType::NF4 ? "nf4" : "fp4"; }

// Runs body(q, bs) for NF4 and FP4 at each of `blocksizes`, each in a section of its own named
// "<format> <T> blocksize <bs>".
template <class T, class Body>
void for_each_format(const std::vector<int64_t>& blocksizes, Body body) {
    for (QuantType q : {QuantType::NF4, QuantType::FP4})
        for (int64_t bs : blocksizes)
            DYNAMIC_SECTION(qt_name(q) << " " << kbit::Elem<T>::name << " blocksize " << bs) { body(q, bs); }
}

// Runs body(q, bs, n) for NF4 and FP4 at each of `blocksizes` and each n of sizes(bs), each in a
// section of its own named "<format> <T> blocksize <bs> n <n>".
template <class T, class Sizes, class Body>
void for_each_format_and_size(const std::vector<int64_t>& blocksizes, Sizes sizes, Body body) {
    for (QuantType q : {QuantType::NF4, QuantType::FP4})
        for (int64_t bs : blocksizes)
            for (int64_t n : sizes(bs))
                DYNAMIC_SECTION(qt_name(q) << " " << kbit::Elem<T>::name << " blocksize " << bs << " n " << n) {
                    body(q, bs, n);
                }
}

// The bitsandbytes-named 4-bit functions of one element type.
template <class T> struct Fns4;
#define KBIT_TEST_FNS4(T, dt)                                                                       \
    template <> struct Fns4<T> {                                                                    \
        static auto quantize(QuantType q) {                                                         \
            return q == QuantType::NF4 ? backend().fns_4bit.cquantize_blockwise_##dt##_nf4                \
                                       : backend().fns_4bit.cquantize_blockwise_##dt##_fp4;               \
        }                                                                                           \
        static auto dequantize(QuantType q) {                                                       \
            return q == QuantType::NF4 ? backend().fns_4bit.cdequantize_blockwise_##dt##_nf4              \
                                       : backend().fns_4bit.cdequantize_blockwise_##dt##_fp4;             \
        }                                                                                           \
        static auto gemv() { return backend().fns_4bit.cgemm_4bit_inference_naive_##dt; }                \
        static auto gemm() { return backend().fns_4bit.cgemm_4bit_##dt; }                                 \
        static auto torchao_quantize() { return backend().fns_4bit.kbit_quantize_nf4_torchao_##dt; }      \
        static auto torchao_dequantize() { return backend().fns_4bit.kbit_dequantize_nf4_torchao_##dt; }  \
    };
KBIT_TEST_FNS4(float, fp32)
KBIT_TEST_FNS4(kbit_half, fp16)
KBIT_TEST_FNS4(kbit_bf16, bf16)
#undef KBIT_TEST_FNS4

// Runs the backend's cquantize_blockwise_<T>_<q> on host data; returns its packed bytes and absmax.
template <class T>
void backend_quantize(QuantType q, const std::vector<T>& x, int64_t blocksize, std::vector<uint8_t>* packed,
                      std::vector<float>* absmax) {
    const int64_t n = static_cast<int64_t>(x.size());
    DeviceBuffer<T> dx(x);
    DeviceBuffer<float> da(static_cast<size_t>((n + blocksize - 1) / blocksize));
    DeviceBuffer<uint8_t> dq(static_cast<size_t>((n + 1) / 2));
    require_ok(Fns4<T>::quantize(q)(nullptr, dx.get(), da.get(), dq.get(), static_cast<int>(blocksize),
                                    static_cast<int>(n)),
               "quantize");
    *packed = dq.download();
    *absmax = da.download();
}

template <class T>
std::vector<T> backend_dequantize(QuantType q, const std::vector<uint8_t>& packed, const std::vector<float>& absmax,
                                  int64_t blocksize, int64_t n) {
    DeviceBuffer<uint8_t> dq(packed);
    DeviceBuffer<float> da(absmax);
    DeviceBuffer<T> out(static_cast<size_t>(n));
    require_ok(Fns4<T>::dequantize(q)(nullptr, dq.get(), da.get(), out.get(), static_cast<int>(blocksize),
                                      static_cast<int>(n), nullptr),
               "dequantize");
    return out.download();
}

// Weights-like data: normal values with a few large outliers and exact zeros, converted to T.
template <class T>
std::vector<T> weights(size_t n, uint32_t seed) {
    auto v = normal_floats(n, seed, 0.02f);
    std::mt19937 rng(seed ^ 0x9e3779b9u);
    for (size_t i = 0; i < n / 97; ++i) v[rng() % n] *= 40.0f;
    for (size_t i = 0; i < n / 89; ++i) v[rng() % n] = 0.0f;
    return to_elems<T>(v);
}

// Largest gap between adjacent entries of a format's sorted table (the round-trip bound is half of it).
inline float max_gap(QuantType q) {
    std::vector<float> t(kbit::ref::lut_4bit(q), kbit::ref::lut_4bit(q) + 16);
    std::sort(t.begin(), t.end());
    float g = 0.0f;
    for (int i = 0; i + 1 < 16; ++i) g = std::max(g, t[i + 1] - t[i]);
    return g;
}

// Unit roundoff of T (2^-24 fp32, 2^-11 fp16, 2^-8 bf16).
template <class T> constexpr double unit_roundoff() {
    if constexpr (std::is_same_v<T, float>) return 0x1.0p-24;
    else if constexpr (std::is_same_v<T, kbit_half>) return 0x1.0p-11;
    else return 0x1.0p-8;
}

// Smallest positive subnormal spacing of T (absolute error floor of one rounding to T).
template <class T> constexpr double tiny_step() {
    if constexpr (std::is_same_v<T, float>) return 0x1.0p-149;
    else if constexpr (std::is_same_v<T, kbit_half>) return 0x1.0p-24;
    else return 0x1.0p-133;
}

}  // namespace kbit_test
