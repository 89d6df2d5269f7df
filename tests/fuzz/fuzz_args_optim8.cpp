// fuzz_args_optim8: every function of abi/kbit_optim8.def with fuzzed scalars and contract-sized
// buffers (include/kbit/kbit_optim8.h); the checks are fuzz_harness.h's.
#include "fuzz_harness.h"

using namespace kfuzz;

namespace {

enum class Kind { Adam, AdEMAMix, Adagrad, Lion, Momentum, RMSprop };
bool two_state(Kind k) { return k == Kind::Adam || k == Kind::AdEMAMix; }

// The optimizer of an update's name: c<opt>32bit_grad_<t>, c<opt>_8bit_blockwise_grad_<t>,
// kbit_<opt>32bit_grad_<t>; `rest` receives what follows the optimizer's name.
bool kind_of(const std::string& name, Kind* kind, std::string* rest) {
    static const struct {
        const char* word;
        Kind kind;
    } kWords[] = {{"adam", Kind::Adam},  {"ademamix", Kind::AdEMAMix}, {"adagrad", Kind::Adagrad},
                  {"lion", Kind::Lion}, {"momentum", Kind::Momentum}, {"rmsprop", Kind::RMSprop}};
    const std::string s = starts_with(name, "kbit_") ? name.substr(5) : name.substr(1);
    for (const auto& w : kWords) {
        const size_t len = std::strlen(w.word);
        if (s.compare(0, len, w.word) == 0 && (s[len] == '3' || s[len] == '_')) {
            *kind = w.kind;
            *rest = s.substr(len);
            return true;
        }
    }
    return false;
}

template <class T>
using Optim32 = kbit_status (*)(T*, T*, float*, float*, float*, float, float, float, float, float, float, float,
                                float, int, float, float, bool, int);
template <class T>
using Optim8 = kbit_status (*)(T*, T*, unsigned char*, unsigned char*, float, float, float, float, float, int,
                               float, float*, float*, float*, float*, float, float, bool, int);

// c<opt>32bit_grad_<t>: g n (in), p n, state1 n (AdEMAMix 2n), state2 n (2-state; else optional),
// unorm 1 (needed with max_unorm > 0).
template <class T>
void optim32(Kind kind, Call& c, Optim32<T> f) {
    const int n = c.i32("n"), step = c.i32("step");
    const float max_unorm = c.f32("max_unorm"), param_norm = c.f32("param_norm");
    const float beta1 = c.f32("beta1"), beta2 = c.f32("beta2"), beta3 = c.f32("beta3"), alpha = c.f32("alpha");
    const float eps = c.f32("eps"), wd = c.f32("weight_decay"), lr = c.f32("lr"), gnorm = c.f32("gnorm_scale");
    const bool skip_zeros = c.boolean("skip_zeros");
    c.limit_work(Sz(n) * 16);  // a few dozen operations per element
    T* g = c.buf<T>("g", Role::In, n);
    T* p = c.buf<T>("p", Role::InOut, n);
    float* state1 = c.buf<float>("state1", Role::InOut, Sz(kind == Kind::AdEMAMix ? 2 : 1) * n);
    float* state2 = c.buf<float>("state2", Role::InOut, n);
    float* unorm = c.in().coin() ? c.buf<float>("unorm", Role::InOut, 1) : nullptr;
    const bool bad = n < 0 || step < 1;
    c.must_fail(bad, "n < 0 or step < 1");
    c.must_fail(n > 0 && (!g || !p || !state1 || (two_state(kind) && !state2)), "NULL required buffer");
    c.must_fail(n > 0 && max_unorm > 0.0f && !unorm, "unorm NULL with max_unorm > 0");
    c.must_succeed_untouched(!bad && n == 0);
    c.run([&] {
        return f(g, p, state1, state2, unorm, max_unorm, param_norm, beta1, beta2, beta3, alpha, eps, wd, step, lr,
                 gnorm, skip_zeros, n);
    });
}

// c<opt>_8bit_blockwise_grad_<t>: p n, g n (in), state1 n codes (AdEMAMix 2n), state2 n (2-state),
// quantiles 256 ascending floats each, absmax1 ceil(n / 256) (AdEMAMix twice that), absmax2 ceil(n / 256).
template <class T>
void optim8(Kind kind, Call& c, Optim8<T> f) {
    const int n = c.i32("n"), step = c.i32("step");
    const float beta1 = c.f32("beta1"), beta2 = c.f32("beta2"), beta3 = c.f32("beta3"), alpha = c.f32("alpha");
    const float eps = c.f32("eps"), wd = c.f32("weight_decay"), lr = c.f32("lr"), gnorm = c.f32("gnorm_scale");
    const bool skip_zeros = c.boolean("skip_zeros");
    const Sz states = Sz(kind == Kind::AdEMAMix ? 2 : 1);
    const Sz blocks = ceil_div(n, KBIT_OPTIM8_BLOCKSIZE);
    c.limit_work(Sz(n) * 32);  // dequantize, update, absmax, re-quantize per element
    T* p = c.buf<T>("p", Role::InOut, n);
    T* g = c.buf<T>("g", Role::In, n);
    uint8_t* state1 = c.buf<uint8_t>("state1", Role::InOut, states * n);
    uint8_t* state2 = c.buf<uint8_t>("state2", Role::InOut, n);
    float* q1 = c.buf<float>("quantiles1", Role::In, 256, Table::Ascending);
    float* q2 = c.buf<float>("quantiles2", Role::In, 256, Table::Ascending);
    float* absmax1 = c.buf<float>("absmax1", Role::InOut, states * blocks);
    float* absmax2 = c.buf<float>("absmax2", Role::InOut, blocks);
    const bool bad = n < 0 || step < 1;
    const bool two = two_state(kind);
    c.must_fail(bad, "n < 0 or step < 1");
    c.must_fail(n > 0 && (!p || !g || !state1 || !q1 || !absmax1), "NULL required buffer");
    c.must_fail(n > 0 && two && (!state2 || !q2 || !absmax2), "NULL second-state buffer");
    c.must_succeed_untouched(!bad && n == 0);
    c.run([&] {
        return f(p, g, state1, state2, beta1, beta2, beta3, alpha, eps, step, lr, q1, q2, absmax1, absmax2, wd,
                 gnorm, skip_zeros, n);
    });
}

// cget_managed_ptr: NULL with a message for 0 or an impossible size; else bytes usable, 64-byte aligned.
void managed_ptr(Call& c, decltype(&cget_managed_ptr) f) {
    const size_t bytes = alloc_size(c, "bytes");
    void* p = f(bytes);
    if (p == nullptr) {
        if (bytes > 0 && bytes <= static_cast<size_t>(kCapBytes)) c.report("failed for a small size");
        const char* msg = kbit_last_error_message();
        if (msg == nullptr || std::strncmp(msg, "cget_managed_ptr: ", 18) != 0) c.report("failed without a message");
        return;
    }
    if (bytes == 0) c.report("returned memory for 0 bytes");
    if (reinterpret_cast<uintptr_t>(p) % 64 != 0) c.report("memory is not 64-byte aligned");
    std::memset(p, 0x5A, bytes);  // all of it is usable (ASan knows the allocation's size)
    if (kbit_free_managed_ptr(p) != KBIT_STATUS_SUCCESS) c.report("kbit_free_managed_ptr failed");
}

void free_managed(Call& c, decltype(&kbit_free_managed_ptr) f) {
    void* p = c.in().coin() ? cget_managed_ptr(static_cast<size_t>(c.i32("bytes")) % 65536 + 1) : nullptr;
    if (f(p) != KBIT_STATUS_SUCCESS) c.report("failed");
}

// cprefetch: ptr a range of `bytes` (or NULL), device >= -1; touches nothing.
void prefetch(Call& c, decltype(&cprefetch) f) {
    const size_t bytes = c.size("bytes");
    const int device = c.i32("device");
    void* ptr = c.buf<uint8_t>("ptr", Role::In, bytes > static_cast<size_t>(kCapBytes) ? Sz::undefined()
                                                                                       : Sz(static_cast<int64_t>(bytes)));
    if (bytes > static_cast<size_t>(kCapBytes)) ptr = nullptr;  // no buffer that large
    c.must_fail(device < -1, "device < -1");
    c.must_fail(bytes > 0 && !ptr, "ptr NULL with bytes > 0");
    c.run([&] { return f(ptr, bytes, device); });
}

// cfill_fp32 / cfill_uint8: A n elements (out), B unused.
template <class T, class V>
void fill(Call& c, kbit_status (*f)(T*, T*, V, int64_t)) {
    const int64_t n = c.i64("n");
    const V value = std::is_same<V, float>::value ? static_cast<V>(c.f32("value")) : static_cast<V>(c.in().u8());
    T* A = c.buf<T>("A", Role::Out, n);
    T* B = c.ignored<T>("B");
    c.must_fail(n < 0, "n < 0");
    c.must_fail(n > 0 && !A, "A NULL with n > 0");
    c.must_succeed_untouched(n == 0);
    const kbit_status s = c.run([&] { return f(A, B, value, n); });
    if (s == KBIT_STATUS_SUCCESS)
        for (int64_t i = 0; i < n; ++i)
            if (std::memcmp(&A[i], &value, sizeof value) != 0) c.report("did not fill every element");
}

Handler resolve(const Fn& fn) {
    const std::string name = fn.name;
    if (name == "cget_managed_ptr") return bind<decltype(&cget_managed_ptr)>(fn, managed_ptr);
    if (name == "kbit_free_managed_ptr") return bind<decltype(&kbit_free_managed_ptr)>(fn, free_managed);
    if (name == "cprefetch") return bind<decltype(&cprefetch)>(fn, prefetch);
    if (name == "cfill_fp32") return bind<decltype(&cfill_fp32)>(fn, fill<float, float>);
    if (name == "cfill_uint8") return bind<decltype(&cfill_uint8)>(fn, fill<unsigned char, unsigned char>);
    Kind kind;
    std::string rest;
    if (!kind_of(name, &kind, &rest)) return nullptr;
    if (starts_with(rest, "32bit_grad_"))
        return by_dtype(rest.substr(11), [&](auto t) {
            using T = decltype(t);
            return bind<Optim32<T>>(fn, [kind](Call& c, Optim32<T> f) { optim32<T>(kind, c, f); });
        });
    if (starts_with(rest, "_8bit_blockwise_grad_"))
        return by_dtype(rest.substr(21), [&](auto t) {
            using T = decltype(t);
            return bind<Optim8<T>>(fn, [kind](Call& c, Optim8<T> f) { optim8<T>(kind, c, f); });
        });
    return nullptr;
}

}  // namespace

#define KBIT_FUZZ_LIST "kbit_optim8.def"
#include "fuzz_main.inc"
