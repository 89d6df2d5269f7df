// kbit_grouped_device.h — kbit_gemm_4bit_grouped for a device backend, composed of the backend's own
// operations (kbit::ops::memcpy, device_malloc, device_free, stream_synchronize and gemm_4bit), so that it
// equals the loop of cgemm_4bit calls over the experts on that backend by construction (behaviour §3.5).
// A first, correct version: the ids are read to the host, each chosen expert's rows are gathered row by
// row into a scratch buffer and multiplied by the expert's slice in one gemm_4bit, and the rows are copied
// back; the combine and experts without a slice (whose blocks straddle the previous expert) are computed on
// the host. The call returns when its work is done (it synchronizes the default stream and `stream`).
// Faster device paths (a gather kernel, the combine on the device, one launch for all experts) replace
// parts of it without changing any byte.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kbit_half.h"
#include "kbit_ops_4bit.h"
#include "kbit_ops_core.h"
#include "kbit_validate_4bit.h"

namespace kbit::grouped_device {

// A device allocation released on scope exit.
class Scratch {
public:
    explicit Scratch(const char* fn) : fn_(fn) {}
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() {
        if (ptr_ != nullptr) ops::device_free(fn_, ptr_);
    }
    kbit_status reserve(size_t bytes) {
        if (bytes <= bytes_) return KBIT_STATUS_SUCCESS;
        if (ptr_ != nullptr) ops::device_free(fn_, ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
        const kbit_status s = ops::device_malloc(fn_, &ptr_, bytes);
        if (s == KBIT_STATUS_SUCCESS) bytes_ = bytes;
        return s;
    }
    template <class T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }

private:
    const char* fn_;
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

#define KBIT_GROUPED_TRY(expr)                                  \
    do {                                                        \
        const kbit_status kbit_grouped_s_ = (expr);             \
        if (kbit_grouped_s_ != KBIT_STATUS_SUCCESS) return kbit_grouped_s_; \
    } while (0)

inline kbit_status sync(const char* fn, void* stream) {
    KBIT_GROUPED_TRY(ops::stream_synchronize(fn, nullptr));
    return stream != nullptr ? ops::stream_synchronize(fn, stream) : KBIT_STATUS_SUCCESS;
}

inline kbit_status to_host(const char* fn, void* dst, const void* src, int64_t bytes) {
    return bytes > 0 ? ops::memcpy(fn, dst, src, static_cast<size_t>(bytes), KBIT_MEMCPY_DEVICE_TO_HOST)
                     : KBIT_STATUS_SUCCESS;
}

// Rows of an expert without a slice, on the host: the expert's weights and their scales are copied from
// the first block they touch (nested: the first group of 256 blocks) and summed per block run in the
// reference order of behaviour §3.3 (class F there).
template <class T>
kbit_status rows_without_slice(const char* fn, const std::vector<T>& x, int64_t m, const uint8_t* B,
                               const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                               const float* absmax_offset, int64_t first, int64_t N, int64_t K, int64_t blocksize,
                               QuantType qt, std::vector<T>* y) {
    const bool nested = absmax_8bit != nullptr;
    const int64_t unit = nested ? 256 * blocksize : blocksize;
    const int64_t w0 = first / unit * unit, w1 = first + N * K;  // window [w0, w1) of nibbles, w0 even
    const int64_t b0 = w0 / blocksize, b1 = (w1 + blocksize - 1) / blocksize;
    std::vector<uint8_t> w(static_cast<size_t>((w1 - w0 + 1) / 2));
    KBIT_GROUPED_TRY(to_host(fn, w.data(), B + w0 / 2, static_cast<int64_t>(w.size())));
    std::vector<float> scale(static_cast<size_t>(b1 - b0));
    if (!nested) {
        KBIT_GROUPED_TRY(to_host(fn, scale.data(), absmax + b0, (b1 - b0) * 4));
    } else {
        std::vector<uint8_t> q(scale.size());
        const int64_t g0 = b0 / 256, g1 = (b1 + 255) / 256;
        std::vector<float> second(static_cast<size_t>(g1 - g0)), code(256), offset(1);
        KBIT_GROUPED_TRY(to_host(fn, q.data(), absmax_8bit + b0, b1 - b0));
        KBIT_GROUPED_TRY(to_host(fn, second.data(), absmax + g0, (g1 - g0) * 4));
        KBIT_GROUPED_TRY(to_host(fn, code.data(), absmax_code, 256 * 4));
        KBIT_GROUPED_TRY(to_host(fn, offset.data(), absmax_offset, 4));
        for (int64_t b = b0; b < b1; ++b) {
            const float product = code[q[b - b0]] * second[b / 256 - g0];
            scale[b - b0] = product + offset[0];
        }
    }
    const float* lut = qt == QuantType::FP4 ? kFp4Values : kNf4Values;
    y->assign(static_cast<size_t>(m * N), T{});
    for (int64_t i = 0; i < m; ++i)
        for (int64_t n = 0; n < N; ++n) {
            const int64_t base = first + n * K;  // nibble of W_e[n][0]
            float total = 0.0f;
            for (int64_t k = 0; k < K;) {
                const int64_t beta = (base + k) / blocksize, end = std::min(K, (beta + 1) * blocksize - base);
                float partial = 0.0f;
                for (; k < end; ++k) {
                    const float product = Elem<T>::load(x[i * K + k]) * lut[nibble_at(w.data(), base + k - w0)];
                    partial += product;
                }
                const float scaled = partial * scale[beta - b0];
                total += scaled;
            }
            (*y)[i * N + n] = Elem<T>::store(total);
        }
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status gemm_4bit_grouped(const char* fn, const T* A, int64_t a_rows_per_token, const uint8_t* B,
                              const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                              const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize,
                              QuantType qt, const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine,
                              T* out, void* stream) {
    const int64_t pairs = tokens * top_k;
    const auto elem = static_cast<int64_t>(sizeof(T));
    KBIT_GROUPED_TRY(sync(fn, stream));  // the inputs were written on `stream`
    std::vector<int32_t> id(static_cast<size_t>(pairs));
    KBIT_GROUPED_TRY(to_host(fn, id.data(), ids, pairs * 4));
    std::vector<int32_t> order;
    KBIT_GROUPED_TRY(grouped_pairs_by_expert(fn, id.data(), pairs, top_k, experts, &order));

    const bool nested = absmax_8bit != nullptr;
    std::vector<T> kept(combine != nullptr ? static_cast<size_t>(pairs * N) : 0);  // rows for the combine
    Scratch xs(fn), ys(fn);
    std::vector<T> xh, yh;
    for (int64_t r0 = 0; r0 < pairs;) {
        const int64_t e = id[order[r0]];
        int64_t r1 = r0 + 1;
        while (r1 < pairs && id[order[r1]] == e) ++r1;
        const int64_t m = r1 - r0, first = e * N * K;
        auto row_of = [&](int64_t i) {
            const int64_t p = order[r0 + i];
            return a_rows_per_token == 1 ? p / top_k : p;
        };
        const bool slice = grouped_expert_has_slice(e, N, K, blocksize, nested);
        if (slice) {
            KBIT_GROUPED_TRY(xs.reserve(static_cast<size_t>(std::max<int64_t>(1, m * K) * elem)));
            KBIT_GROUPED_TRY(ys.reserve(static_cast<size_t>(m * N * elem)));
            for (int64_t i = 0; i < m && K > 0; ++i)
                KBIT_GROUPED_TRY(ops::memcpy(fn, xs.as<T>() + i * K, A + row_of(i) * K, static_cast<size_t>(K * elem),
                                             KBIT_MEMCPY_DEVICE_TO_DEVICE));
            KBIT_GROUPED_TRY(sync(fn, stream));
            const int64_t beta = first / blocksize;
            KBIT_GROUPED_TRY(ops::gemm_4bit<T>(fn, xs.as<T>(), B + first / 2, nested ? absmax + beta / 256 : absmax + beta,
                                               nested ? absmax_8bit + beta : nullptr, absmax_code, absmax_offset,
                                               ys.as<T>(), nullptr, static_cast<int>(m), static_cast<int>(N),
                                               static_cast<int>(K), static_cast<int>(blocksize), qt, stream));
            KBIT_GROUPED_TRY(sync(fn, stream));
            for (int64_t i = 0; i < m; ++i) {
                const int64_t p = order[r0 + i];
                if (combine != nullptr)
                    KBIT_GROUPED_TRY(to_host(fn, kept.data() + p * N, ys.as<T>() + i * N, N * elem));
                else
                    KBIT_GROUPED_TRY(ops::memcpy(fn, out + p * N, ys.as<T>() + i * N, static_cast<size_t>(N * elem),
                                                 KBIT_MEMCPY_DEVICE_TO_DEVICE));
            }
        } else {
            xh.resize(static_cast<size_t>(m * K));
            for (int64_t i = 0; i < m; ++i) KBIT_GROUPED_TRY(to_host(fn, xh.data() + i * K, A + row_of(i) * K, K * elem));
            KBIT_GROUPED_TRY(rows_without_slice(fn, xh, m, B, absmax, absmax_8bit, absmax_code, absmax_offset, first,
                                                N, K, blocksize, qt, &yh));
            for (int64_t i = 0; i < m; ++i) {
                const int64_t p = order[r0 + i];
                if (combine != nullptr)
                    std::copy(yh.begin() + i * N, yh.begin() + (i + 1) * N, kept.begin() + p * N);
                else
                    KBIT_GROUPED_TRY(ops::memcpy(fn, out + p * N, yh.data() + i * N, static_cast<size_t>(N * elem),
                                                 KBIT_MEMCPY_HOST_TO_DEVICE));
            }
        }
        r0 = r1;
    }
    if (combine != nullptr) {
        std::vector<float> w(static_cast<size_t>(pairs));
        KBIT_GROUPED_TRY(to_host(fn, w.data(), combine, pairs * 4));
        std::vector<T> o(static_cast<size_t>(tokens * N));
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t n = 0; n < N; ++n) {
                float s = 0.0f;
                for (int64_t j = 0; j < top_k; ++j) {
                    const float product = w[t * top_k + j] * Elem<T>::load(kept[(t * top_k + j) * N + n]);
                    s = s + product;
                }
                o[t * N + n] = Elem<T>::store(s);
            }
        KBIT_GROUPED_TRY(ops::memcpy(fn, out, o.data(), static_cast<size_t>(tokens * N * elem),
                                     KBIT_MEMCPY_HOST_TO_DEVICE));
    }
    return sync(fn, stream);
}

#undef KBIT_GROUPED_TRY

}  // namespace kbit::grouped_device
