// Trampolines: libkbit.so's exports forward every interface function to the default backend, report
// the last failure whether it came from the loader or the backend, and stand in when there is none.
#include <dlfcn.h>

#include <thread>

#include <catch2/catch.hpp>

#include "fixture.h"

using namespace loader_test;

namespace {

using Text = const char* (*)(void);

// Calls every trampoline of one interface list with zero arguments and checks that the fake's
// function of the same name answered (the fake records the name of each call).
template <class Fn>
void call_all(const Loader& l, const FakeControls& fc, const char* name, Fn* /*type*/) {
    INFO(name);
    auto fn = l.sym<Fn*>(name);
    call_with_zeros(fn);
    CHECK(std::string(fc.last_call()) == name);
}

}  // namespace

TEST_CASE_METHOD(Scenario, "trampolines: every exported function forwards to the default backend's function",
                 "[trampolines]") {
    const std::string good = dir.add(fake("good"));
    CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "good");
    CHECK(std::string(l.sym<Text>("kbit_backend_info")()) == "fake backend good for the loader tests");
    CHECK(l.sym<int32_t (*)(void)>("kbit_backend_probe")() == 5);
    CHECK(std::string(l.sym<const char* (*)(kbit_status)>("kbit_status_string")(0)) == "FAKE_SUCCESS");
    FakeControls fc(good);
    // Every function of every interface but core (whose functions are the loader's own checks), and
    // the version symbols: the loader's own, it implements every interface.
#define KBIT_INTERFACE_BEGIN(name, NAME, ns)                                               \
    {                                                                                      \
        const bool core_interface = KBIT_INTERFACE_##NAME == KBIT_INTERFACE_CORE;          \
        CHECK(l.sym<uint32_t (*)(void)>("kbit_" #name "_interface_version")() ==           \
              KBIT_MAKE_VERSION(KBIT_##NAME##_VERSION_MAJOR, KBIT_##NAME##_VERSION_MINOR));
#define KBIT_INTERFACE_END(name, NAME, ns) }
#define KBIT_FN(minor, ret, name, params, args, variant) \
    if (!core_interface) call_all(l, fc, #name, static_cast<ret(*) params>(nullptr));
#include "kbit_all.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN
    // Device memory goes through the backend too.
    void* p = nullptr;
    CHECK(l.sym<kbit_status (*)(void**, size_t)>("kbit_device_malloc")(&p, 64) == KBIT_STATUS_SUCCESS);
    CHECK(p != nullptr);
    CHECK(l.sym<kbit_status (*)(void*)>("kbit_device_free")(p) == KBIT_STATUS_SUCCESS);
}

TEST_CASE_METHOD(Scenario, "trampolines: kbit_last_error_message reports the last failure, from the loader or the backend",
                 "[trampolines]") {
    const std::string missing = dir.add(fake("missingfn"));
    auto quantize = l.sym<kbit_status (*)(float*, float*, float*, unsigned char*, int, const int)>(
        "cquantize_blockwise_fp32_nf4");
    auto dequantize = l.sym<kbit_status (*)(float*, unsigned char*, float*, float*, int, const int, void*)>(
        "cdequantize_blockwise_fp32_nf4");
    CHECK(l.last_error().empty());  // before the first call: no backend chosen, nothing failed
    CHECK(quantize(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_SUCCESS);
    CHECK(l.last_error().empty());
    FakeControls fc(missing);

    const std::string stub = "cdequantize_blockwise_fp32_nf4: not implemented by backend missingfn (" + missing + ")";
    CHECK(dequantize(nullptr, nullptr, nullptr, nullptr, 64, 0, nullptr) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == stub);

    fc.set_result(KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(quantize(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(l.last_error() == "cquantize_blockwise_fp32_nf4: fake missingfn failure (status 1)");
    CHECK(l.sym<kbit_context* (*)(void)>("get_context")() == nullptr);  // a pointer result fails too
    CHECK(l.last_error() == "get_context: fake missingfn failure (status 1)");

    CHECK(l.api.kbit_loader_open("no such", nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(l.last_error() == "kbit_loader_open: out is NULL");

    CHECK(dequantize(nullptr, nullptr, nullptr, nullptr, 64, 0, nullptr) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == stub);

    // A successful call changes nothing; another thread has its own (empty) state.
    fc.set_result(KBIT_STATUS_SUCCESS);
    CHECK(quantize(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_SUCCESS);
    CHECK(l.last_error() == stub);
    std::string other;
    std::thread t([&] { other = l.last_error(); });
    t.join();
    CHECK(other.empty());
}

TEST_CASE_METHOD(Scenario, "trampolines: with no usable backend every function reports why", "[trampolines]") {
    dir.add(fake("probe0"));
    const std::string why = "no kbit backend is available: none of 1 candidate is usable";
    CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "none");
    CHECK(std::string(l.sym<Text>("kbit_backend_info")()) == why);
    CHECK(l.sym<int32_t (*)(void)>("kbit_backend_probe")() == 0);
    CHECK(std::string(l.sym<const char* (*)(kbit_status)>("kbit_status_string")(KBIT_STATUS_INVALID_ARGUMENT)) ==
          "KBIT_STATUS_INVALID_ARGUMENT");
    CHECK(l.sym<kbit_status (*)(void**, size_t)>("kbit_device_malloc")(nullptr, 1) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_device_malloc: " + why);
    CHECK(l.sym<void* (*)(size_t)>("cget_managed_ptr")(16) == nullptr);
    CHECK(l.last_error() == "cget_managed_ptr: " + why);
    CHECK(call_with_zeros(l.sym<kbit_status (*)(int32_t, int32_t, const void*, float*, uint8_t*, int64_t, int64_t, void*)>(
              "kbit_quantize_4bit")) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_quantize_4bit: " + why);
    kbit_backend* b = reinterpret_cast<kbit_backend*>(1);
    CHECK(l.api.kbit_loader_default(&b) == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(b == nullptr);
    CHECK(l.last_error() == "kbit_loader_default: no default backend: none of 1 candidate is usable");
}

TEST_CASE_METHOD(Scenario, "trampolines: KBIT_BACKEND that cannot be used is reported, not replaced", "[trampolines]") {
    dir.add(fake("good"));
    const std::string probe0 = dir.add(fake("probe0"));
    env.set("KBIT_BACKEND", "probe0");
    CHECK(l.sym<kbit_status (*)(void*)>("kbit_stream_synchronize")(nullptr) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_stream_synchronize: no kbit backend is available: KBIT_BACKEND=probe0: " + probe0 +
                                ": kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)");
}

TEST_CASE_METHOD(Scenario, "trampolines: functions of interfaces the default backend lacks or rejects are stubs",
                 "[trampolines]") {
    // What 4-bit quantize function `name` reports through its trampoline (and that it is a stub).
    auto stub_error = [&](const char* name) {
        CHECK(call_with_zeros(l.sym<kbit_status (*)(float*, float*, float*, unsigned char*, int, const int)>(name)) ==
              KBIT_STATUS_NOT_IMPLEMENTED);
        return l.last_error();
    };
    SECTION("absent interface") {
        const std::string coreonly = dir.add(fake("coreonly"));
        CHECK(stub_error("cquantize_blockwise_bf16_fp4") ==
              "cquantize_blockwise_bf16_fp4: not implemented by backend coreonly (" + coreonly +
                  "), which does not export the 4bit interface");
        CHECK(l.sym<void* (*)(size_t)>("cget_managed_ptr")(8) == nullptr);
        CHECK(l.last_error() ==
              "cget_managed_ptr: not implemented by backend coreonly (" + coreonly + "), which does not export the optim8 interface");
    }
    SECTION("rejected interface") {
        const std::string major2 = dir.add(fake("major2"));
        CHECK(stub_error("cquantize_blockwise_fp32_nf4") ==
              "cquantize_blockwise_fp32_nf4: not implemented by backend major2 (" + major2 +
                  "), whose 4bit interface 2.0 was rejected (this loader expects major 1)");
    }
}

TEST_CASE_METHOD(Scenario, "trampolines: the default backend is chosen once and owned by the loader", "[trampolines]") {
    dir.add(fake("good"));
    const std::string best = dir.add(fake("best"));
    kbit_backend* d1 = nullptr;
    kbit_backend* d2 = nullptr;
    REQUIRE(l.api.kbit_loader_default(&d1) == KBIT_STATUS_SUCCESS);
    CHECK(std::string(l.api.kbit_loader_backend_candidate(d1)->path) == best);
    env.set("KBIT_BACKEND", "good");  // read only when the choice is made: too late now
    REQUIRE(l.api.kbit_loader_default(&d2) == KBIT_STATUS_SUCCESS);
    CHECK(d1 == d2);
    CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "best");
    CHECK(l.api.kbit_loader_close(d1) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(l.last_error() == "kbit_loader_close: the default backend belongs to the loader and is never closed");
    // Its tables hold the backend's own functions; an explicit handle is independent of it.
    FakeControls fc(best);
    CHECK(reinterpret_cast<void*>(l.api.kbit_loader_4bit_table(d1)->cgemm_4bit_bf16) == dlsym(fc.handle, "cgemm_4bit_bf16"));
    Opened o = open_backend(l, "best");
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    CHECK(o.backend != d1);
    CHECK(l.api.kbit_loader_close(o.backend) == KBIT_STATUS_SUCCESS);
    CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "best");
}

TEST_CASE_METHOD(Scenario, "trampolines: a probe that calls back into libkbit.so before the default is chosen gets a clear status",
                 "[trampolines]") {
    // Before: the trampoline re-entered the choice's function-local static and C++ terminated the
    // process (recursive_init_error); kbit_loader_open(NULL) from a probe recursed without end.
    const std::string reenter = dir.add(fake("reenter"));
    const std::string early =
        "called from a backend's probe, constructor or destructor before libkbit.so has chosen its default backend";
    const std::string validating =
        "called from a backend's probe, constructor or destructor (libkbit.so would validate backends again, recursively)";
    const std::string expected =
        "kbit_backend_name: (choosing)\n"
        "kbit_backend_info: " + early + "\n"
        "kbit_device_malloc: KBIT_STATUS_NOT_SUPPORTED: kbit_device_malloc: " + early + "\n"
        "kbit_loader_default: 100: kbit_loader_default: " + early + "\n"
        "kbit_loader_open: 100: kbit_loader_open: " + validating + "\n"
        "kbit_loader_discover: 100: kbit_loader_discover: " + validating + "\n";
    SECTION("during the choice (first trampoline call)") {
        CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "reenter");
        FakeControls fc(reenter);
        CHECK(fc.probe_calls() == 1);
        CHECK(reinterpret_cast<Text>(dlsym(fc.handle, "kbit_fake_reentry"))() == expected);
    }
    SECTION("during kbit_loader_discover(), then the choice") {
        kbit_loader_report* r = nullptr;
        REQUIRE(l.api.kbit_loader_discover(&r) == KBIT_STATUS_SUCCESS);
        CHECK(l.api.kbit_loader_report_default(r) != nullptr);
        l.api.kbit_loader_report_free(r);
        CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "reenter");
        FakeControls fc(reenter);  // loaded again by the choice
        CHECK(reinterpret_cast<Text>(dlsym(fc.handle, "kbit_fake_reentry"))() == expected);
    }
    // Once chosen, the trampolines forward as usual.
    void* p = nullptr;
    CHECK(l.sym<kbit_status (*)(void**, size_t)>("kbit_device_malloc")(&p, 8) == KBIT_STATUS_SUCCESS);
    l.sym<kbit_status (*)(void*)>("kbit_device_free")(p);
}

TEST_CASE_METHOD(Scenario, "trampolines: a destructor that calls back into libkbit.so while the default is chosen gets a stand-in",
                 "[trampolines]") {
    // The choice unloads the candidates it does not keep; before, a destructor's trampoline call
    // re-entered the choice (recursive_init_error, terminate).
    dir.add(fake("best"));
    const std::string other = dir.add(fake("dtorreenter"));
    StderrCapture err;
    CHECK(std::string(l.sym<Text>("kbit_backend_name")()) == "best");
    CHECK(err.finish() == "destructor: kbit_backend_name: (choosing)\n");
    CHECK_FALSE(is_mapped(other));
}
