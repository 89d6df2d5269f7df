// `kbit info`: the vulkaninfo of kbit. Everything comes from the loader API (kbit_loader_discover),
// so it shows exactly what the trampolines would choose in this environment.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "file_trust.h"
#include "isolate.h"
#include "kbit/kbit_loader.h"

namespace kbit::cli {
namespace {

std::string version_text(uint32_t v) {
    return std::to_string(KBIT_VERSION_MAJOR_OF(v)) + "." + std::to_string(KBIT_VERSION_MINOR_OF(v));
}

struct InterfaceView {
    std::string name, state, message;
    uint32_t version = 0, missing = 0, newer = 0;
};

struct CandidateView {
    std::string name, path, source, stage, verdict, reason, info;
    std::string target;                 // a symlink's realpath
    std::vector<std::string> warnings;  // who else may change the file (file_trust.h)
    int32_t score = -1;
    bool usable = false, chosen = false;
    std::vector<InterfaceView> interfaces;
};

struct SearchView {
    std::string source, entry;
};

struct InfoView {
    std::string loader_path;
    uint32_t loader_api = 0;
    std::vector<std::pair<std::string, uint32_t>> loader_interfaces;
    std::vector<SearchView> search;
    std::vector<CandidateView> candidates;
    std::string summary;
    int chosen = -1;
};

// A string from the library; NULL (never from this libkbit.so, maybe from an older one) as text.
std::string text(const char* s) { return s != nullptr ? s : "(NULL)"; }

// kbit_backend_info() of a usable candidate, read through an explicit handle.
std::string backend_info(const char* path) {
    kbit_backend* b = nullptr;
    if (kbit_loader_open(path, &b) != KBIT_STATUS_SUCCESS)
        return "(cannot open: " + text(kbit_last_error_message()) + ")";
    std::string info = text(kbit_loader_core_table(b)->kbit_backend_info());
    kbit_loader_close(b);
    return info;
}

// The same in a child process (--isolate): the backend is opened, and so probed, once more.
std::string isolated_backend_info(const char* path, int seconds) {
    const kbit::loader::Isolated r =
        kbit::loader::run_isolated(seconds, [&](int fd) { kbit::loader::write_all(fd, backend_info(path)); });
    return r.ending.empty() ? r.data : "(kbit_backend_info() in a child process: " + r.ending + ")";
}

InfoView collect(const kbit_loader_report* r, int isolate) {
    InfoView v;
    v.loader_path = kbit_loader_library_path();
    v.loader_api = kbit_loader_interface_version();
    // The loader's version symbol of every interface (abi/interfaces.def), in loader order.
#define KBIT_INTERFACE(name, NAME, ns) v.loader_interfaces.emplace_back(#name, kbit_##name##_interface_version());
#include "interfaces.def"
#undef KBIT_INTERFACE
    for (size_t i = 0; i < kbit_loader_report_search_count(r); ++i) {
        int32_t source = 0;
        const char* entry = kbit_loader_report_search_entry(r, i, &source);
        v.search.push_back({kbit_loader_source_name(source), entry});
    }
    const kbit_loader_candidate* chosen = kbit_loader_report_default(r);
    for (size_t i = 0; i < kbit_loader_report_candidate_count(r); ++i) {
        const kbit_loader_candidate* c = kbit_loader_report_candidate(r, i);
        CandidateView cv;
        cv.name = c->name;
        cv.path = c->path;
        cv.source = kbit_loader_source_name(c->source);
        cv.stage = kbit_loader_stage_name(c->stage);
        cv.verdict = kbit_loader_verdict_name(c->verdict);
        cv.reason = c->reason;
        cv.score = c->score;
        cv.usable = c->verdict == KBIT_VERDICT_USABLE;
        cv.chosen = c == chosen;
        if (cv.chosen) v.chosen = static_cast<int>(i);
        for (int32_t k = 0; k < KBIT_INTERFACE_COUNT; ++k) {
            const kbit_loader_interface_record* rec = kbit_loader_candidate_interface(c, k);
            cv.interfaces.push_back({kbit_loader_interface_name(k), kbit_loader_interface_state_name(rec->state),
                                     rec->message, rec->version, rec->missing_count, rec->newer_count});
        }
        if (c->verdict != KBIT_VERDICT_SHADOWED) {
            kbit::loader::FileTrust trust = kbit::loader::check_file_trust(c->path);
            cv.target = trust.target;
            cv.warnings = std::move(trust.warnings);
        }
        if (cv.usable) cv.info = isolate > 0 ? isolated_backend_info(c->path, isolate) : backend_info(c->path);
        v.candidates.push_back(std::move(cv));
    }
    v.summary = kbit_loader_report_summary(r);
    return v;
}

std::string interfaces_line(const CandidateView& c) {
    std::string line;
    for (const InterfaceView& i : c.interfaces) {
        line += (line.empty() ? "" : ", ") + i.name + " ";
        if (i.state == "absent") line += "absent";
        else line += version_text(i.version) + (i.state == "rejected" ? " (rejected)" : "");
    }
    return line;
}

void print_text(const InfoView& v) {
    std::printf("kbit %s\n", KBIT_RELEASE_VERSION_STRING);
    std::printf("loader:        %s (loader API %s)\n", v.loader_path.c_str(), version_text(v.loader_api).c_str());
    std::string ifaces;
    for (const auto& [name, version] : v.loader_interfaces)
        ifaces += (ifaces.empty() ? "" : ", ") + name + " " + version_text(version);
    std::printf("interfaces:    %s\n", ifaces.c_str());

    std::printf("\nsearch order (an explicit path first; never the current directory):\n");
    for (const char* source : {"KBIT_BACKEND", "KBIT_BACKEND_PATH", "loader directory"}) {
        bool any = false;
        for (const SearchView& s : v.search)
            if (s.source == source) {
                std::printf("  %-19s %s\n", any ? "" : source, s.entry.c_str());
                any = true;
            }
        if (!any) std::printf("  %-19s (none)\n", source);
    }

    std::printf("\ncandidates (%zu):\n", v.candidates.size());
    for (const CandidateView& c : v.candidates) {
        std::printf("  %s%s\n", c.name.c_str(), c.chosen ? "  [default]" : "");
        std::printf("    file:        %s\n", c.path.c_str());
        if (!c.target.empty()) std::printf("    target:      %s\n", c.target.c_str());
        std::printf("    found in:    %s\n", c.source.c_str());
        if (c.usable)
            std::printf("    status:      usable, probe score %d\n", c.score);
        else
            std::printf("    status:      %s after stage '%s'\n", c.verdict.c_str(), c.stage.c_str());
        if (!c.reason.empty()) std::printf("    reason:      %s\n", c.reason.c_str());
        for (const std::string& w : c.warnings) std::printf("    warning:     %s\n", w.c_str());
        if (c.stage == "versions checked" || c.stage == "resolved" || c.stage == "probed")
            std::printf("    interfaces:  %s\n", interfaces_line(c).c_str());
        for (const InterfaceView& i : c.interfaces)
            if (!i.message.empty() && i.message != c.reason) std::printf("    %-12s %s\n", (i.name + ":").c_str(), i.message.c_str());
        if (c.usable) std::printf("    info:        %s\n", c.info.c_str());
    }
    std::printf("\n%s\n", v.summary.c_str());
    if (v.chosen >= 0) std::printf("  info: %s\n", v.candidates[static_cast<size_t>(v.chosen)].info.c_str());
}

void print_json(const InfoView& v) {
    using nlohmann::json;
    json j;
    j["kbit"] = KBIT_RELEASE_VERSION_STRING;
    j["loader"] = {{"path", v.loader_path}, {"api", version_text(v.loader_api)}, {"interfaces", json::object()}};
    for (const auto& [name, version] : v.loader_interfaces) j["loader"]["interfaces"][name] = version_text(version);
    j["search"] = json::array();
    for (const SearchView& s : v.search) j["search"].push_back({{"source", s.source}, {"entry", s.entry}});
    j["candidates"] = json::array();
    for (const CandidateView& c : v.candidates) {
        json jc = {{"name", c.name},     {"path", c.path},   {"source", c.source}, {"verdict", c.verdict},
                   {"stage", c.stage},   {"score", c.score}, {"reason", c.reason}, {"default", c.chosen},
                   {"target", c.target}, {"warnings", c.warnings}, {"interfaces", json::object()}};
        for (const InterfaceView& i : c.interfaces)
            jc["interfaces"][i.name] = {{"state", i.state},   {"version", i.state == "absent" ? "" : version_text(i.version)},
                                        {"missing", i.missing}, {"newer", i.newer}, {"message", i.message}};
        if (c.usable) jc["info"] = c.info;
        j["candidates"].push_back(jc);
    }
    j["default"] = v.chosen >= 0 ? json(v.candidates[static_cast<size_t>(v.chosen)].name) : json(nullptr);
    j["summary"] = v.summary;
    std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

int run_info(int argc, char** argv) {
    bool json = false;
    int isolate = 0;  // seconds per child process; 0 = validate in this process
    for (int i = 1; i < argc; ++i) {
        char* end = nullptr;
        const long seconds = std::strncmp(argv[i], "--isolate=", 10) == 0 ? std::strtol(argv[i] + 10, &end, 10) : 0;
        if (std::strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (std::strcmp(argv[i], "--isolate") == 0) {
            isolate = 5;
        } else if (end != nullptr && *end == '\0' && seconds > 0 && seconds <= 3600) {
            isolate = static_cast<int>(seconds);
        } else {
            std::fprintf(stderr, "usage: kbit info [--json] [--isolate[=SECONDS]]\n");
            return 2;
        }
    }
    // The loader validates each candidate in a child process (discovery.cpp); loader API 1.0 has
    // no argument for it.
    if (isolate > 0) setenv("KBIT_LOADER_ISOLATE", std::to_string(isolate).c_str(), 1);
    kbit_loader_report* report = nullptr;
    const kbit_status status = kbit_loader_discover(&report);
    unsetenv("KBIT_LOADER_ISOLATE");
    if (status != KBIT_STATUS_SUCCESS) {
        std::fprintf(stderr, "kbit info: %s\n", text(kbit_last_error_message()).c_str());
        return 1;
    }
    const InfoView view = collect(report, isolate);
    kbit_loader_report_free(report);
    if (json) print_json(view);
    else print_text(view);
    return view.chosen >= 0 ? 0 : 1;
}

}  // namespace kbit::cli
