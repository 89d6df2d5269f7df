// Validation of one backend file by kbit_loader_open(): every fake variant's outcome, records and
// messages, the tables it yields, and the stubs that replace what a backend lacks.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <catch2/catch.hpp>

#include "fixture.h"

using namespace loader_test;

namespace {

// The four string functions of a core table are the loader's guards (they never return NULL).
bool is_string_function(const std::string& name) {
    return name == "kbit_backend_name" || name == "kbit_backend_info" || name == "kbit_status_string" ||
           name == "kbit_last_error_message";
}

// Every member of a table is the fake's own function of that name (one vendor per interface), but
// for the string functions: loader guards that forward to the fake's.
template <class Table>
void check_table_is_fakes(const Table* t, void* fake_handle, const char* const* names, size_t count) {
    auto* members = reinterpret_cast<void* const*>(reinterpret_cast<const char*>(t) + offsetof(kbit_core_table, kbit_backend_probe));
    for (size_t i = 0; i < count; ++i) {
        INFO(names[i]);
        if (is_string_function(names[i])) CHECK(members[i] != dlsym(fake_handle, names[i]));
        else CHECK(members[i] == dlsym(fake_handle, names[i]));
    }
}

#define KBIT_FN(minor, ret, name, params, args, variant) #name,
const char* const k4bit[] = {
#include "kbit_4bit.def"
};
const char* const k8bit[] = {
#include "kbit_8bit.def"
};
const char* const kOptim8[] = {
#include "kbit_optim8.def"
};
const char* const kCore[] = {
#include "kbit_core.def"
};
#undef KBIT_FN

static_assert(offsetof(kbit_4bit_table, cquantize_blockwise_fp32_fp4) == offsetof(kbit_core_table, kbit_backend_probe),
              "every table's functions start at the same offset");

// Opens the fake `variant` in scenario s, which must open (the test stops otherwise); returns its backend.
kbit_backend* open_ok(Scenario& s, const std::string& variant) {
    const Opened o = s.open_fake(variant);
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    return o.backend;
}

const kbit_loader_interface_record& iface(const Loader& l, kbit_backend* b, int32_t id) {
    return *l.api.kbit_loader_candidate_interface(l.api.kbit_loader_backend_candidate(b), id);
}

}  // namespace

TEST_CASE_METHOD(Scenario, "validation: a complete backend yields tables of its own functions", "[validation]") {
    kbit_backend* const b = open_ok(*this, "good");

    const kbit_loader_candidate* c = l.api.kbit_loader_backend_candidate(b);
    CHECK(c->size == sizeof(kbit_loader_candidate));
    CHECK(std::string(c->name) == "good");
    CHECK(std::string(c->path) == path);
    CHECK(c->source == KBIT_SOURCE_EXPLICIT);
    CHECK(c->stage == KBIT_STAGE_PROBED);
    CHECK(c->verdict == KBIT_VERDICT_USABLE);
    CHECK(c->score == 5);
    CHECK(std::string(c->reason).empty());
    const size_t counts[] = {std::size(kCore), std::size(k4bit), std::size(k8bit), std::size(kOptim8)};
    // The loader's own minors are its headers' (4bit 1.3, 8bit 1.1); the fake backend is at 4bit 1.3 and
    // 1.0 for the others (8bit 1.0 is an older minor).
    const uint32_t loader_minors[] = {KBIT_CORE_VERSION_MINOR, KBIT_4BIT_VERSION_MINOR, KBIT_8BIT_VERSION_MINOR,
                                      KBIT_OPTIM8_VERSION_MINOR};
    for (int32_t i = 0; i < KBIT_INTERFACE_COUNT; ++i) {
        const kbit_loader_interface_record& r = iface(l, b, i);
        INFO(l.api.kbit_loader_interface_name(i));
        CHECK(r.size == sizeof(kbit_loader_interface_record));
        CHECK(r.interface_id == i);
        CHECK(r.state == KBIT_INTERFACE_ACCEPTED);
        CHECK(r.version == KBIT_MAKE_VERSION(1, i == KBIT_INTERFACE_4BIT ? 3 : 0));
        CHECK(r.loader_version == KBIT_MAKE_VERSION(1, loader_minors[i]));
        CHECK(r.function_count == counts[i]);
        CHECK(r.missing_count == 0);
        CHECK(r.newer_count == 0);
        CHECK(std::string(r.message).empty());
    }
    CHECK(l.api.kbit_loader_candidate_interface(c, KBIT_INTERFACE_COUNT) == nullptr);
    CHECK(l.api.kbit_loader_candidate_interface(c, -1) == nullptr);

    const kbit_core_table* core = l.api.kbit_loader_core_table(b);
    const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(b);
    const kbit_8bit_table* t8 = l.api.kbit_loader_8bit_table(b);
    const kbit_optim8_table* o8 = l.api.kbit_loader_optim8_table(b);
    REQUIRE(core != nullptr);
    REQUIRE(t4 != nullptr);
    REQUIRE(t8 != nullptr);
    REQUIRE(o8 != nullptr);
    CHECK(core->size == sizeof(kbit_core_table));
    CHECK(t4->size == sizeof(kbit_4bit_table));
    CHECK(t8->size == sizeof(kbit_8bit_table));
    CHECK(o8->size == sizeof(kbit_optim8_table));
    CHECK(t4->version == KBIT_MAKE_VERSION(1, 3));
    CHECK(KBIT_TABLE_HAS(kbit_4bit_table, t4, kbit_dequantize_nf4_torchao_bf16));
    CHECK(KBIT_TABLE_HAS(kbit_4bit_table, t4, kbit_gemm_4bit_grouped));

    FakeControls fc(path);
    check_table_is_fakes(core, fc.handle, kCore, std::size(kCore));
    CHECK(std::string(core->kbit_backend_name()) == "good");
    CHECK(std::string(core->kbit_backend_info()) == "fake backend good for the loader tests");
    CHECK(std::string(core->kbit_status_string(KBIT_STATUS_SUCCESS)) == "FAKE_SUCCESS");
    check_table_is_fakes(t4, fc.handle, k4bit, std::size(k4bit));
    check_table_is_fakes(t8, fc.handle, k8bit, std::size(k8bit));
    check_table_is_fakes(o8, fc.handle, kOptim8, std::size(kOptim8));
    CHECK(call_with_zeros(t4->cquantize_blockwise_fp32_nf4) == KBIT_STATUS_SUCCESS);
    CHECK(std::string(fc.last_call()) == "cquantize_blockwise_fp32_nf4");
    CHECK(std::string(core->kbit_backend_name()) == "good");
    CHECK(l.api.kbit_loader_close(b) == KBIT_STATUS_SUCCESS);
}

TEST_CASE_METHOD(Scenario, "validation: a core-only backend is valid for the core interface", "[validation]") {
    kbit_backend* const b = open_ok(*this, "coreonly");
    CHECK(l.api.kbit_loader_core_table(b) != nullptr);
    CHECK(iface(l, b, KBIT_INTERFACE_4BIT).state == KBIT_INTERFACE_ABSENT);
    CHECK(iface(l, b, KBIT_INTERFACE_4BIT).version == 0);
    CHECK(l.api.kbit_loader_4bit_table(b) == nullptr);
    CHECK(l.last_error() == "kbit_loader_4bit_table: backend coreonly (" + path + ") does not export the 4bit interface");
    CHECK(l.api.kbit_loader_8bit_table(b) == nullptr);
    CHECK(l.last_error() == "kbit_loader_8bit_table: backend coreonly (" + path + ") does not export the 8bit interface");
    CHECK(l.api.kbit_loader_optim8_table(b) == nullptr);
    CHECK(l.last_error() ==
          "kbit_loader_optim8_table: backend coreonly (" + path + ") does not export the optim8 interface");
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: an interface of another major is rejected, the rest stays usable",
                 "[validation]") {
    kbit_backend* const b = open_ok(*this, "major2");
    const kbit_loader_interface_record& r4 = iface(l, b, KBIT_INTERFACE_4BIT);
    const std::string why = path + ": 4bit interface version 2.0 rejected: this loader expects major 1 (it implements 4bit 1.3)";
    CHECK(r4.state == KBIT_INTERFACE_REJECTED);
    CHECK(r4.version == KBIT_MAKE_VERSION(2, 0));
    CHECK(std::string(r4.message) == why);
    CHECK(l.api.kbit_loader_4bit_table(b) == nullptr);
    CHECK(l.last_error() == "kbit_loader_4bit_table: " + why);
    CHECK(iface(l, b, KBIT_INTERFACE_8BIT).state == KBIT_INTERFACE_ACCEPTED);
    const kbit_8bit_table* t8 = l.api.kbit_loader_8bit_table(b);
    REQUIRE(t8 != nullptr);
    CHECK(call_with_zeros(t8->cint8_vector_quant) == KBIT_STATUS_SUCCESS);
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: a core interface of another major rejects the file", "[validation]") {
    Opened o = open_fake("coremajor2");
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.backend == nullptr);
    CHECK(o.message == "kbit_loader_open: " + path +
                           ": core interface version 2.3 rejected: this loader expects major 1 (it implements core 1.0)");
}

TEST_CASE_METHOD(Scenario, "validation: a newer minor is accepted with every function the loader knows",
                 "[validation]") {
    kbit_backend* const b = open_ok(*this, "newminor");
    const kbit_loader_interface_record& r4 = iface(l, b, KBIT_INTERFACE_4BIT);
    CHECK(r4.state == KBIT_INTERFACE_ACCEPTED);
    CHECK(r4.version == KBIT_MAKE_VERSION(1, 7));
    CHECK(r4.missing_count == 0);
    CHECK(r4.newer_count == 0);
    const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(b);
    REQUIRE(t4 != nullptr);
    CHECK(t4->version == KBIT_MAKE_VERSION(1, 7));
    CHECK(t4->size == sizeof(kbit_4bit_table));
    FakeControls fc(path);
    check_table_is_fakes(t4, fc.handle, k4bit, std::size(k4bit));
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: a 4bit 1.1 backend (as CUDA and OpenCL) gets the stub of kbit_gemm_4bit_precision",
                 "[validation]") {
    kbit_backend* const b = open_ok(*this, "minor11");
    const kbit_loader_interface_record& r4 = iface(l, b, KBIT_INTERFACE_4BIT);
    CHECK(r4.state == KBIT_INTERFACE_ACCEPTED);
    CHECK(r4.version == KBIT_MAKE_VERSION(1, 1));
    CHECK(r4.newer_count == 1);
    CHECK(r4.missing_count == 0);
    const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(b);
    REQUIRE(t4 != nullptr);
    FakeControls fc(path);
    // The fake defines the function, but a 1.1 backend's symbol of a 1.2 function is never looked up.
    CHECK(dlsym(fc.handle, "kbit_gemm_4bit_precision") != nullptr);
    CHECK(call_with_zeros(t4->kbit_gemm_4bit_precision) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_gemm_4bit_precision: not implemented by backend minor11 (" + path +
                                "), whose 4bit interface is 1.1 (kbit_gemm_4bit_precision is 4bit 1.2)");
    // Its 1.1 function still reaches the backend.
    CHECK(reinterpret_cast<void*>(t4->kbit_gemm_4bit_grouped) == dlsym(fc.handle, "kbit_gemm_4bit_grouped"));
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: missing functions become stubs that name themselves and the backend",
                 "[validation]") {
    kbit_backend* const b = open_ok(*this, "missingfn");
    const kbit_loader_interface_record& r4 = iface(l, b, KBIT_INTERFACE_4BIT);
    CHECK(r4.state == KBIT_INTERFACE_ACCEPTED);
    CHECK(r4.missing_count == 2);
    CHECK(std::string(r4.message) ==
          "2 functions of 4bit 1.3 missing (now stubs): cdequantize_blockwise_fp32_nf4, kbit_dequantize_4bit");
    const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(b);
    const kbit_core_table* core = l.api.kbit_loader_core_table(b);
    REQUIRE(t4 != nullptr);
    FakeControls fc(path);
    CHECK(reinterpret_cast<void*>(t4->cdequantize_blockwise_fp32_nf4) != nullptr);
    CHECK(reinterpret_cast<void*>(t4->cdequantize_blockwise_fp32_nf4) != dlsym(fc.handle, "cdequantize_blockwise_fp32_nf4"));

    const std::string stub_message = "cdequantize_blockwise_fp32_nf4: not implemented by backend missingfn (" + path + ")";
    CHECK(call_with_zeros(t4->cdequantize_blockwise_fp32_nf4) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(std::string(core->kbit_last_error_message()) == stub_message);
    CHECK(l.last_error() == stub_message);
    CHECK(call_with_zeros(t4->kbit_dequantize_4bit) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(std::string(core->kbit_last_error_message()) ==
          "kbit_dequantize_4bit: not implemented by backend missingfn (" + path + ")");

    // The backend's own failure after the stub's is what the table's last-error reports, and back.
    fc.set_result(KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(call_with_zeros(t4->cquantize_blockwise_fp32_nf4) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(core->kbit_last_error_message()) == "cquantize_blockwise_fp32_nf4: fake missingfn failure (status 1)");
    CHECK(call_with_zeros(t4->cdequantize_blockwise_fp32_nf4) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(std::string(core->kbit_last_error_message()) == stub_message);
    fc.set_result(KBIT_STATUS_DEVICE_ERROR);
    CHECK(call_with_zeros(t4->cgemm_4bit_fp16) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(std::string(core->kbit_last_error_message()) == "cgemm_4bit_fp16: fake missingfn failure (status 2)");
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: a missing pointer-returning function becomes a stub returning NULL",
                 "[validation]") {
    kbit_backend* const b = open_ok(*this, "missingptr");
    const kbit_8bit_table* t8 = l.api.kbit_loader_8bit_table(b);
    REQUIRE(t8 != nullptr);
    CHECK(t8->get_context() == nullptr);
    CHECK(l.last_error() == "get_context: not implemented by backend missingptr (" + path + ")");
    CHECK(std::string(iface(l, b, KBIT_INTERFACE_8BIT).message) ==
          "1 function of 8bit 1.0 missing (now stubs): get_context");
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: missing core identity functions fall back to the loader's", "[validation]") {
    kbit_backend* const b = open_ok(*this, "noinfo");
    const kbit_core_table* core = l.api.kbit_loader_core_table(b);
    CHECK(std::string(core->kbit_backend_info()) == "backend noinfo (" + path + ") does not implement kbit_backend_info()");
    CHECK(std::string(core->kbit_last_error_message()).empty());
    CHECK(iface(l, b, KBIT_INTERFACE_CORE).missing_count == 2);
    CHECK(std::string(iface(l, b, KBIT_INTERFACE_CORE).message) ==
          "2 functions of core 1.0 missing (now stubs): kbit_backend_info, kbit_last_error_message");
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: rejected files and the stage and reason of each", "[validation]") {
    struct Case {
        const char* variant;
        kbit_status status;
        std::string why;
    };
    const Case cases[] = {
        {"probe0", KBIT_STATUS_NOT_SUPPORTED, "kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)"},
        {"probeneg", KBIT_STATUS_NOT_SUPPORTED, "kbit_backend_probe() returned -3: the backend cannot run on this machine (it says: fake backend probeneg for the loader tests)"},
        {"noversion", KBIT_STATUS_NOT_SUPPORTED, "does not export kbit_core_interface_version: not a kbit backend"},
        {"noprobe", KBIT_STATUS_NOT_SUPPORTED, "does not define kbit_backend_probe(), which every backend must export"},
        {"notelf", KBIT_STATUS_NOT_SUPPORTED, "not an ELF file"},
        {"crafted64", KBIT_STATUS_NOT_SUPPORTED, "built for " + foreign_machine() + ", this process is " + this_machine()},
        {"crafted32", KBIT_STATUS_NOT_SUPPORTED, "ELF class 32-bit, this process is 64-bit"},
#if KBIT_TEST_HAVE_CROSS
        {foreign_fake(), KBIT_STATUS_NOT_SUPPORTED, "built for " + foreign_machine() + ", this process is " + this_machine()},
        {"i386", KBIT_STATUS_NOT_SUPPORTED, "ELF class 32-bit, this process is 64-bit"},
#endif
    };
    for (const Case& c : cases) {
        INFO(c.variant);
        Opened o = open_fake(c.variant);
        CHECK(o.status == c.status);
        CHECK(o.backend == nullptr);
        CHECK(o.message == "kbit_loader_open: " + path + ": " + c.why);
    }
}

// A cut-short copy of a real backend: its segments end past the end of the file, which dlopen would
// map and then fault on (SIGBUS). It must be rejected before dlopen, by the file's own numbers.
TEST_CASE_METHOD(Scenario, "validation: a truncated backend file is rejected before dlopen", "[validation]") {
    std::ifstream in(fake("good"), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() > 3000);
    for (size_t keep : {size_t{100}, size_t{3000}, bytes.size() / 2, bytes.size() - 1}) {
        const std::string cut = dir.path() + "/libkbit_cut" + std::to_string(keep) + ".so";
        std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(keep));
        INFO(keep << " of " << bytes.size() << " bytes");
        Opened o = open_backend(l, cut.c_str());
        CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
        CHECK(o.backend == nullptr);
        CHECK_THAT(o.message, Catch::StartsWith("kbit_loader_open: " + cut + ": truncated"));
        CHECK_FALSE(is_mapped(cut));
    }
}

// Opening a FIFO for reading blocks until a writer comes: the loader must reject it without waiting.
TEST_CASE_METHOD(Scenario, "validation: a FIFO named as a backend is rejected at once", "[validation]") {
    const std::string fifo = dir.path() + "/libkbit_fifo.so";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    Opened o = open_backend(l, fifo.c_str());
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: " + fifo + ": not a regular file");
}

TEST_CASE_METHOD(Scenario, "validation: a file that dlopen cannot load is rejected with dlopen's reason",
                 "[validation]") {
    Opened o = open_fake("unresolved");
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK_THAT(o.message, Catch::StartsWith("kbit_loader_open: " + path + ": dlopen failed: ") &&
                              Catch::Contains("undefined symbol: fake_symbol_nobody_defines"));
}

TEST_CASE_METHOD(Scenario, "validation: a kbit loader is not a backend", "[validation]") {
    const std::string loader_copy = dir.add(KBIT_TEST_LOADER, "libkbit_loader.so");
    Opened o = open_backend(l, loader_copy.c_str());
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: " + loader_copy +
                           ": is a kbit loader (it exports kbit_loader_interface_version), not a backend");
}

TEST_CASE_METHOD(Scenario, "validation: only symbols the backend file defines count", "[validation]") {
    // deplinked links libkbit.so, which exports cquantize_blockwise_fp32_nf4 as a trampoline; the
    // fake itself lacks it. The loader must stub it instead of taking the dependency's symbol.
    kbit_backend* const b = open_ok(*this, "deplinked");
    const kbit_loader_interface_record& r4 = iface(l, b, KBIT_INTERFACE_4BIT);
    CHECK(r4.missing_count == 1);
    CHECK_THAT(std::string(r4.message),
               Catch::StartsWith("1 function of 4bit 1.3 missing (now stubs): cquantize_blockwise_fp32_nf4 (defined only by ") &&
                   Catch::EndsWith("/libkbit.so)"));
    const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(b);
    CHECK(call_with_zeros(t4->cquantize_blockwise_fp32_nf4) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "cquantize_blockwise_fp32_nf4: not implemented by backend deplinked (" + path + ")");
    l.api.kbit_loader_close(b);
}

TEST_CASE_METHOD(Scenario, "validation: bad arguments of the loader API", "[validation]") {
    CHECK(l.api.kbit_loader_open("cpu", nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(l.last_error() == "kbit_loader_open: out is NULL");
    Opened o = open_backend(l, "bad name!");
    CHECK(o.status == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(o.message ==
          "kbit_loader_open: 'bad name!' is neither a backend name (letters, digits, '_' and '-') nor a path (containing '/')");
    o = open_backend(l, "nonexistent");
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: no backend 'nonexistent': libkbit_nonexistent.so is not in " + dir.path());
    o = open_backend(l, "/nonexistent/libkbit_x.so");
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: /nonexistent/libkbit_x.so: cannot open: No such file or directory");
    o = open_backend(l, dir.path().c_str());
    CHECK(o.message == "kbit_loader_open: " + dir.path() + ": not a regular file");
    CHECK(l.api.kbit_loader_close(nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(l.api.kbit_loader_core_table(nullptr) == nullptr);
    CHECK(l.last_error() == "kbit_loader_core_table: backend is NULL");
    CHECK(l.api.kbit_loader_4bit_table(nullptr) == nullptr);
    CHECK(l.last_error() == "kbit_loader_4bit_table: backend is NULL");
    CHECK(l.api.kbit_loader_backend_candidate(nullptr) == nullptr);
    CHECK(l.last_error() == "kbit_loader_backend_candidate: backend is NULL");
    CHECK(l.api.kbit_loader_default(nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(l.last_error() == "kbit_loader_default: out is NULL");
    CHECK(l.api.kbit_loader_discover(nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(l.last_error() == "kbit_loader_discover: out is NULL");
}

TEST_CASE_METHOD(Sandbox, "validation: a backend of an older minor gets stubs for the newer functions",
                 "[validation]") {
    // kbit_next is a loader of a made-up 4-bit 1.4 with one extra function, kbit_next_minor_test_fn.
    const std::string good = dir.add(fake("good"));        // 4-bit 1.3: older than the loader
    const std::string newer = dir.add(fake("newminor"));   // 4-bit 1.7: should have it, but lacks it
    Loader l(dir.path(), KBIT_TEST_NEXT_LOADER);
    CHECK(l.sym<uint32_t (*)(void)>("kbit_4bit_interface_version")() == KBIT_MAKE_VERSION(1, 4));
    using NextFn = kbit_status (*)(int32_t);
    auto next_member = [](const kbit_4bit_table* t) {
        return *reinterpret_cast<const NextFn*>(reinterpret_cast<const char*>(t) + sizeof(kbit_4bit_table));
    };

    Opened o = open_backend(l, good.c_str());
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    const kbit_loader_interface_record& r4 = iface(l, o.backend, KBIT_INTERFACE_4BIT);
    CHECK(r4.state == KBIT_INTERFACE_ACCEPTED);
    CHECK(r4.version == KBIT_MAKE_VERSION(1, 3));
    CHECK(r4.loader_version == KBIT_MAKE_VERSION(1, 4));
    CHECK(r4.function_count == std::size(k4bit) + 1);
    CHECK(r4.newer_count == 1);
    CHECK(r4.missing_count == 0);
    const kbit_4bit_table* t4 = l.api.kbit_loader_4bit_table(o.backend);
    REQUIRE(t4 != nullptr);
    CHECK(t4->size == sizeof(kbit_4bit_table) + sizeof(void*));
    CHECK(t4->version == KBIT_MAKE_VERSION(1, 3));
    CHECK(next_member(t4)(7) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_next_minor_test_fn: not implemented by backend good (" + good +
                                "), whose 4bit interface is 1.3 (kbit_next_minor_test_fn is 4bit 1.4)");
    CHECK(call_with_zeros(t4->cquantize_blockwise_fp16_fp4) == KBIT_STATUS_SUCCESS);
    l.api.kbit_loader_close(o.backend);

    o = open_backend(l, newer.c_str());
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    const kbit_loader_interface_record& n4 = iface(l, o.backend, KBIT_INTERFACE_4BIT);
    CHECK(n4.newer_count == 0);
    CHECK(n4.missing_count == 1);
    CHECK(std::string(n4.message) == "1 function of 4bit 1.7 missing (now stubs): kbit_next_minor_test_fn");
    CHECK(next_member(l.api.kbit_loader_4bit_table(o.backend))(7) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_next_minor_test_fn: not implemented by backend newminor (" + newer + ")");
    l.api.kbit_loader_close(o.backend);

    // A 1.4 backend provides it; a 1.3 backend that defines it anyway does not (only its minor counts).
    const std::string next = dir.add(fake("nextminor"));
    o = open_backend(l, next.c_str());
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    CHECK(iface(l, o.backend, KBIT_INTERFACE_4BIT).newer_count == 0);
    CHECK(iface(l, o.backend, KBIT_INTERFACE_4BIT).missing_count == 0);
    CHECK(next_member(l.api.kbit_loader_4bit_table(o.backend))(7) == 1007);
    l.api.kbit_loader_close(o.backend);
    std::remove(next.c_str());
    const std::string ahead = dir.add(fake("aheadfn"));
    o = open_backend(l, ahead.c_str());
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    CHECK(iface(l, o.backend, KBIT_INTERFACE_4BIT).newer_count == 1);
    CHECK(next_member(l.api.kbit_loader_4bit_table(o.backend))(7) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_next_minor_test_fn: not implemented by backend aheadfn (" + ahead +
                                "), whose 4bit interface is 1.3 (kbit_next_minor_test_fn is 4bit 1.4)");
    l.api.kbit_loader_close(o.backend);
    std::remove(ahead.c_str());

    // The trampoline of the newer function, with the 1.3 backend as the default.
    std::remove(newer.c_str());
    auto trampoline = l.sym<NextFn>("kbit_next_minor_test_fn");
    CHECK(trampoline(1) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_next_minor_test_fn: not implemented by backend good (" + good +
                                "), whose 4bit interface is 1.3 (kbit_next_minor_test_fn is 4bit 1.4)");
}

TEST_CASE_METHOD(Scenario, "validation: string functions that return NULL reach no caller as NULL", "[validation]") {
    using Text = const char* (*)(void);
    // Before: NULL went through the tables and the trampolines, and `kbit info` aborted
    // (std::logic_error from std::string(NULL)).
    const std::string nullstrings = dir.add(fake("nullstrings"));
    const std::string info = "(kbit_backend_info() of " + nullstrings + " returned NULL)";
    auto text = [](const char* s) {
        REQUIRE(s != nullptr);
        return std::string(s);
    };
    SECTION("an explicit table") {
        Opened o = open_backend(l, nullstrings.c_str());
        REQUIRE(o.status == KBIT_STATUS_SUCCESS);
        const kbit_core_table* core = l.api.kbit_loader_core_table(o.backend);
        CHECK(text(core->kbit_backend_name()) == "nullstrings");
        CHECK(text(core->kbit_backend_info()) == info);
        CHECK(text(core->kbit_status_string(KBIT_STATUS_DEVICE_ERROR)) == "KBIT_STATUS_DEVICE_ERROR");
        CHECK(text(core->kbit_last_error_message()).empty());
        l.api.kbit_loader_close(o.backend);
    }
    SECTION("the trampolines") {
        CHECK(text(l.sym<Text>("kbit_backend_name")()) == "nullstrings");
        CHECK(text(l.sym<Text>("kbit_backend_info")()) == info);
        CHECK(text(l.sym<const char* (*)(kbit_status)>("kbit_status_string")(KBIT_STATUS_OUT_OF_MEMORY)) ==
              "KBIT_STATUS_OUT_OF_MEMORY");
        FakeControls fc(nullstrings);
        fc.set_result(KBIT_STATUS_DEVICE_ERROR);
        CHECK(call_with_zeros(l.sym<kbit_status (*)(float*, float*, float*, unsigned char*, int, const int)>(
                  "cquantize_blockwise_fp32_nf4")) == KBIT_STATUS_DEVICE_ERROR);
        CHECK(text(l.last_error_fn()).empty());
    }
    SECTION("kbit info") {
        CommandResult r = run_kbit(dir.path(), "info");
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK_THAT(r.output, Catch::Contains("    info:        " + info + "\n"));
        r = run_kbit(dir.path(), "info --json");
        CHECK(r.status == 0);
        CHECK_THAT(r.output, Catch::Contains("\"info\": \"" + info + "\""));
    }
}
