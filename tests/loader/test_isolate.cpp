// Isolation: kbit_loader_discover() with KBIT_LOADER_ISOLATE, and `kbit info --isolate`, validate each
// candidate in a child process, so backends whose constructors or probe abort, crash, exit or hang
// are reported with what happened, in bounded time, while the others still count.
#include <signal.h>

#include <chrono>

#include <catch2/catch.hpp>

#include "fixture.h"

using namespace loader_test;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // a crash ends in the sanitizer's report and exit status instead
#else
constexpr bool kSanitized = false;
#endif

constexpr int kSeconds = 3;  // the children's time limit here

struct Hostile {
    const char* name;
    const char* ending;   // how the child ended
    const char* running;  // what it was running
    int32_t stage;        // the last stage it reached
};

const Hostile kHostile[] = {
    {"abort", "killed by signal 6 (SIGABRT)", "in kbit_backend_probe()", KBIT_STAGE_RESOLVED},
    {"ctorabort", "killed by signal 6 (SIGABRT)", "in dlopen() (the file's ELF constructors)", KBIT_STAGE_FILE_CHECKED},
    {"exit3", "exited with status 3", "in kbit_backend_probe()", KBIT_STAGE_RESOLVED},
    {"hang", "timed out after 3 s", "in kbit_backend_probe()", KBIT_STAGE_RESOLVED},
    {"segv", "killed by signal 11 (SIGSEGV)", "in kbit_backend_probe()", KBIT_STAGE_RESOLVED},
};

std::string reason(const std::string& path, const Hostile& h) {
    return path + ": " + h.ending + " " + h.running + " (validated in a child process)";
}

void check_reason(const std::string& actual, const std::string& path, const Hostile& h) {
    if (kSanitized && std::string(h.name) != "hang")
        CHECK_THAT(actual, Catch::StartsWith(path + ": ") &&
                               Catch::EndsWith(std::string(" ") + h.running + " (validated in a child process)"));
    else
        CHECK(actual == reason(path, h));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE_METHOD(Scenario, "isolate: kbit_loader_discover() with KBIT_LOADER_ISOLATE reports what each hostile candidate did",
                 "[isolate]") {
    const std::string good = dir.add(fake("good"));
    const std::string probe0 = dir.add(fake("probe0"));
    for (const Hostile& h : kHostile) dir.add(crashing_fake(h.name));
    env.set("KBIT_LOADER_ISOLATE", std::to_string(kSeconds));
    const auto start = std::chrono::steady_clock::now();
    kbit_loader_report* r = nullptr;
    REQUIRE(l.api.kbit_loader_discover(&r) == KBIT_STATUS_SUCCESS);
    CHECK(seconds_since(start) < 4 * kSeconds);  // one time limit (the hang), not one per candidate
    REQUIRE(l.api.kbit_loader_report_candidate_count(r) == 7);
    auto at = [&](size_t i) { return l.api.kbit_loader_report_candidate(r, i); };
    // Sorted by name: abort ctorabort exit3 good hang probe0 segv.
    const size_t hostile_at[] = {0, 1, 2, 4, 6};
    for (size_t k = 0; k < std::size(kHostile); ++k) {
        const Hostile& h = kHostile[k];
        const kbit_loader_candidate* c = at(hostile_at[k]);
        INFO(h.name);
        CHECK(std::string(c->name) == h.name);
        CHECK(c->verdict == KBIT_VERDICT_REJECTED);
        CHECK(c->stage == h.stage);
        CHECK(c->score == -1);
        check_reason(c->reason, dir.path() + "/libkbit_" + h.name + ".so", h);
        CHECK_FALSE(is_mapped(c->path));  // never loaded in this process
        // What the child had found out before it ended came back too.
        const kbit_loader_interface_record* core = l.api.kbit_loader_candidate_interface(c, KBIT_INTERFACE_CORE);
        CHECK(core->state == (h.stage >= KBIT_STAGE_VERSIONS_CHECKED ? KBIT_INTERFACE_ACCEPTED : KBIT_INTERFACE_ABSENT));
    }
    // The records of the others came back whole.
    const kbit_loader_candidate* g = at(3);
    CHECK(g->verdict == KBIT_VERDICT_USABLE);
    CHECK(g->stage == KBIT_STAGE_PROBED);
    CHECK(g->score == 5);
    const kbit_loader_interface_record* g4 = l.api.kbit_loader_candidate_interface(g, KBIT_INTERFACE_4BIT);
    CHECK(g4->state == KBIT_INTERFACE_ACCEPTED);
    CHECK(g4->version == KBIT_MAKE_VERSION(1, 3));
    CHECK(std::string(at(5)->reason) == probe0 + ": kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)");
    CHECK(at(5)->score == 0);
    CHECK(l.api.kbit_loader_report_default(r) == g);
    CHECK(std::string(l.api.kbit_loader_report_summary(r)) ==
          "default: good (" + good + "), probe score 5, the highest of 1 usable candidate");
    l.api.kbit_loader_report_free(r);
    CHECK_FALSE(is_mapped(good));
}

TEST_CASE_METHOD(Sandbox, "isolate: kbit info --isolate lists each bad file with its reason, in bounded time",
                 "[isolate]") {
    const std::string good = dir.add(fake("good"));
    for (const Hostile& h : kHostile) dir.add(crashing_fake(h.name));
    auto start = std::chrono::steady_clock::now();
    CommandResult info = run_kbit(dir.path(), "info --isolate=" + std::to_string(kSeconds));
    CHECK(seconds_since(start) < 4 * kSeconds);
    INFO(info.output);
    CHECK(info.status == 0);  // a usable backend remains
    for (const Hostile& h : kHostile) {
        const std::string path = dir.path() + "/libkbit_" + h.name + ".so";
        if (!kSanitized) CHECK_THAT(info.output, Catch::Contains("    reason:      " + reason(path, h) + "\n"));
        CHECK_THAT(info.output, Catch::Contains("  " + std::string(h.name) + "\n    file:        " + path + "\n"));
    }
    CHECK_THAT(info.output, Catch::Contains("    status:      usable, probe score 5\n"));
    CHECK_THAT(info.output, Catch::Contains("    info:        fake backend good for the loader tests\n"));
    CHECK_THAT(info.output, Catch::Contains("\ndefault: good (" + good + "), probe score 5, the highest of 1 usable candidate\n"));

    // No usable backend (KBIT_BACKEND names a crashing one): exit 1, as without --isolate.
    TempDir other;
    const std::string segv = other.add(crashing_fake("segv"));
    other.add(fake("good"));
    env.set("KBIT_BACKEND", segv);
    info = run_kbit(other.path(), "info --isolate");
    INFO(info.output);
    CHECK(info.status == 1);
    if (!kSanitized)
        CHECK_THAT(info.output, Catch::EndsWith("\nno default backend: KBIT_BACKEND=" + segv + ": " + reason(segv, kHostile[4]) + "\n"));
}

TEST_CASE_METHOD(Sandbox, "isolate: without --isolate a probe that aborts takes kbit info down", "[isolate]") {
    // What the loader cannot protect a process against (docs/loader.md): vendor code runs in it.
    dir.add(crashing_fake("abort"));
    const CommandResult info = run_kbit(dir.path(), "info");
    CHECK(info.status == 128 + SIGABRT);
    CHECK(run_kbit(dir.path(), "info --isolate=x").status == 2);
}
