// Optimizers, bad input: every 32-bit and 8-bit optimizer rejects each NULL required pointer, n < 0,
// step < 1 and (32-bit) a NULL unorm with max_unorm > 0 with KBIT_STATUS_INVALID_ARGUMENT, the exact
// message, and every buffer untouched; optional pointers may be NULL; n == 0 touches nothing.
#include <climits>

#include <catch2/catch.hpp>

#include "optim8_cases.h"

using namespace kbit_test;

namespace {

constexpr int kN = 300;
constexpr uint8_t kSentinel = 0xA5;

// Every buffer of a 32-bit call, filled with the sentinel.
struct Buffers32 {
    DeviceBuffer<uint8_t> g{kN * 4}, p{kN * 4};
    DeviceBuffer<float> s1{2 * kN}, s2{kN}, unorm{1};
    Buffers32() { reset(); }
    void reset() {
        for (auto* b : {&g, &p}) b->fill_bytes(kSentinel);
        for (auto* b : {&s1, &s2, &unorm}) b->fill_bytes(kSentinel);
    }
    bool untouched() const {
        for (auto* b : {&g, &p})
            for (uint8_t x : b->bytes())
                if (x != kSentinel) return false;
        for (auto* b : {&s1, &s2, &unorm})
            for (uint8_t x : b->bytes())
                if (x != kSentinel) return false;
        return true;
    }
};

struct Buffers8 {
    DeviceBuffer<uint8_t> p{kN * 4}, g{kN * 4}, s1{2 * kN}, s2{kN};
    DeviceBuffer<float> q1{256}, q2{256}, a1{4}, a2{2};
    Buffers8() { reset(); }
    void reset() {
        for (auto* b : {&p, &g, &s1, &s2}) b->fill_bytes(kSentinel);
        q1.upload(dynamic_map(true));
        q2.upload(dynamic_map(false));
        a1.fill_bytes(kSentinel);
        a2.fill_bytes(kSentinel);
    }
    bool untouched() const {
        for (auto* b : {&p, &g, &s1, &s2})
            for (uint8_t x : b->bytes())
                if (x != kSentinel) return false;
        for (auto* b : {&a1, &a2})
            for (uint8_t x : b->bytes())
                if (x != kSentinel) return false;
        return q1.download() == dynamic_map(true) && q2.download() == dynamic_map(false);
    }
};

// Runs check(f, two, h, fn) for every function f of `fns` under INFO naming it: two, whether f's
// optimizer has a second state; h, its default hyperparameters at step 3; fn, the messages' "<name>: ".
template <class Fn, class Check>
void for_each_function(const std::vector<Fn>& fns, Check check) {
    for (const auto& f : fns) {
        INFO(f.name);
        check(f, kbit::optim::two_state(f.kind), default_hyper(f.kind, 3), f.name + ": ");
    }
}

// The scalar rules, checked before any pointer: n >= 0, then step >= 1. call(h, n) calls with every
// buffer valid; no refusal may touch a buffer of b.
template <class Buffers, class Call>
void check_scalar_rules(const std::string& fn, const Hyper& h, const Buffers& b, Call call) {
    check_invalid(call(h, -1), fn + "n is -1, must be >= 0");
    CHECK(b.untouched());
    check_invalid(call(h, INT_MIN), fn + "n is -2147483648, must be >= 0");
    CHECK(b.untouched());
    for (int step : {0, -5}) {
        Hyper hs = h;
        hs.step = step;
        check_invalid(call(hs, kN), fn + "step is " + std::to_string(step) + ", must be >= 1");
        CHECK(b.untouched());
    }
}

}  // namespace

TEST_CASE("optim8 args: 32-bit optimizers fp32/fp16/bf16 reject bad input with exact messages, buffers untouched",
          "[optim8][args]" FN_OPTIM8_32BIT) {
    if (!backend().has_optim8()) return;
    Buffers32 b;
    for_each_function(optim32_functions(), [&](const Optim32Fn& f, bool two, const Hyper& h, const std::string& fn) {
        auto call = [&](void* g, void* p, float* s1, float* s2, float* unorm, float max_unorm, const Hyper& hh, int n) {
            b.reset();
            return f.call(g, p, s1, s2, unorm, max_unorm, 1.0f, hh, n);
        };
        void *g = b.g.get(), *p = b.p.get();
        float *s1 = b.s1.get(), *s2 = b.s2.get(), *u = b.unorm.get();

        check_scalar_rules(fn, h, b, [&](const Hyper& hh, int n) { return call(g, p, s1, s2, u, 0.0f, hh, n); });
        check_invalid(call(nullptr, p, s1, s2, u, 0.0f, h, kN), fn + "g is NULL");
        CHECK(b.untouched());
        check_invalid(call(g, nullptr, s1, s2, u, 0.0f, h, kN), fn + "p is NULL");
        CHECK(b.untouched());
        check_invalid(call(g, p, nullptr, s2, u, 0.0f, h, kN), fn + "state1 is NULL");
        CHECK(b.untouched());
        if (two) {
            check_invalid(call(g, p, s1, nullptr, u, 0.0f, h, kN), fn + "state2 is NULL");
            CHECK(b.untouched());
        }
        check_invalid(call(g, p, s1, s2, nullptr, 0.5f, h, kN), fn + "unorm is NULL but max_unorm is 0.5 > 0");
        CHECK(b.untouched());
        // The first failing rule is reported: n before pointers.
        check_invalid(call(nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f, h, -7), fn + "n is -7, must be >= 0");

        // Accepted: n == 0 with every pointer NULL (nothing is touched), optional pointers NULL.
        CHECK(call(nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f, h, 0) == KBIT_STATUS_SUCCESS);
        CHECK(call(g, p, s1, s2, u, 0.0f, h, 0) == KBIT_STATUS_SUCCESS);
        CHECK(b.untouched());
        b.reset();
        b.g.upload(std::vector<uint8_t>(kN * 4, 0));  // valid numbers for a real step
        b.p.upload(std::vector<uint8_t>(kN * 4, 0));
        b.s1.upload(std::vector<float>(2 * kN, 0.0f));
        CHECK(f.call(g, p, s1, two ? s2 : nullptr, nullptr, 0.0f, 1.0f, h, kN) == KBIT_STATUS_SUCCESS);
        if (!two) {  // a 1-state optimizer never touches state2, even when one is passed
            b.s2.fill_bytes(kSentinel);
            CHECK(f.call(g, p, s1, s2, nullptr, 0.0f, 1.0f, h, kN) == KBIT_STATUS_SUCCESS);
            for (uint8_t x : b.s2.bytes()) REQUIRE(x == kSentinel);
        }
    });
}

TEST_CASE("optim8 args: 8-bit blockwise optimizers fp32/fp16/bf16 reject bad input with exact messages, buffers untouched",
          "[optim8][args]" FN_OPTIM8_8BIT) {
    if (!backend().has_optim8()) return;
    Buffers8 b;
    for_each_function(optim8_functions(), [&](const Optim8Fn& f, bool two, const Hyper& h, const std::string& fn) {
        struct Ptrs {
            void *p, *g;
            uint8_t *s1, *s2;
            float *q1, *q2, *a1, *a2;
        };
        const Ptrs all{b.p.get(), b.g.get(), b.s1.get(), b.s2.get(), b.q1.get(), b.q2.get(), b.a1.get(), b.a2.get()};
        auto call = [&](Ptrs x, const Hyper& hh, int n) {
            b.reset();
            return f.call(x.p, x.g, x.s1, x.s2, x.q1, x.q2, x.a1, x.a2, hh, n);
        };

        check_scalar_rules(fn, h, b, [&](const Hyper& hh, int n) { return call(all, hh, n); });
        struct Missing {
            const char* name;
            void (*clear)(Ptrs&);
            bool required_for_one_state;
        };
        const Missing missing[] = {
            {"p", [](Ptrs& x) { x.p = nullptr; }, true},
            {"g", [](Ptrs& x) { x.g = nullptr; }, true},
            {"state1", [](Ptrs& x) { x.s1 = nullptr; }, true},
            {"state2", [](Ptrs& x) { x.s2 = nullptr; }, false},
            {"quantiles1", [](Ptrs& x) { x.q1 = nullptr; }, true},
            {"quantiles2", [](Ptrs& x) { x.q2 = nullptr; }, false},
            {"absmax1", [](Ptrs& x) { x.a1 = nullptr; }, true},
            {"absmax2", [](Ptrs& x) { x.a2 = nullptr; }, false},
        };
        for (const auto& m : missing) {
            if (!two && !m.required_for_one_state) continue;
            Ptrs x = all;
            m.clear(x);
            check_invalid(call(x, h, kN), fn + m.name + " is NULL");
            CHECK(b.untouched());
        }
        CHECK(call(Ptrs{}, h, 0) == KBIT_STATUS_SUCCESS);  // n == 0: nothing to do, nothing read
        CHECK(call(all, h, 0) == KBIT_STATUS_SUCCESS);
        CHECK(b.untouched());
        if (!two) {  // 1-state: the second-state pointers are optional and never touched
            b.reset();
            b.p.upload(std::vector<uint8_t>(kN * 4, 0));
            b.g.upload(std::vector<uint8_t>(kN * 4, 0));
            CHECK(f.call(all.p, all.g, all.s1, nullptr, all.q1, nullptr, all.a1, nullptr, h, 256) == KBIT_STATUS_SUCCESS);
            CHECK(f.call(all.p, all.g, all.s1, all.s2, all.q1, all.q2, all.a1, all.a2, h, 256) == KBIT_STATUS_SUCCESS);
            for (uint8_t x : b.s2.bytes()) REQUIRE(x == kSentinel);
            for (uint8_t x : b.a2.bytes()) REQUIRE(x == kSentinel);
        }
    });
}
