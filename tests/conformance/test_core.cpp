// Core interface: versions, identity, status strings, thread-local errors, memory API.
#include <thread>

#include <catch2/catch.hpp>

#include "backend.h"

using kbit_test::backend;

TEST_CASE("core: interface versions match the headers", "[core]") {
    const auto& b = backend();
#define KBIT_INTERFACE(name, NAME, ns)                                                            \
    if (KBIT_INTERFACE_##NAME == KBIT_INTERFACE_CORE || b.has(KBIT_INTERFACE_##NAME))              \
        CHECK(KBIT_VERSION_MAJOR_OF(b.version[KBIT_INTERFACE_##NAME]) == KBIT_##NAME##_VERSION_MAJOR);
#include "interfaces.def"
#undef KBIT_INTERFACE
    CHECK(KBIT_MAKE_VERSION(1, 2) == 0x00010002u);
}

TEST_CASE("core: identity and probe", "[core]" "[fn:kbit_backend_probe][fn:kbit_backend_name][fn:kbit_backend_info]") {
    const auto& c = backend().fns_core;
    REQUIRE(c.kbit_backend_name() != nullptr);
    CHECK(std::string(c.kbit_backend_name()).size() > 0);
    REQUIRE(c.kbit_backend_info() != nullptr);
    CHECK(std::string(c.kbit_backend_info()).size() > 0);
    CHECK(c.kbit_backend_probe() > 0);
    CHECK(c.kbit_backend_probe() == c.kbit_backend_probe());  // side-effect free and stable
}

TEST_CASE("core: status strings", "[core]" "[fn:kbit_status_string]") {
    const auto& c = backend().fns_core;
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_SUCCESS)) == "KBIT_STATUS_SUCCESS");
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_INVALID_ARGUMENT)) == "KBIT_STATUS_INVALID_ARGUMENT");
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_DEVICE_ERROR)) == "KBIT_STATUS_DEVICE_ERROR");
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_OUT_OF_MEMORY)) == "KBIT_STATUS_OUT_OF_MEMORY");
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_NOT_IMPLEMENTED)) == "KBIT_STATUS_NOT_IMPLEMENTED");
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_INTERNAL_ERROR)) == "KBIT_STATUS_INTERNAL_ERROR");
    CHECK(std::string(c.kbit_status_string(KBIT_STATUS_NOT_SUPPORTED)) == "KBIT_STATUS_NOT_SUPPORTED");
    CHECK(KBIT_STATUS_NOT_SUPPORTED == 100);
    CHECK(std::string(c.kbit_status_string(-7)) == "KBIT_STATUS_UNKNOWN");
    CHECK(std::string(c.kbit_status_string(6)) == "KBIT_STATUS_UNKNOWN");
}

TEST_CASE("core: errors are thread-local and name the function", "[core]"
          "[fn:kbit_last_error_message][fn:kbit_device_malloc][fn:kbit_device_free]") {
    const auto& c = backend().fns_core;
    REQUIRE(c.kbit_device_malloc(nullptr, 16) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(c.kbit_last_error_message()) == "kbit_device_malloc: ptr is NULL");
    std::string other_thread;
    std::thread t([&] { other_thread = c.kbit_last_error_message(); });
    t.join();
    CHECK(other_thread.empty());
    // A successful call leaves the last failure in place.
    void* p = nullptr;
    REQUIRE(c.kbit_device_malloc(&p, 64) == KBIT_STATUS_SUCCESS);
    CHECK(std::string(c.kbit_last_error_message()) == "kbit_device_malloc: ptr is NULL");
    REQUIRE(c.kbit_device_free(p) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("core: memory round trip and bad copies", "[core]"
          "[fn:kbit_last_error_message][fn:kbit_device_malloc][fn:kbit_device_free][fn:kbit_memcpy]"
          "[fn:kbit_stream_synchronize]") {
    const auto& c = backend().fns_core;
    std::vector<uint32_t> host(1000);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
    kbit_test::DeviceBuffer<uint32_t> a(host), b(host.size());
    kbit_test::require_ok(c.kbit_memcpy(b.get(), a.get(), host.size() * 4, KBIT_MEMCPY_DEVICE_TO_DEVICE), "d2d");
    CHECK(b.download() == host);

    std::vector<uint32_t> sink(4, 7);
    CHECK(c.kbit_memcpy(sink.data(), a.get(), 16, 9) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(c.kbit_last_error_message()) == "kbit_memcpy: kind 9 is not a KBIT_MEMCPY_* value");
    CHECK(c.kbit_memcpy(nullptr, a.get(), 16, KBIT_MEMCPY_DEVICE_TO_HOST) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(c.kbit_last_error_message()) == "kbit_memcpy: dst is NULL");
    CHECK(c.kbit_memcpy(sink.data(), nullptr, 16, KBIT_MEMCPY_DEVICE_TO_HOST) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(c.kbit_last_error_message()) == "kbit_memcpy: src is NULL");
    CHECK(sink == std::vector<uint32_t>(4, 7));
    CHECK(c.kbit_memcpy(nullptr, nullptr, 0, KBIT_MEMCPY_HOST_TO_DEVICE) == KBIT_STATUS_SUCCESS);

    void* zero = reinterpret_cast<void*>(1);
    REQUIRE(c.kbit_device_malloc(&zero, 0) == KBIT_STATUS_SUCCESS);
    CHECK(zero == nullptr);
    CHECK(c.kbit_device_free(nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(c.kbit_stream_synchronize(nullptr) == KBIT_STATUS_SUCCESS);
}
