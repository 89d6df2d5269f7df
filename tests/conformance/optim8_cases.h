// optim8_cases.h — every optimizer function of the backend under test behind one call signature per
// family (the dtype erased to void*), data generators for optimizer states, and control of the
// backend's OpenMP thread count.
#pragma once

#include <dlfcn.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kbit_optim_math.h"
#include "optim_hyper.h"
#include "testutil.h"

namespace kbit_test {

using kbit::optim::Hyper;
using kbit::optim::Kind;

inline const char* kind_name(Kind k) {
    switch (k) {
        case Kind::Adam: return "adam";
        case Kind::Momentum: return "momentum";
        case Kind::RMSprop: return "rmsprop";
        case Kind::Lion: return "lion";
        case Kind::Adagrad: return "adagrad";
        default: return "ademamix";
    }
}

inline const char* dtype_name(int32_t dtype) {
    return dtype == KBIT_DTYPE_FP16 ? "fp16" : dtype == KBIT_DTYPE_BF16 ? "bf16" : "fp32";
}
inline size_t dtype_size(int32_t dtype) { return dtype == KBIT_DTYPE_FP32 ? 4 : 2; }

struct Optim32Fn {
    std::string name;
    Kind kind;
    int32_t dtype;
    std::function<kbit_status(void* g, void* p, float* s1, float* s2, float* unorm, float max_unorm,
                              float param_norm, const Hyper& h, int n)>
        call;
};

struct Optim8Fn {
    std::string name;
    Kind kind;
    int32_t dtype;
    std::function<kbit_status(void* p, void* g, uint8_t* s1, uint8_t* s2, float* q1, float* q2, float* a1,
                              float* a2, const Hyper& h, int n)>
        call;
};

#define KBIT_TEST_O32(fn, T, k)                                                                               \
    Optim32Fn {                                                                                               \
        #fn, Kind::k, kbit::Elem<T>::dtype,                                                                   \
            [](void* g, void* p, float* s1, float* s2, float* unorm, float mu, float pn, const Hyper& h, int n) { \
                return backend().fns_optim8.fn(static_cast<T*>(g), static_cast<T*>(p), s1, s2, unorm, mu, pn, h.beta1,   \
                                       h.beta2, h.beta3, h.alpha, h.eps, h.weight_decay, h.step, h.lr,          \
                                       h.gnorm_scale, h.skip_zeros, n);                                        \
            }                                                                                                 \
    }

#define KBIT_TEST_O8(fn, T, k)                                                                                 \
    Optim8Fn {                                                                                                 \
        #fn, Kind::k, kbit::Elem<T>::dtype,                                                                    \
            [](void* p, void* g, uint8_t* s1, uint8_t* s2, float* q1, float* q2, float* a1, float* a2,           \
               const Hyper& h, int n) {                                                                        \
                return backend().fns_optim8.fn(static_cast<T*>(p), static_cast<T*>(g), s1, s2, h.beta1, h.beta2, h.beta3, \
                                       h.alpha, h.eps, h.step, h.lr, q1, q2, a1, a2, h.weight_decay,             \
                                       h.gnorm_scale, h.skip_zeros, n);                                         \
            }                                                                                                  \
    }

// Every optimizer kind, by the stem of its functions' names and the naming of its 32-bit functions:
// BNB, bitsandbytes' c<stem>32bit_grad_fp32 / _fp16 / _bf16; OLD, bitsandbytes' c<stem>32bit_grad_32 /
// _16 with kbit's kbit_<stem>32bit_grad_bf16. The 8-bit functions are c<stem>_8bit_blockwise_grad_<dt>.
#define KBIT_TEST_KINDS(X)          \
    X(adam, Adam, BNB)              \
    X(ademamix, AdEMAMix, BNB)      \
    X(lion, Lion, BNB)              \
    X(momentum, Momentum, OLD)      \
    X(rmsprop, RMSprop, OLD)        \
    X(adagrad, Adagrad, OLD)

#define KBIT_TEST_O32_BNB(stem, k)                                      \
    KBIT_TEST_O32(c##stem##32bit_grad_fp32, float, k),                 \
        KBIT_TEST_O32(c##stem##32bit_grad_fp16, kbit_half, k),         \
        KBIT_TEST_O32(c##stem##32bit_grad_bf16, kbit_bf16, k)
#define KBIT_TEST_O32_OLD(stem, k)                                      \
    KBIT_TEST_O32(c##stem##32bit_grad_32, float, k),                   \
        KBIT_TEST_O32(c##stem##32bit_grad_16, kbit_half, k),           \
        KBIT_TEST_O32(kbit_##stem##32bit_grad_bf16, kbit_bf16, k)
#define KBIT_TEST_O32_KIND(stem, k, naming) KBIT_TEST_O32_##naming(stem, k),
#define KBIT_TEST_O8_KIND(stem, k, naming)                              \
    KBIT_TEST_O8(c##stem##_8bit_blockwise_grad_fp32, float, k),         \
        KBIT_TEST_O8(c##stem##_8bit_blockwise_grad_fp16, kbit_half, k), \
        KBIT_TEST_O8(c##stem##_8bit_blockwise_grad_bf16, kbit_bf16, k),

inline const std::vector<Optim32Fn>& optim32_functions() {
    static const std::vector<Optim32Fn> fns = {KBIT_TEST_KINDS(KBIT_TEST_O32_KIND)};
    return fns;
}

inline const std::vector<Optim8Fn>& optim8_functions() {
    static const std::vector<Optim8Fn> fns = {KBIT_TEST_KINDS(KBIT_TEST_O8_KIND)};
    return fns;
}

#undef KBIT_TEST_KINDS
#undef KBIT_TEST_O32_BNB
#undef KBIT_TEST_O32_OLD
#undef KBIT_TEST_O32_KIND
#undef KBIT_TEST_O8_KIND
#undef KBIT_TEST_O32
#undef KBIT_TEST_O8

inline const Optim32Fn& optim32_function(Kind kind, int32_t dtype) {
    for (const auto& f : optim32_functions())
        if (f.kind == kind && f.dtype == dtype) return f;
    throw std::logic_error("no such 32-bit optimizer");
}
inline const Optim8Fn& optim8_function(Kind kind, int32_t dtype) {
    for (const auto& f : optim8_functions())
        if (f.kind == kind && f.dtype == dtype) return f;
    throw std::logic_error("no such 8-bit optimizer");
}

// Raw element storage of a dtype (fp32 / fp16 / bf16) filled from fp32 values with RN.
inline std::vector<uint8_t> to_dtype(const std::vector<float>& v, int32_t dtype) {
    std::vector<uint8_t> out(v.size() * dtype_size(dtype));
    for (size_t i = 0; i < v.size(); ++i) {
        if (dtype == KBIT_DTYPE_FP32) std::memcpy(out.data() + 4 * i, &v[i], 4);
        else if (dtype == KBIT_DTYPE_FP16) {
            const uint16_t h = kbit::float_to_half(v[i]);
            std::memcpy(out.data() + 2 * i, &h, 2);
        } else {
            const uint16_t b = kbit::float_to_bf16(v[i]);
            std::memcpy(out.data() + 2 * i, &b, 2);
        }
    }
    return out;
}

inline std::vector<float> from_dtype(const std::vector<uint8_t>& raw, int32_t dtype) {
    const size_t n = raw.size() / dtype_size(dtype);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
        if (dtype == KBIT_DTYPE_FP32) std::memcpy(&out[i], raw.data() + 4 * i, 4);
        else {
            uint16_t h;
            std::memcpy(&h, raw.data() + 2 * i, 2);
            out[i] = dtype == KBIT_DTYPE_FP16 ? kbit::half_to_float(h) : kbit::bf16_to_float(h);
        }
    }
    return out;
}

inline float round_dtype(float x, int32_t dtype) {
    return dtype == KBIT_DTYPE_FP16   ? kbit::half_to_float(kbit::float_to_half(x))
           : dtype == KBIT_DTYPE_BF16 ? kbit::bf16_to_float(kbit::float_to_bf16(x))
                                      : x;
}

// The backend's OpenMP runtime, when it has one: the functions are looked up in the backend's own
// dependency scope, so setting the thread count reaches the runtime the backend really uses.
class BackendThreads {
public:
    BackendThreads() {
        void* h = dlopen(backend().path.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (h == nullptr) return;
        set_ = reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads"));
        get_ = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads"));
        dlclose(h);
    }
    bool available() const { return set_ != nullptr && get_ != nullptr; }
    void set(int n) const {
        if (available()) set_(n);
    }
    int get() const { return available() ? get_() : 1; }

private:
    void (*set_)(int) = nullptr;
    int (*get_)() = nullptr;
};

// Restores the backend's thread count at scope exit.
class ThreadScope {
public:
    explicit ThreadScope(int n) : saved_(threads_.get()) { threads_.set(n); }
    ~ThreadScope() { threads_.set(saved_); }
    ThreadScope(const ThreadScope&) = delete;
    ThreadScope& operator=(const ThreadScope&) = delete;

private:
    BackendThreads threads_;
    int saved_;
};

}  // namespace kbit_test
