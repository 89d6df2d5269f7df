// The kbit conformance suite: checks one backend, opened through the loader libkbit.so
// (--backend cpu|cuda|NAME|PATH), against the scalar reference, golden vectors recorded from
// bitsandbytes, and the error rules of the ABI. --trampolines calls every function through
// libkbit.so's own exports instead (the backend then becomes libkbit.so's default).
// --function NAME runs the test cases that call the exported function NAME, --list-functions counts
// them for every function, --check-function-tags proves the counts (functions.h).
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <cstdio>

#include <catch2/catch.hpp>

#include "backend.h"
#include "functions.h"
#include "golden.h"
#include "kbit/kbit_loader.h"

namespace {

std::string version(uint32_t x) {
    return x ? std::to_string(KBIT_VERSION_MAJOR_OF(x)) + "." + std::to_string(KBIT_VERSION_MINOR_OF(x))
             : std::string("absent");
}

// Warns about every function the loader had to replace with a stub: each will fail its tests.
void report_stubs(const std::string& path) {
    kbit_backend* b = nullptr;
    if (kbit_loader_open(path.c_str(), &b) != KBIT_STATUS_SUCCESS) return;
    const kbit_loader_candidate* c = kbit_loader_backend_candidate(b);
    for (int32_t i = 0; i < KBIT_INTERFACE_COUNT; ++i) {
        const kbit_loader_interface_record* r = kbit_loader_candidate_interface(c, i);
        if (r->state == KBIT_INTERFACE_REJECTED || r->missing_count != 0)
            std::printf("warning: %s: %s\n", kbit_loader_interface_name(i), r->message);
        else if (r->newer_count != 0)
            std::printf("note: %s %s: %u functions of later minors are stubs\n", kbit_loader_interface_name(i),
                        version(r->version).c_str(), r->newer_count);
    }
    kbit_loader_close(b);
}

// "avx512 (detected avx512, KBIT_CPU_ISA=avx512)" from a backend info string that names its
// kernels ("..., kernels: avx512 (detected ...), ..."); empty if it names none.
std::string kernels_of(const std::string& info) {
    const auto at = info.find("kernels: ");
    if (at == std::string::npos) return {};
    const auto begin = at + 9;
    const auto close = info.find(')', begin);
    return info.substr(begin, close == std::string::npos ? std::string::npos : close + 1 - begin);
}

// Adds ~[absent-interface] to every alternative of every test spec ("a,b" is a or b; "ab" is a and b).
void exclude_absent(std::vector<std::string>& specs) {
    const std::string exclusion = "~[absent-interface]";
    for (std::string& spec : specs) {
        std::string out;
        size_t begin = 0;
        for (size_t comma; (comma = spec.find(',', begin)) != std::string::npos; begin = comma + 1)
            out += spec.substr(begin, comma - begin) + exclusion + ",";
        spec = out + spec.substr(begin) + exclusion;
    }
}

// Exit status for "this leg cannot run here" (ctest SKIP_RETURN_CODE).
constexpr int kSkipped = 77;

}  // namespace

int main(int argc, char** argv) {
    Catch::Session session;
    std::string spec;
    std::string required_kernels;
    bool trampolines = false;
    std::string function;
    bool list_functions = false;
    bool check_tags = false;
    using Catch::clara::Opt;
    session.cli(session.cli() |
                Opt(spec, "name|path")["--backend"]("backend to test: cpu, cuda, a vendor name, or a .so path "
                                                    "(default: cpu; with --trampolines: libkbit.so's default)") |
                Opt(trampolines)["--trampolines"]("call every function through libkbit.so's exports") |
                Opt(required_kernels, "isa")["--require-kernels"](
                    "exit 77 (skipped) unless the backend's info says it runs these kernels (ref, avx2, avx512, avx512vbmi; AArch64: neon, sve, sve2)") |
                Opt(function, "name")["--function"]("run the test cases that call this exported function (tag [fn:NAME])") |
                Opt(list_functions)["--list-functions"](
                    "list the backend's functions with the number of test cases that call each; exit 1 if one has none") |
                Opt(check_tags)["--check-function-tags"](
                    "fail unless every test case that runs calls exactly the functions its [fn:] tags name"));
    if (int rc = session.applyCommandLine(argc, argv)) return rc;
    // A test filter that matches nothing (a mistyped tag) fails the run instead of passing it empty.
    auto& config = session.configData();
    config.warnings = static_cast<Catch::WarnAbout::What>(config.warnings | Catch::WarnAbout::NoTests);
    if (spec.empty() && !trampolines) spec = "cpu";
    std::string error;
    if (!kbit_test::settle_function_tags(&error)) {
        std::fprintf(stderr, "kbit conformance: %s\n", error.c_str());
        return 2;
    }
    if (!kbit_test::open_backend(spec, &error, trampolines)) {
        std::fprintf(stderr, "kbit conformance: cannot use backend '%s': %s\n", spec.c_str(), error.c_str());
        return 2;
    }
    const auto& b = kbit_test::backend();
    // First line: the kernels this run covers, so that a log shows what was tested.
    const std::string kernels = kernels_of(b.fns_core.kbit_backend_info());
    if (!kernels.empty()) std::printf("kernels: %s\n", kernels.c_str());
    if (!required_kernels.empty() && kernels.compare(0, required_kernels.size() + 1, required_kernels + " ") != 0) {
        std::printf("SKIPPED: --require-kernels %s, but the backend runs %s: the CPU or KBIT_CPU_ISA caps them\n",
                    required_kernels.c_str(), kernels.empty() ? "unnamed kernels" : kernels.c_str());
        kbit_test::close_backend();
        return kSkipped;
    }
    std::printf("backend %s (%s)%s: %s\ninterfaces:", b.fns_core.kbit_backend_name(), b.path.c_str(),
                trampolines ? " through libkbit.so's trampolines" : "", b.fns_core.kbit_backend_info());
    const char* separator = " ";
#define KBIT_INTERFACE(name, NAME, ns)                                                                    \
    std::printf("%s%s %s", separator, #name, version(b.version[KBIT_INTERFACE_##NAME]).c_str()); \
    separator = ", ";
#include "interfaces.def"
#undef KBIT_INTERFACE
    std::printf(", bnb_cpu %s\n", b.has_bnb_cpu() ? version(b.bnb_cpu_version).c_str() : "absent (its cases are skipped)");
    report_stubs(b.path);
    // Where the golden test cases read their vectors (golden.h: an installed suite's own copy).
    std::printf("golden vectors: %s\n", kbit_test::golden_dir().c_str());
    if (const int hidden = kbit_test::hide_cases_of_absent_interfaces()) {
        std::printf("skipped: %d test cases that call functions of absent interfaces (tag [absent-interface])\n", hidden);
        exclude_absent(config.testsOrTags);
    }
    if (list_functions) {
        const int rc = kbit_test::list_functions();
        kbit_test::close_backend();
        return rc;
    }
    if (!function.empty()) {
        std::string tag;
        if (!config.testsOrTags.empty()) error = "--function cannot be combined with a test spec: put the tag [fn:" + function + "] in it";
        else if (kbit_test::function_test_spec(function, &tag, &error)) config.testsOrTags.push_back(tag);
        if (!error.empty()) {
            std::fprintf(stderr, "kbit conformance: %s\n", error.c_str());
            kbit_test::close_backend();
            return 2;
        }
    }
    if (check_tags) kbit_test::check_function_tags();
    const int failed = session.run();
    const int mismatches = kbit_test::check_function_tags_result();
    kbit_test::close_backend();
    return std::min(failed + mismatches, 255);  // an exit status wraps at 256
}
