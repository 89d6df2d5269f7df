// selftest_util.h — device buffers, data generators and tolerance helpers of the CUDA self-test.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kbit/kbit.h"
#include "elem_vectors.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"

namespace st {

inline void cuda_ok(cudaError_t e, const char* what) {
    INFO(what << ": " << cudaGetErrorString(e));
    REQUIRE(e == cudaSuccess);
}

inline void kbit_ok(kbit_status s, const char* what) {
    INFO(what << ": " << kbit_status_string(s) << ": " << kbit_last_error_message());
    REQUIRE(s == KBIT_STATUS_SUCCESS);
}

// n elements of T in device memory, optionally `offset` elements past a 256-byte aligned start
// (offset 1 breaks 16-byte alignment and exercises the scalar paths).
template <class T>
class Buf {
public:
    explicit Buf(size_t n, size_t offset = 0) : n_(n), offset_(offset) {
        cuda_ok(cudaMalloc(&base_, (n + offset + 1) * sizeof(T)), "cudaMalloc");
        cuda_ok(cudaMemset(base_, 0xA5, (n + offset + 1) * sizeof(T)), "cudaMemset");
    }
    Buf(const std::vector<T>& host, size_t offset = 0) : Buf(host.size(), offset) { upload(host); }
    ~Buf() { cudaFree(base_); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    T* get() const { return reinterpret_cast<T*>(static_cast<char*>(base_) + offset_ * sizeof(T)); }
    void upload(const std::vector<T>& h) { cuda_ok(cudaMemcpy(get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload"); }
    std::vector<T> download() const {
        std::vector<T> h(n_);
        cuda_ok(cudaDeviceSynchronize(), "synchronize");
        cuda_ok(cudaMemcpy(h.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
        return h;
    }

private:
    void* base_ = nullptr;
    size_t n_, offset_;
};

// Weight-like values with some specials: zero runs (zero blocks), signed zeros, subnormals, huge.
inline std::vector<float> weights(size_t n, uint32_t seed, bool specials = true) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    if (specials && n > 300) {
        for (size_t i = 64; i < 128 && i < n; ++i) v[i] = 0.0f;  // a zero block for blocksizes <= 64
        v[1] = -0.0f;
        v[2] = 1e-40f;
        v[3] = -3e-39f;
        v[5] = 6.0e4f;
        v[n / 2] = -7.5f;
    }
    return v;
}

// Shared with the conformance suite (tests/common, src/common).
using kbit::dynamic_map;
using kbit_test::bits_of;
using kbit_test::first_bit_difference;
using kbit_test::to_elems;

// Relative precision of T (for output rounding in tolerances).
template <class T> constexpr double eps_of() { return sizeof(T) == 4 ? 0x1p-24 : (std::is_same<T, kbit_half>::value ? 0x1p-11 : 0x1p-8); }

}  // namespace st
