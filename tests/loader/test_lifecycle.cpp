// Lifecycle: repeated load/unload of the loader and its backends, concurrent first use of the
// trampolines, concurrent explicit opens, and the limit on backends with stubs open at once.
#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fixture.h"

using namespace loader_test;

namespace {

// Starts `n` threads that all run `body(i)` at the same moment, and joins them.
template <class F>
void run_together(int n, F body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (!go.load()) std::this_thread::yield();
            body(i);
        });
    while (ready.load() < n) std::this_thread::yield();
    go.store(true);
    for (auto& t : threads) t.join();
}

}  // namespace

TEST_CASE_METHOD(Sandbox, "lifecycle: loading and unloading the loader and its backends leaves nothing behind",
                 "[lifecycle]") {
    // Explicit handles and discovery unload what they opened; the default backend stays loaded for
    // the life of the process by design (calls at exit keep working), once, however often the
    // loader itself is loaded and unloaded.
    const std::string good = dir.add(fake("good"));
    const std::string missing = dir.add(fake("missingfn"));
    const std::string loader_path = dir.path() + "/libkbit.so";
    int good_mappings = -1;
    for (int round = 0; round < 40; ++round) {
        INFO("round " << round);
        {
            Loader l(dir.path());
            Opened o = open_backend(l, missing.c_str());  // a backend with stubs: takes a slot
            REQUIRE(o.status == KBIT_STATUS_SUCCESS);
            CHECK(call_with_zeros(l.api.kbit_loader_4bit_table(o.backend)->kbit_dequantize_4bit) ==
                  KBIT_STATUS_NOT_IMPLEMENTED);
            CHECK(l.api.kbit_loader_close(o.backend) == KBIT_STATUS_SUCCESS);
            kbit_loader_report* r = nullptr;
            REQUIRE(l.api.kbit_loader_discover(&r) == KBIT_STATUS_SUCCESS);
            CHECK(l.api.kbit_loader_report_candidate_count(r) == 2);
            l.api.kbit_loader_report_free(r);
            CHECK_FALSE(is_mapped(missing));
            CHECK(std::string(l.sym<const char* (*)(void)>("kbit_backend_name")()) == "good");  // the default
        }
        CHECK_FALSE(is_mapped(missing));
        CHECK_FALSE(is_mapped(loader_path));
        if (good_mappings < 0) good_mappings = mappings(good);
        CHECK(good_mappings > 0);
        CHECK(mappings(good) == good_mappings);
    }
}

TEST_CASE_METHOD(Scenario, "lifecycle: concurrent first use chooses the default once", "[lifecycle]") {
    const std::string good = dir.add(fake("good"));
    auto name = l.sym<const char* (*)(void)>("kbit_backend_name");
    auto quantize = l.sym<kbit_status (*)(float*, float*, float*, unsigned char*, int, const int)>(
        "cquantize_blockwise_fp32_nf4");
    constexpr int kThreads = 32;
    std::vector<std::string> names(kThreads);
    std::vector<kbit_status> statuses(kThreads, -1);
    run_together(kThreads, [&](int i) {
        if (i % 2 == 0) {
            statuses[i] = quantize(nullptr, nullptr, nullptr, nullptr, 64, 0);
            names[i] = name();
        } else {
            names[i] = name();
            statuses[i] = quantize(nullptr, nullptr, nullptr, nullptr, 64, 0);
        }
    });
    for (int i = 0; i < kThreads; ++i) {
        CHECK(names[i] == "good");
        CHECK(statuses[i] == KBIT_STATUS_SUCCESS);
    }
    FakeControls fc(good);
    CHECK(fc.probe_calls() == 1);
}

TEST_CASE_METHOD(Scenario, "lifecycle: concurrent explicit opens and closes", "[lifecycle]") {
    const std::string good = dir.add(fake("good"));
    const std::string missing = dir.add(fake("missingfn"));
    std::atomic<int> failures{0};
    run_together(8, [&](int i) {
        for (int k = 0; k < 25; ++k) {
            const std::string& path = (i + k) % 2 ? good : missing;
            kbit_backend* b = nullptr;
            if (l.api.kbit_loader_open(path.c_str(), &b) != KBIT_STATUS_SUCCESS) {
                ++failures;
                continue;
            }
            const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(b);
            const kbit_status expect = path == good ? KBIT_STATUS_SUCCESS : KBIT_STATUS_NOT_IMPLEMENTED;
            if (call_with_zeros(t4->kbit_dequantize_4bit) != expect) ++failures;
            if (path == missing &&
                l.last_error() != "kbit_dequantize_4bit: not implemented by backend missingfn (" + missing + ")")
                ++failures;
            l.api.kbit_loader_close(b);
        }
    });
    CHECK(failures.load() == 0);
}

TEST_CASE_METHOD(Scenario, "lifecycle: at most 16 backend files with stubs are open at once", "[lifecycle]") {
    std::vector<std::string> files;
    for (int i = 0; i < 17; ++i) files.push_back(dir.add(fake("coreonly"), "libkbit_c" + std::to_string(i) + ".so"));
    std::vector<kbit_backend*> open;
    for (int i = 0; i < 16; ++i) {
        Opened o = open_backend(l, files[i].c_str());
        REQUIRE(o.status == KBIT_STATUS_SUCCESS);
        open.push_back(o.backend);
    }
    // The same file again shares its identity: still fine.
    Opened again = open_backend(l, files[0].c_str());
    REQUIRE(again.status == KBIT_STATUS_SUCCESS);
    Opened o = open_backend(l, files[16].c_str());
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: " + files[16] +
                           ": cannot be opened now: 16 other backend files with missing functions are open (close one first)");
    // A backend without stubs needs no identity.
    const std::string good = dir.add(fake("good"));
    Opened g = open_backend(l, good.c_str());
    CHECK(g.status == KBIT_STATUS_SUCCESS);
    l.api.kbit_loader_close(g.backend);
    // Each stub still names its own backend.
    CHECK(l.api.kbit_loader_core_table(open[3]) != nullptr);
    l.api.kbit_loader_close(again.backend);
    l.api.kbit_loader_close(open[5]);
    o = open_backend(l, files[16].c_str());
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    CHECK(std::string(l.api.kbit_loader_core_table(o.backend)->kbit_backend_name()) == "coreonly");
    l.api.kbit_loader_close(o.backend);
    for (kbit_backend* b : open)
        if (b != open[5]) l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "lifecycle: stubs of two open backends name each their own", "[lifecycle]") {
    const std::string a = dir.add(fake("missingfn"));
    const std::string b = dir.add(fake("missingfn"), "libkbit_other.so");
    Opened oa = open_backend(l, a.c_str());
    Opened ob = open_backend(l, b.c_str());
    REQUIRE(oa.status == KBIT_STATUS_SUCCESS);
    REQUIRE(ob.status == KBIT_STATUS_SUCCESS);
    const kbit_4bit_table* ta = l.api.kbit_loader_4bit_table(oa.backend);
    const kbit_4bit_table* tb = l.api.kbit_loader_4bit_table(ob.backend);
    CHECK(call_with_zeros(tb->kbit_dequantize_4bit) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_dequantize_4bit: not implemented by backend other (" + b + ")");
    CHECK(call_with_zeros(ta->kbit_dequantize_4bit) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_dequantize_4bit: not implemented by backend missingfn (" + a + ")");
    CHECK(std::string(l.api.kbit_loader_core_table(ob.backend)->kbit_last_error_message()).find("missingfn (" + a) ==
          std::string::npos);
    l.api.kbit_loader_close(oa.backend);
    l.api.kbit_loader_close(ob.backend);
}
