// Discovery: the search order (KBIT_BACKEND > KBIT_BACKEND_PATH > the loader's directory, never the
// current directory), shadowing, the default choice, the report API and KBIT_LOADER_DEBUG output.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "fixture.h"

using namespace loader_test;

namespace {

// Owns a report of one loader copy.
struct Report {
    const Loader& l;
    kbit_loader_report* r = nullptr;
    explicit Report(const Loader& loader) : l(loader) { REQUIRE(l.api.kbit_loader_discover(&r) == KBIT_STATUS_SUCCESS); }
    ~Report() { l.api.kbit_loader_report_free(r); }
    size_t count() const { return l.api.kbit_loader_report_candidate_count(r); }
    const kbit_loader_candidate& at(size_t i) const { return *l.api.kbit_loader_report_candidate(r, i); }
    std::string summary() const { return l.api.kbit_loader_report_summary(r); }
    const kbit_loader_candidate* chosen() const { return l.api.kbit_loader_report_default(r); }
    std::vector<std::pair<std::string, int32_t>> search() const {
        std::vector<std::pair<std::string, int32_t>> entries;
        for (size_t i = 0; i < l.api.kbit_loader_report_search_count(r); ++i) {
            int32_t source = -1;
            const char* text = l.api.kbit_loader_report_search_entry(r, i, &source);
            entries.emplace_back(text, source);
        }
        return entries;
    }
};

using Entries = std::vector<std::pair<std::string, int32_t>>;

}  // namespace

TEST_CASE_METHOD(Scenario, "discovery: nothing to find", "[discovery]") {
    Report rep(l);
    CHECK(rep.search() == Entries{{dir.path(), KBIT_SOURCE_LOADER_DIRECTORY}});
    CHECK(rep.count() == 0);
    CHECK(rep.chosen() == nullptr);
    CHECK(rep.summary() == "no default backend: no libkbit_<name>.so in " + dir.path());
    CHECK(std::string(l.api.kbit_loader_library_path()) == l.path);
}

TEST_CASE_METHOD(Scenario, "discovery: every candidate with its stage, and one bad file never hides the others",
                 "[discovery]") {
    for (const char* v : {"good", "best", "probe0", "notelf", "coremajor2", "noversion", "unresolved", "crafted64"})
        dir.add(fake(v));
    Report rep(l);
    struct Expect {
        const char* name;
        int32_t verdict, stage, score;
    };
    const Expect expect[] = {
        {"best", KBIT_VERDICT_USABLE, KBIT_STAGE_PROBED, 50},
        {"coremajor2", KBIT_VERDICT_REJECTED, KBIT_STAGE_OPENED, -1},
        {"crafted64", KBIT_VERDICT_REJECTED, KBIT_STAGE_FOUND, -1},
        {"good", KBIT_VERDICT_USABLE, KBIT_STAGE_PROBED, 5},
        {"notelf", KBIT_VERDICT_REJECTED, KBIT_STAGE_FOUND, -1},
        {"noversion", KBIT_VERDICT_REJECTED, KBIT_STAGE_OPENED, -1},
        {"probe0", KBIT_VERDICT_REJECTED, KBIT_STAGE_PROBED, 0},
        {"unresolved", KBIT_VERDICT_REJECTED, KBIT_STAGE_FILE_CHECKED, -1},
    };
    REQUIRE(rep.count() == std::size(expect));
    for (size_t i = 0; i < std::size(expect); ++i) {
        const kbit_loader_candidate& c = rep.at(i);
        INFO(expect[i].name);
        CHECK(std::string(c.name) == expect[i].name);
        CHECK(std::string(c.path) == dir.path() + "/libkbit_" + expect[i].name + ".so");
        CHECK(c.source == KBIT_SOURCE_LOADER_DIRECTORY);
        CHECK(c.verdict == expect[i].verdict);
        CHECK(c.stage == expect[i].stage);
        CHECK(c.score == expect[i].score);
        CHECK(std::string(c.reason).empty() == (expect[i].verdict == KBIT_VERDICT_USABLE));
    }
    CHECK(std::string(rep.at(6).reason) ==
          dir.path() + "/libkbit_probe0.so: kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)");
    REQUIRE(rep.chosen() == &rep.at(0));
    CHECK(rep.summary() == "default: best (" + dir.path() + "/libkbit_best.so), probe score 50, the highest of 2 usable candidates");
    // The records of a rejected candidate still say what was read before the rejection.
    const kbit_loader_interface_record* core = l.api.kbit_loader_candidate_interface(&rep.at(1), KBIT_INTERFACE_CORE);
    CHECK(core->state == KBIT_INTERFACE_REJECTED);
    CHECK(core->version == KBIT_MAKE_VERSION(2, 3));
}

TEST_CASE_METHOD(Scenario, "discovery: equal scores go to the earlier candidate", "[discovery]") {
    dir.add(fake("tie"));
    dir.add(fake("best"));
    Report rep(l);
    REQUIRE(rep.chosen() != nullptr);
    CHECK(std::string(rep.chosen()->name) == "best");
}

TEST_CASE_METHOD(Scenario, "discovery: KBIT_BACKEND_PATH directories come first, in order; bad entries are ignored",
                 "[discovery]") {
    const std::string a = dir.subdir("a"), b = dir.subdir("b");
    dir.add(fake("good"), "a/libkbit_good.so");
    dir.add(fake("best"), "b/libkbit_best.so");
    dir.add(fake("coreonly"));
    env.set("KBIT_BACKEND_PATH", b + "::relative/dir:" + a + ":" + dir.path() + "/missing:" + a);
    Report rep(l);
    CHECK(rep.search() == Entries{{b, KBIT_SOURCE_KBIT_BACKEND_PATH},
                                  {a, KBIT_SOURCE_KBIT_BACKEND_PATH},
                                  {dir.path(), KBIT_SOURCE_LOADER_DIRECTORY}});
    REQUIRE(rep.count() == 3);
    CHECK(std::string(rep.at(0).path) == b + "/libkbit_best.so");
    CHECK(rep.at(0).source == KBIT_SOURCE_KBIT_BACKEND_PATH);
    CHECK(std::string(rep.at(1).path) == a + "/libkbit_good.so");
    CHECK(std::string(rep.at(2).path) == dir.path() + "/libkbit_coreonly.so");
    CHECK(rep.at(2).source == KBIT_SOURCE_LOADER_DIRECTORY);

    StderrCapture err;
    env.set("KBIT_LOADER_DEBUG", "1");
    Report debug(l);
    const std::string out = err.finish();
    CHECK_THAT(out, Catch::Contains("kbit loader: note: KBIT_BACKEND_PATH entry 'relative/dir' ignored: not an absolute directory\n"));
    CHECK_THAT(out, Catch::Contains("kbit loader: note: KBIT_BACKEND_PATH entry '" + dir.path() +
                                    "/missing' ignored: not a directory\n"));
}

TEST_CASE_METHOD(Scenario, "discovery: a backend name found earlier shadows later files of that name", "[discovery]") {
    const std::string a = dir.subdir("a");
    const std::string first = dir.add(fake("good"), "a/libkbit_good.so");
    const std::string second = dir.add(fake("good"));
    env.set("KBIT_BACKEND_PATH", a);
    Report rep(l);
    REQUIRE(rep.count() == 2);
    CHECK(rep.at(0).verdict == KBIT_VERDICT_USABLE);
    const kbit_loader_candidate& shadowed = rep.at(1);
    CHECK(shadowed.verdict == KBIT_VERDICT_SHADOWED);
    CHECK(shadowed.stage == KBIT_STAGE_FOUND);
    CHECK(shadowed.score == -1);
    CHECK(std::string(shadowed.reason) == second + ": shadowed by " + first + " (same backend name, earlier in the search order)");
    Opened o = open_backend(l, "good");
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    CHECK(std::string(l.api.kbit_loader_backend_candidate(o.backend)->path) == first);
    CHECK(l.api.kbit_loader_backend_candidate(o.backend)->source == KBIT_SOURCE_KBIT_BACKEND_PATH);
    l.api.kbit_loader_close(o.backend);
}

TEST_CASE_METHOD(Scenario, "discovery: KBIT_BACKEND names the default, by name or by path, without fallback",
                 "[discovery]") {
    dir.add(fake("good"));
    dir.add(fake("best"));
    dir.add(fake("probe0"));
    const std::string elsewhere = dir.subdir("elsewhere");
    const std::string coreonly = dir.add(fake("coreonly"), "elsewhere/libkbit_coreonly.so");

    SECTION("a name") {
        env.set("KBIT_BACKEND", "good");
        Report rep(l);
        CHECK(rep.search() == Entries{{"good", KBIT_SOURCE_KBIT_BACKEND}, {dir.path(), KBIT_SOURCE_LOADER_DIRECTORY}});
        REQUIRE(rep.chosen() == &rep.at(0));
        CHECK(rep.at(0).source == KBIT_SOURCE_KBIT_BACKEND);
        CHECK(rep.count() == 3);  // best, good (listed once), probe0
        CHECK(rep.summary() == "default: good (" + dir.path() + "/libkbit_good.so), probe score 5, chosen by KBIT_BACKEND=good");
    }
    SECTION("a path outside the search directories") {
        env.set("KBIT_BACKEND", coreonly);
        Report rep(l);
        REQUIRE(rep.chosen() == &rep.at(0));
        CHECK(std::string(rep.chosen()->path) == coreonly);
        CHECK(std::string(rep.chosen()->name) == "coreonly");
        CHECK(rep.count() == 4);
    }
    SECTION("a backend that cannot run") {
        env.set("KBIT_BACKEND", "probe0");
        Report rep(l);
        CHECK(rep.chosen() == nullptr);
        CHECK(rep.summary() == "no default backend: KBIT_BACKEND=probe0: " + dir.path() +
                                   "/libkbit_probe0.so: kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)");
    }
    SECTION("a name that is not there") {
        env.set("KBIT_BACKEND", "cuda");
        Report rep(l);
        CHECK(rep.chosen() == nullptr);
        CHECK(rep.summary() == "no default backend: KBIT_BACKEND=cuda: libkbit_cuda.so is not in " + dir.path());
        CHECK(rep.count() == 3);
    }
    SECTION("neither a name nor a path") {
        env.set("KBIT_BACKEND", "libkbit_good.so");
        Report rep(l);
        CHECK(rep.chosen() == nullptr);
        CHECK(rep.summary() == "no default backend: KBIT_BACKEND='libkbit_good.so' is neither a backend name (letters, "
                               "digits, '_' and '-') nor a path (containing '/')");
    }
}

TEST_CASE_METHOD(Scenario, "discovery: kbit_loader_open(NULL) makes the default choice afresh", "[discovery]") {
    dir.add(fake("good"));
    dir.add(fake("best"));
    Opened o = open_backend(l, nullptr);
    REQUIRE(o.status == KBIT_STATUS_SUCCESS);
    CHECK(std::string(l.api.kbit_loader_backend_candidate(o.backend)->name) == "best");
    Opened e = open_backend(l, "");
    REQUIRE(e.status == KBIT_STATUS_SUCCESS);
    CHECK(e.backend != o.backend);
    l.api.kbit_loader_close(o.backend);
    l.api.kbit_loader_close(e.backend);
    env.set("KBIT_BACKEND", "nothere");
    o = open_backend(l, nullptr);
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: no default backend: KBIT_BACKEND=nothere: libkbit_nothere.so is not in " + dir.path());
}

TEST_CASE_METHOD(Scenario, "discovery: never the current directory", "[discovery]") {
    const std::string cwd = dir.subdir("cwd");
    dir.add(fake("best"), "cwd/libkbit_best.so");
    dir.add(fake("good"));
    char saved[4096];
    REQUIRE(getcwd(saved, sizeof saved) != nullptr);
    REQUIRE(chdir(cwd.c_str()) == 0);
    env.set("KBIT_BACKEND_PATH", ":.::");
    {
        Report rep(l);
        REQUIRE(rep.count() == 1);
        CHECK(std::string(rep.at(0).name) == "good");
        CHECK(rep.search() == Entries{{dir.path(), KBIT_SOURCE_LOADER_DIRECTORY}});
    }
    Opened o = open_backend(l, "best");
    CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
    CHECK(o.message == "kbit_loader_open: no backend 'best': libkbit_best.so is not in " + dir.path());
    REQUIRE(chdir(saved) == 0);
}

TEST_CASE_METHOD(Scenario, "discovery: a relative path in KBIT_BACKEND or kbit_loader_open() is refused",
                 "[discovery]") {
    // Before: it was opened from the current directory.
    const std::string cwd = dir.subdir("cwd");
    dir.add(fake("best"), "cwd/libkbit_best.so");
    dir.subdir("cwd/rel");
    dir.add(fake("best"), "cwd/rel/libkbit_best.so");
    dir.add(fake("good"));
    char saved[4096];
    REQUIRE(getcwd(saved, sizeof saved) != nullptr);
    REQUIRE(chdir(cwd.c_str()) == 0);
    for (const std::string rel : {"./libkbit_best.so", "rel/libkbit_best.so"}) {
        INFO(rel);
        const std::string why = "'" + rel + "' is a relative path: an absolute path is needed (the current "
                                "directory is never searched)";
        Opened o = open_backend(l, rel.c_str());
        CHECK(o.status == KBIT_STATUS_INVALID_ARGUMENT);
        CHECK(o.backend == nullptr);
        CHECK(o.message == "kbit_loader_open: " + why);
        env.set("KBIT_BACKEND", rel);
        Report rep(l);
        CHECK(rep.chosen() == nullptr);
        CHECK(rep.summary() == "no default backend: KBIT_BACKEND=" + why);
        o = open_backend(l, nullptr);
        CHECK(o.status == KBIT_STATUS_NOT_SUPPORTED);
        CHECK(o.message == "kbit_loader_open: no default backend: KBIT_BACKEND=" + why);
    }
    // The trampolines report it too (the choice is made once: with the last value).
    CHECK(std::string(l.sym<const char* (*)(void)>("kbit_backend_name")()) == "none");
    CHECK(l.sym<kbit_status (*)(void*)>("kbit_stream_synchronize")(nullptr) == KBIT_STATUS_NOT_IMPLEMENTED);
    CHECK(l.last_error() == "kbit_stream_synchronize: no kbit backend is available: KBIT_BACKEND='rel/libkbit_best.so' "
                            "is a relative path: an absolute path is needed (the current directory is never searched)");
    REQUIRE(chdir(saved) == 0);
}

TEST_CASE("discovery: KBIT_LOADER_DEBUG and KBIT_LOG are ignored by set-user-ID programs", "[discovery]") {
    // Before: both were read with getenv, so a set-user-ID program printed the loader's diagnostics
    // for whoever ran it. libkbit.so reads no variable with getenv any more...
    const CommandResult nm = run_command("nm -D --undefined-only '" KBIT_TEST_LOADER "'");
    REQUIRE(nm.status == 0);
    CHECK_THAT(nm.output, Catch::Contains(" secure_getenv"));
    CHECK_THAT(nm.output, !Catch::Contains(" getenv"));
    // ...and a set-user-ID copy of a program that uses it prints nothing (as root: owned by nobody).
    Env env;
    env.set("KBIT_LOADER_DEBUG", "1");
    env.set("KBIT_LOG", "1");
    const CommandResult plain = run_command(KBIT_TEST_EMULATOR " '" KBIT_TEST_SECURE_ENV "'");
    CHECK_THAT(plain.output, Catch::StartsWith("secure 0\n"));
    CHECK_THAT(plain.output, Catch::Contains("kbit: kbit_loader_open: 'no such backend!' is neither"));
    CHECK_THAT(plain.output, Catch::Contains("kbit loader: search: loader directory "));
    if (geteuid() != 0) {
        WARN("not root: the set-user-ID run is skipped");
        return;
    }
    TempDir dir;
    const std::string copy = dir.add(KBIT_TEST_SECURE_ENV);
    REQUIRE(chown(copy.c_str(), 65534, 65534) == 0);
    REQUIRE(chmod(copy.c_str(), 04755) == 0);
    const CommandResult setuid = run_command(KBIT_TEST_EMULATOR " '" + copy + "'");
    if (setuid.output.rfind("secure 1\n", 0) != 0) {
        WARN("the set-user-ID copy did not run with AT_SECURE (nosuid?): " << setuid.output);
        return;
    }
    CHECK_THAT(setuid.output, !Catch::Contains("kbit: ") && !Catch::Contains("kbit loader: "));
}

TEST_CASE_METHOD(Scenario, "discovery: files and directories others may write, and symlinks' targets, are shown",
                 "[discovery]") {
    // Before: nothing said that anyone could replace the code this process runs, and a symlinked
    // backend showed only the link's path.
    const std::string open = dir.subdir("open"), links = dir.subdir("links");
    dir.subdir("real");
    const std::string shared = dir.add(fake("good"), "open/libkbit_good.so");
    const std::string target = dir.add(fake("best"), "real/libkbit_best.so");
    const std::string link = links + "/libkbit_best.so";
    REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
    REQUIRE(chmod(shared.c_str(), 0666) == 0);
    REQUIRE(chmod(open.c_str(), 0777) == 0);
    REQUIRE(chmod(target.c_str(), 0664) == 0);
    env.set("KBIT_BACKEND_PATH", open + ":" + links);
    const std::string warn_dir = "directory " + open + " is writable by group and others (mode 0777)";
    const std::string warn_file = "file " + shared + " is writable by group and others (mode 0666)";
    const std::string warn_target = "file " + target + " is writable by its group (mode 0664)";

    StderrCapture err;
    env.set("KBIT_LOADER_DEBUG", "1");
    {
        Report rep(l);
        REQUIRE(rep.count() == 2);
        CHECK(rep.at(0).verdict == KBIT_VERDICT_USABLE);  // a warning, not a rejection
        CHECK(rep.at(1).verdict == KBIT_VERDICT_USABLE);
        CHECK(std::string(rep.at(1).path) == link);
    }
    const std::string out = err.finish();
    CHECK_THAT(out, Catch::Contains("probe score 5; interfaces: core 1.0, 4bit 1.3, 8bit 1.0, optim8 1.0\n"
                                    "  warning: " + warn_dir + "\n  warning: " + warn_file + "\n"));
    CHECK_THAT(out, Catch::Contains("probe score 50; interfaces: core 1.0, 4bit 1.3, 8bit 1.0, optim8 1.0\n"
                                    "  target: " + target + "\n  warning: " + warn_target + "\n"));

    env.unset("KBIT_LOADER_DEBUG");
    const CommandResult info = run_kbit(dir.path(), "info");
    INFO(info.output);
    CHECK(info.status == 0);
    CHECK_THAT(info.output, Catch::Contains("    warning:     " + warn_dir + "\n    warning:     " + warn_file + "\n"));
    CHECK_THAT(info.output, Catch::Contains("    file:        " + link + "\n    target:      " + target + "\n"));
    CHECK_THAT(info.output, Catch::Contains("    warning:     " + warn_target + "\n"));
    const CommandResult json = run_kbit(dir.path(), "info --json");
    CHECK_THAT(json.output, Catch::Contains("\"target\": \"" + target + "\""));
    CHECK_THAT(json.output, Catch::Contains("\"" + warn_file + "\""));
}

TEST_CASE_METHOD(Scenario, "discovery: KBIT_LOADER_DEBUG prints every candidate, its stage and the reason",
                 "[discovery]") {
    const std::string good = dir.add(fake("good"));
    const std::string probe0 = dir.add(fake("probe0"));
    const std::string major2 = dir.add(fake("major2"));
    {
        StderrCapture err;
        Report quiet(l);
        CHECK(err.finish().empty());
    }
    env.set("KBIT_LOADER_DEBUG", "1");
    StderrCapture err;
    { Report rep(l); }
    const std::string expected =
        "kbit loader: search: loader directory " + dir.path() + "\n" +
        "kbit loader: candidate good (" + good + ", loader directory): usable, reached stage 'probed', probe score 5; "
        "interfaces: core 1.0, 4bit 1.3, 8bit 1.0, optim8 1.0\n" +
        "kbit loader: candidate major2 (" + major2 + ", loader directory): usable, reached stage 'probed', probe score 5; "
        "interfaces: core 1.0, 4bit 2.0 rejected, 8bit 1.0, optim8 absent\n" +
        "  4bit: " + major2 + ": 4bit interface version 2.0 rejected: this loader expects major 1 (it implements 4bit 1.3)\n" +
        "kbit loader: candidate probe0 (" + probe0 + ", loader directory): rejected, reached stage 'probed', probe score 0; "
        "interfaces: core 1.0, 4bit 1.3, 8bit 1.0, optim8 1.0\n" +
        "  reason: " + probe0 + ": kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)\n" +
        "kbit loader: default: good (" + good + "), probe score 5, the highest of 2 usable candidates\n";
    CHECK(err.finish() == expected);

    // An explicit open prints its one candidate; the first trampoline call prints the default choice.
    StderrCapture open_err;
    Opened o = open_backend(l, "probe0");
    CHECK(open_err.finish() ==
          "kbit loader: candidate probe0 (" + probe0 + ", loader directory): rejected, reached stage 'probed', probe score 0; "
          "interfaces: core 1.0, 4bit 1.3, 8bit 1.0, optim8 1.0\n" +
          "  reason: " + probe0 + ": kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)\n");
    StderrCapture first_use;
    CHECK(std::string(l.sym<const char* (*)(void)>("kbit_backend_name")()) == "good");
    CHECK(first_use.finish() == expected);
}

TEST_CASE_METHOD(Scenario, "discovery: report accessors and constant names", "[discovery]") {
    Report rep(l);
    CHECK(l.api.kbit_loader_report_candidate(rep.r, 0) == nullptr);
    CHECK(l.api.kbit_loader_report_search_entry(rep.r, 1, nullptr) == nullptr);
    CHECK(l.api.kbit_loader_report_search_entry(rep.r, 0, nullptr) == dir.path());
    CHECK(l.api.kbit_loader_report_candidate_count(nullptr) == 0);
    CHECK(l.api.kbit_loader_report_search_count(nullptr) == 0);
    CHECK(l.api.kbit_loader_report_default(nullptr) == nullptr);
    CHECK(std::string(l.api.kbit_loader_report_summary(nullptr)).empty());
    CHECK(l.api.kbit_loader_report_free(nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(l.api.kbit_loader_interface_version() == KBIT_MAKE_VERSION(KBIT_LOADER_VERSION_MAJOR, KBIT_LOADER_VERSION_MINOR));

    // Every interface of the registry, by its public id.
#define KBIT_INTERFACE(name, NAME, ns) CHECK(std::string(l.api.kbit_loader_interface_name(KBIT_INTERFACE_##NAME)) == #name);
#include "interfaces.def"
#undef KBIT_INTERFACE
    CHECK(std::string(l.api.kbit_loader_interface_name(KBIT_INTERFACE_COUNT)) == "unknown");
    CHECK(std::string(l.api.kbit_loader_interface_state_name(KBIT_INTERFACE_ABSENT)) == "absent");
    CHECK(std::string(l.api.kbit_loader_interface_state_name(KBIT_INTERFACE_ACCEPTED)) == "accepted");
    CHECK(std::string(l.api.kbit_loader_interface_state_name(KBIT_INTERFACE_REJECTED)) == "rejected");
    CHECK(std::string(l.api.kbit_loader_interface_state_name(3)) == "unknown");
    CHECK(std::string(l.api.kbit_loader_source_name(KBIT_SOURCE_EXPLICIT)) == "explicit");
    CHECK(std::string(l.api.kbit_loader_source_name(KBIT_SOURCE_KBIT_BACKEND)) == "KBIT_BACKEND");
    CHECK(std::string(l.api.kbit_loader_source_name(KBIT_SOURCE_KBIT_BACKEND_PATH)) == "KBIT_BACKEND_PATH");
    CHECK(std::string(l.api.kbit_loader_source_name(KBIT_SOURCE_LOADER_DIRECTORY)) == "loader directory");
    CHECK(std::string(l.api.kbit_loader_source_name(-1)) == "unknown");
    const char* stages[] = {"found", "file checked", "opened", "versions checked", "resolved", "probed"};
    for (int32_t s = KBIT_STAGE_FOUND; s <= KBIT_STAGE_PROBED; ++s) CHECK(std::string(l.api.kbit_loader_stage_name(s)) == stages[s]);
    CHECK(std::string(l.api.kbit_loader_stage_name(6)) == "unknown");
    CHECK(std::string(l.api.kbit_loader_verdict_name(KBIT_VERDICT_USABLE)) == "usable");
    CHECK(std::string(l.api.kbit_loader_verdict_name(KBIT_VERDICT_REJECTED)) == "rejected");
    CHECK(std::string(l.api.kbit_loader_verdict_name(KBIT_VERDICT_SHADOWED)) == "shadowed");
    CHECK(std::string(l.api.kbit_loader_verdict_name(9)) == "unknown");
}
