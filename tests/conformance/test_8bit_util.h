// test_8bit_util.h — code tables, dtype dispatch and data generators shared by the 8-bit tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "testutil.h"

namespace kbit_test {

struct CodeTable {
    std::string name;
    std::vector<float> code;  // 256 entries
};

// bitsandbytes' create_linear_map(signed=True, total_bits=8, add_zero=True) with linspace rounded twice
// (torch's DEFAULT CPU kernels; an input table only): 255 values from -1 to 1, then 0.0 inserted after the first 127. The
// linspace middle point is exactly 0, so 0.0 appears twice (indices 127 and 128).
inline std::vector<float> linear_map_with_zero() {
    const int F = 255;
    const float h = (1.0f - -1.0f) / static_cast<float>(F - 1);
    std::vector<float> v;
    for (int i = 0; i < F; ++i) {
        if (i < F / 2) {
            const float step = h * static_cast<float>(i);
            v.push_back(-1.0f + step);
        } else {
            const float step = h * static_cast<float>(F - 1 - i);
            v.push_back(1.0f - step);
        }
    }
    v.insert(v.begin() + 127, 0.0f);
    return v;
}

// Sorted random table in [-scale, scale] with runs of duplicates.
inline std::vector<float> random_sorted_table(uint32_t seed, float scale, int duplicates) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(-scale, scale);
    std::vector<float> v(256);
    for (auto& x : v) x = uni(rng);
    std::sort(v.begin(), v.end());
    std::uniform_int_distribution<int> pos(1, 255);
    for (int d = 0; d < duplicates; ++d) {
        const int j = pos(rng);
        v[j] = v[j - 1];
    }
    std::sort(v.begin(), v.end());
    return v;
}

// Non-decreasing table with extreme entries: infinities, FLT_MAX (midpoint overflow), subnormals,
// both zeros, long duplicate runs and values beyond [-1, 1].
inline std::vector<float> extreme_table() {
    const float inf = std::numeric_limits<float>::infinity();
    const float big = std::numeric_limits<float>::max();
    const float tiny = std::numeric_limits<float>::denorm_min();
    std::vector<float> v = {-inf, -inf, -big, -big, -3.0f, -1.0f, -1.0f, -0.5f, -1e-30f, -4 * tiny, -tiny,
                            -0.0f, 0.0f, 0.0f, tiny, 2 * tiny, 3 * tiny, 1e-38f, 1e-20f, 0.25f, 0.25f, 0.25f};
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> uni(0.3f, 0.99f);
    while (v.size() < 250) v.push_back(uni(rng));
    for (float x : {1.0f, 1.0f, 2.0f, big, inf, inf}) v.push_back(x);
    std::sort(v.begin(), v.end(), [](float a, float b) { return a < b; });
    return v;
}

// The tables every blockwise test runs over (the last one is not sorted: the search is defined for
// any table and kbit reproduces it, although the header asks for a non-decreasing one).
inline const std::vector<CodeTable>& code_tables() {
    static const std::vector<CodeTable> tables = [] {
        std::vector<CodeTable> t;
        t.push_back({"dynamic-signed", dynamic_map(true)});
        t.push_back({"dynamic-unsigned", dynamic_map(false)});
        t.push_back({"linear-dup0", linear_map_with_zero()});
        t.push_back({"random-dups", random_sorted_table(5, 1.0f, 40)});
        t.push_back({"random-wide", random_sorted_table(6, 3.0f, 10)});
        t.push_back({"extreme", extreme_table()});
        std::vector<float> unsorted = random_sorted_table(7, 1.0f, 0);
        std::shuffle(unsorted.begin(), unsorted.end(), std::mt19937(8));
        t.push_back({"unsorted", unsorted});
        return t;
    }();
    return tables;
}

// Every float a table's search distinguishes: entries, fp32 midpoints of neighbours and their
// neighbouring floats, plus signed zeros, NaN and infinities.
inline std::vector<float> adversarial_values(const std::vector<float>& c) {
    std::vector<float> v = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1.0f, -1.0f};
    auto around = [&](float x) {
        if (std::isnan(x)) return;
        v.push_back(x);
        v.push_back(std::nextafter(x, -INFINITY));
        v.push_back(std::nextafter(x, INFINITY));
    };
    for (int j = 0; j < 256; ++j) around(c[j]);
    for (int j = 0; j < 255; ++j) around((c[j] + c[j + 1]) * 0.5f);
    return v;
}

// `count` consecutive floats on both sides of every midpoint (c[j] + c[j + 1]) * 0.5f of a table,
// below and above in turn.
inline std::vector<float> midpoint_neighbours(const std::vector<float>& c, int count) {
    std::vector<float> v;
    for (int j = 0; j < 255; ++j) {
        float lo = (c[j] + c[j + 1]) * 0.5f, hi = lo;
        if (std::isnan(lo)) continue;
        for (int s = 0; s < count; ++s) {
            lo = std::nextafter(lo, -INFINITY);
            hi = std::nextafter(hi, INFINITY);
            v.push_back(lo);
            v.push_back(hi);
        }
    }
    return v;
}

// Blocks whose first element is +-1 and all others within [-1, 1], so that absmax is 1 and the
// normalised value equals the element exactly: every adversarial value in [-1, 1] is probed as is.
inline std::vector<float> probe_blocks(const std::vector<float>& values, int64_t blocksize) {
    std::vector<float> in;
    const int64_t per_block = blocksize - 1;
    std::vector<float> usable;
    for (float x : values)
        if (!(std::fabs(x) > 1.0f)) usable.push_back(x);
    for (size_t i = 0; i < usable.size(); i += static_cast<size_t>(per_block)) {
        in.push_back((i / per_block) % 2 ? -1.0f : 1.0f);
        for (int64_t j = 0; j < per_block; ++j) {
            const size_t k = i + static_cast<size_t>(j);
            in.push_back(k < usable.size() ? usable[k] : 0.5f);
        }
    }
    return in;
}

// Inputs with every special block: normal data at several scales, zeros, -0.0, NaN, infinities,
// all-NaN blocks and subnormal blocks (absmax subnormal, so 1/absmax is infinite).
inline std::vector<float> special_input(int64_t n, int64_t blocksize, uint32_t seed) {
    std::vector<float> v = normal_floats(static_cast<size_t>(n), seed);
    std::mt19937 rng(seed + 1);
    const int64_t blocks = (n + blocksize - 1) / blocksize;
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t s = b * blocksize, e = std::min(n, s + blocksize);
        switch (b % 9) {
            case 1: for (int64_t i = s; i < e; ++i) v[i] = 0.0f; break;
            case 2: for (int64_t i = s; i < e; ++i) v[i] *= 1e-3f; v[s] = -0.0f; break;
            case 3: v[s + (e - s) / 2] = NAN; break;
            case 4: v[s] = INFINITY; if (e - s > 1) v[e - 1] = -INFINITY; break;
            case 5: for (int64_t i = s; i < e; ++i) v[i] = NAN; break;
            case 6: for (int64_t i = s; i < e; ++i) v[i] *= 1e-39f; break;  // subnormal
            case 7: for (int64_t i = s; i < e; ++i) v[i] *= 3e4f; break;
            case 8: for (int64_t i = s; i < e; ++i) v[i] = (i % 3 == 0) ? -0.0f : 0.0f; break;
            default: break;
        }
    }
    return v;
}

// Calls the backend's bitsandbytes-named 8-bit functions for an element type.
template <class T> struct Blockwise8;
template <> struct Blockwise8<float> {
    static kbit_status quantize(float* c, float* A, float* m, uint8_t* o, int B, int n) {
        return backend().fns_8bit.cquantize_blockwise_fp32(c, A, m, o, B, n);
    }
    static kbit_status dequantize(float* c, uint8_t* A, float* m, float* o, int B, int n) {
        return backend().fns_8bit.cdequantize_blockwise_fp32(c, A, m, o, B, n, nullptr);
    }
};
template <> struct Blockwise8<kbit_half> {
    static kbit_status quantize(float* c, kbit_half* A, float* m, uint8_t* o, int B, int n) {
        return backend().fns_8bit.cquantize_blockwise_fp16(c, A, m, o, B, n);
    }
    static kbit_status dequantize(float* c, uint8_t* A, float* m, kbit_half* o, int B, int n) {
        return backend().fns_8bit.cdequantize_blockwise_fp16(c, A, m, o, B, n, nullptr);
    }
};
template <> struct Blockwise8<kbit_bf16> {
    static kbit_status quantize(float* c, kbit_bf16* A, float* m, uint8_t* o, int B, int n) {
        return backend().fns_8bit.cquantize_blockwise_bf16(c, A, m, o, B, n);
    }
    static kbit_status dequantize(float* c, uint8_t* A, float* m, kbit_bf16* o, int B, int n) {
        return backend().fns_8bit.cdequantize_blockwise_bf16(c, A, m, o, B, n, nullptr);
    }
};

constexpr int64_t kBlocksizes8[] = {32, 64, 128, 256, 512, 1024, 2048, 4096};

// kbit_int8_outlier_matmul_fp16 through the backend: out (rows x outs fp16, out0 before the call) +=
// the outlier columns' products; returns out after the call.
inline std::vector<kbit_half> backend_outlier_matmul(const std::vector<kbit_half>& A, const std::vector<int8_t>& W,
                                                     const std::vector<float>& stats, const std::vector<uint8_t>& flags,
                                                     const std::vector<kbit_half>& out0, int64_t rows, int64_t outs,
                                                     int64_t ins) {
    DeviceBuffer<kbit_half> dA(A), dout(out0);
    DeviceBuffer<int8_t> dW(W);
    DeviceBuffer<float> dstats(stats);
    DeviceBuffer<uint8_t> dflags(flags);
    require_ok(backend().fns_8bit.kbit_int8_outlier_matmul_fp16(dA.get(), dW.get(), dstats.get(), dflags.get(),
                                                              dout.get(), rows, outs, ins, nullptr),
               "kbit_int8_outlier_matmul_fp16");
    return dout.download();
}

// The minor of the backend's 8-bit interface (8bit 1.1 takes the blockwise blocksizes 8192 and 16384).
inline int backend8bit_minor() { return static_cast<int>(KBIT_VERSION_MINOR_OF(backend().version[KBIT_INTERFACE_8BIT])); }

}  // namespace kbit_test
