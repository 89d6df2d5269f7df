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

template <class T>
uint32_t bits_of(const T& x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof(T));
    return u;
}

// Index of the first element whose bits differ, or -1.
template <class T>
long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
    return -1;
}

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

template <class T>
std::vector<T> to_elems(const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kbit::Elem<T>::store(v[i]);
    return out;
}

// bitsandbytes' create_dynamic_map(signed), fp32 (as the conformance suite builds it).
inline std::vector<float> dynamic_map(bool is_signed) {
    std::vector<float> v;
    for (int d = 0; d <= 6; ++d) {
        const int f = is_signed ? (1 << d) + 1 : (1 << (d + 1)) + 1;
        const float h = (1.0f - 0.1f) / static_cast<float>(f - 1);
        std::vector<float> b(f);
        for (int i = 0; i < f; ++i)
            b[i] = i < f / 2 ? 0.1f + h * static_cast<float>(i) : 1.0f - h * static_cast<float>(f - 1 - i);
        const float s = static_cast<float>(std::pow(10.0, d - 6));
        for (int i = 0; i + 1 < f; ++i) {
            const float m = (b[i] + b[i + 1]) / 2.0f;
            v.push_back(s * m);
            if (is_signed) v.push_back(-(s * m));
        }
    }
    v.push_back(0.0f);
    v.push_back(1.0f);
    std::sort(v.begin(), v.end());
    return v;
}

// Relative precision of T (for output rounding in tolerances).
template <class T> constexpr double eps_of() { return sizeof(T) == 4 ? 0x1p-24 : (std::is_same<T, kbit_half>::value ? 0x1p-11 : 0x1p-8); }

}  // namespace st
