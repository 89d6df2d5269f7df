// Optimizers, paged memory: cget_managed_ptr / kbit_free_managed_ptr / cprefetch / cfill_fp32 /
// cfill_uint8 — allocation, alignment, host access, exact fills, bad input, and an 8-bit optimizer step
// on managed state (how bitsandbytes' paged optimizers use them).
#include <cstdint>
#include <limits>

#include <catch2/catch.hpp>

#include "optim8_cases.h"

using namespace kbit_test;

TEST_CASE("optim8 paged: managed memory is host-addressable, 64-byte aligned, and freed", "[optim8][paged]"
          "[fn:kbit_last_error_message][fn:cget_managed_ptr][fn:kbit_free_managed_ptr][fn:cprefetch]") {
    if (!backend().has_optim8()) return;
    const auto& o = backend().fns_optim8;
    const auto& c = backend().fns_core;
    for (size_t bytes : {size_t{1}, size_t{1000}, size_t{64} << 20}) {
        void* ptr = o.cget_managed_ptr(bytes);
        INFO(bytes << " bytes: " << c.kbit_last_error_message());
        REQUIRE(ptr != nullptr);
        CHECK(reinterpret_cast<uintptr_t>(ptr) % 64 == 0);
        auto* b = static_cast<uint8_t*>(ptr);
        b[bytes - 1] = 2;
        b[0] = 1;
        CHECK(o.cprefetch(ptr, bytes, 0) == KBIT_STATUS_SUCCESS);
        CHECK(o.cprefetch(ptr, bytes, -1) == KBIT_STATUS_SUCCESS);  // towards the host
        CHECK(b[0] == 1);
        if (bytes > 1) CHECK(b[bytes - 1] == 2);
        CHECK(o.kbit_free_managed_ptr(ptr) == KBIT_STATUS_SUCCESS);
    }
    CHECK(o.kbit_free_managed_ptr(nullptr) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("optim8 paged: bad input to cget_managed_ptr and cprefetch", "[optim8][paged][args]"
          "[fn:kbit_last_error_message][fn:cget_managed_ptr][fn:kbit_free_managed_ptr][fn:cprefetch]") {
    if (!backend().has_optim8()) return;
    const auto& o = backend().fns_optim8;
    const auto& c = backend().fns_core;
    CHECK(o.cget_managed_ptr(0) == nullptr);
    CHECK(std::string(c.kbit_last_error_message()) == "cget_managed_ptr: bytes is 0, must be > 0");
    CHECK(o.cget_managed_ptr(std::numeric_limits<size_t>::max()) == nullptr);
    CHECK(std::string(c.kbit_last_error_message()).rfind("cget_managed_ptr: ", 0) == 0);
    check_invalid(o.cprefetch(nullptr, 16, 0), "cprefetch: ptr is NULL");
    void* ptr = o.cget_managed_ptr(256);
    REQUIRE(ptr != nullptr);
    check_invalid(o.cprefetch(ptr, 256, -2), "cprefetch: device is -2, must be >= -1 (-1 = host)");
    CHECK(o.cprefetch(nullptr, 0, 0) == KBIT_STATUS_SUCCESS);
    CHECK(o.kbit_free_managed_ptr(ptr) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("optim8 paged: cfill_fp32 and cfill_uint8 set exactly n elements, bit for bit, B unused",
          "[optim8][paged][fill]"
          "[fn:kbit_stream_synchronize][fn:cget_managed_ptr][fn:kbit_free_managed_ptr][fn:cfill_fp32][fn:cfill_uint8]") {
    if (!backend().has_optim8()) return;
    const auto& o = backend().fns_optim8;
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{3} << 20}) {
        INFO("n " << n);
        DeviceBuffer<float> a(static_cast<size_t>(n) + 7), b(4);
        a.fill_bytes(0xA5);
        b.fill_bytes(0xA5);
        for (float value : {0.0f, -0.0f, 1.5f, -INFINITY, kbit::bits_float(0x7FC01234u)}) {
            REQUIRE(o.cfill_fp32(a.get(), b.get(), value, n) == KBIT_STATUS_SUCCESS);
            const auto got = a.download();
            long wrong = 0;
            for (int64_t i = 0; i < n; ++i) wrong += bits_of(got[i]) != bits_of(value);
            CHECK(wrong == 0);
            for (size_t i = static_cast<size_t>(n); i < got.size(); ++i) CHECK(bits_of(got[i]) == 0xA5A5A5A5u);
        }
        for (uint8_t x : b.bytes()) CHECK(x == 0xA5);
        DeviceBuffer<uint8_t> u(static_cast<size_t>(n) + 7);
        u.fill_bytes(0xA5);
        REQUIRE(o.cfill_uint8(u.get(), nullptr, 7, n) == KBIT_STATUS_SUCCESS);
        const auto bytes = u.download();
        long wrong = 0;
        for (int64_t i = 0; i < n; ++i) wrong += bytes[i] != 7;
        CHECK(wrong == 0);
        for (size_t i = static_cast<size_t>(n); i < bytes.size(); ++i) CHECK(bytes[i] == 0xA5);
    }
    // Managed memory can be filled too (paged optimizers zero their state this way).
    float* m = static_cast<float*>(o.cget_managed_ptr(4096 * sizeof(float)));
    REQUIRE(m != nullptr);
    REQUIRE(o.cfill_fp32(m, nullptr, 2.0f, 4096) == KBIT_STATUS_SUCCESS);
    REQUIRE(backend().fns_core.kbit_stream_synchronize(nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(m[0] == 2.0f);
    CHECK(m[4095] == 2.0f);
    CHECK(o.kbit_free_managed_ptr(m) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("optim8 paged: bad input to cfill_fp32 / cfill_uint8 leaves memory untouched", "[optim8][paged][args]"
          "[fn:cfill_fp32][fn:cfill_uint8]") {
    if (!backend().has_optim8()) return;
    const auto& o = backend().fns_optim8;
    DeviceBuffer<float> a(16);
    DeviceBuffer<uint8_t> u(16);
    a.fill_bytes(0xA5);
    u.fill_bytes(0xA5);
    check_invalid(o.cfill_fp32(a.get(), nullptr, 1.0f, -1), "cfill_fp32: n is -1, must be >= 0");
    check_invalid(o.cfill_fp32(nullptr, nullptr, 1.0f, 16), "cfill_fp32: A is NULL");
    check_invalid(o.cfill_uint8(u.get(), nullptr, 1, -5), "cfill_uint8: n is -5, must be >= 0");
    check_invalid(o.cfill_uint8(nullptr, nullptr, 1, 16), "cfill_uint8: A is NULL");
    CHECK(o.cfill_fp32(nullptr, nullptr, 1.0f, 0) == KBIT_STATUS_SUCCESS);
    CHECK(o.cfill_uint8(nullptr, nullptr, 1, 0) == KBIT_STATUS_SUCCESS);
    for (uint8_t x : a.bytes()) CHECK(x == 0xA5);
    for (uint8_t x : u.bytes()) CHECK(x == 0xA5);
}

TEST_CASE("optim8 paged: an 8-bit Adam fp32 step on managed state equals the same step on device memory",
          "[optim8][paged]" "[fn:kbit_stream_synchronize][fn:cadam_8bit_blockwise_grad_fp32][fn:cget_managed_ptr]"
          "[fn:kbit_free_managed_ptr][fn:cprefetch][fn:cfill_fp32][fn:cfill_uint8]") {
    if (!backend().has_optim8()) return;
    const auto& o = backend().fns_optim8;
    const int n = 5000;
    const int blocks = (n + 255) / 256;
    const auto p0 = normal_floats(n, 50, 0.1f), g = normal_floats(n, 51, 0.01f);
    const auto q1 = dynamic_map(true), q2 = dynamic_map(false);
    const Hyper h = default_hyper(Kind::Adam, 1);
    // Device memory.
    DeviceBuffer<float> dp(p0), dg(g), dq1(q1), dq2(q2), da1(std::vector<float>(blocks, 0.0f)),
        da2(std::vector<float>(blocks, 0.0f));
    DeviceBuffer<uint8_t> dc1(std::vector<uint8_t>(n, 0)), dc2(std::vector<uint8_t>(n, 0));
    require_ok(o.cadam_8bit_blockwise_grad_fp32(dp.get(), dg.get(), dc1.get(), dc2.get(), h.beta1, h.beta2, 0.0f, 0.0f,
                                                h.eps, 1, h.lr, dq1.get(), dq2.get(), da1.get(), da2.get(), 0.0f, 1.0f,
                                                false, n),
               "device");
    // Managed state, zeroed with cfill_* as bitsandbytes' paged optimizers do.
    auto* c1 = static_cast<uint8_t*>(o.cget_managed_ptr(n));
    auto* c2 = static_cast<uint8_t*>(o.cget_managed_ptr(n));
    auto* a1 = static_cast<float*>(o.cget_managed_ptr(blocks * sizeof(float)));
    auto* a2 = static_cast<float*>(o.cget_managed_ptr(blocks * sizeof(float)));
    REQUIRE((c1 && c2 && a1 && a2));
    REQUIRE(o.cfill_uint8(c1, nullptr, 0, n) == KBIT_STATUS_SUCCESS);
    REQUIRE(o.cfill_uint8(c2, nullptr, 0, n) == KBIT_STATUS_SUCCESS);
    REQUIRE(o.cfill_fp32(a1, nullptr, 0.0f, blocks) == KBIT_STATUS_SUCCESS);
    REQUIRE(o.cfill_fp32(a2, nullptr, 0.0f, blocks) == KBIT_STATUS_SUCCESS);
    REQUIRE(o.cprefetch(c1, n, 0) == KBIT_STATUS_SUCCESS);
    DeviceBuffer<float> mp(p0), mg(g), mq1(q1), mq2(q2);
    require_ok(o.cadam_8bit_blockwise_grad_fp32(mp.get(), mg.get(), c1, c2, h.beta1, h.beta2, 0.0f, 0.0f, h.eps, 1,
                                                h.lr, mq1.get(), mq2.get(), a1, a2, 0.0f, 1.0f, false, n),
               "managed");
    REQUIRE(backend().fns_core.kbit_stream_synchronize(nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(first_bit_difference(mp.download(), dp.download()) == -1);
    CHECK(std::vector<uint8_t>(c1, c1 + n) == dc1.download());
    CHECK(std::vector<uint8_t>(c2, c2 + n) == dc2.download());
    CHECK(std::vector<float>(a1, a1 + blocks) == da1.download());
    CHECK(std::vector<float>(a2, a2 + blocks) == da2.download());
    for (void* ptr : {static_cast<void*>(c1), static_cast<void*>(c2), static_cast<void*>(a1), static_cast<void*>(a2)})
        CHECK(o.kbit_free_managed_ptr(ptr) == KBIT_STATUS_SUCCESS);
}
