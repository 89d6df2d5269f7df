#include "discovery.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "isolate.h"
#include "loader_state.h"
#include "names.h"

namespace kbit::loader {
namespace {

struct Pending {
    std::string path, name;
    int32_t source;
};

bool same_file(const std::string& a, const std::string& b) {
    char ra[4096], rb[4096];
    return a == b || (realpath(a.c_str(), ra) != nullptr && realpath(b.c_str(), rb) != nullptr &&
                      std::string(ra) == std::string(rb));
}

// The file KBIT_BACKEND names, or "" with *error.
bool forced_candidate(const SearchPlan& plan, Pending* out, std::string* error) {
    const std::string& v = plan.backend;
    if (is_relative_path(v)) {
        *error = "KBIT_BACKEND=" + relative_path_problem(v);
        return false;
    }
    if (is_path(v)) {
        *out = {v, backend_name_of(v), KBIT_SOURCE_KBIT_BACKEND};
        return true;
    }
    if (!valid_backend_name(v)) {
        *error = "KBIT_BACKEND='" + v + "' is neither a backend name (letters, digits, '_' and '-') nor a path "
                 "(containing '/')";
        return false;
    }
    int32_t source = 0;
    const std::string path = find_backend(plan, v, &source);
    if (path.empty()) {
        *error = "KBIT_BACKEND=" + v + ": libkbit_" + v + ".so is not in " + directories_text(plan);
        return false;
    }
    *out = {path, v, KBIT_SOURCE_KBIT_BACKEND};
    return true;
}

// KBIT_LOADER_ISOLATE=SECONDS (`kbit info --isolate`): kbit_loader_discover() validates each
// candidate in a child process killed after SECONDS. 0 = in this process.
int isolate_seconds() {
    const char* v = secure_getenv("KBIT_LOADER_ISOLATE");
    if (v == nullptr || v[0] == '\0') return 0;
    char* end = nullptr;
    const long s = std::strtol(v, &end, 10);
    return *end == '\0' && s > 0 ? static_cast<int>(s < 3600 ? s : 3600) : 0;
}

// What was running when a child ended at `stage` (the last one it reached).
const char* running_at(int32_t stage) {
    switch (stage) {
        case KBIT_STAGE_FOUND: return "while checking the file";
        case KBIT_STAGE_FILE_CHECKED: return "in dlopen() (the file's ELF constructors)";
        case KBIT_STAGE_OPENED: return "in its kbit_<iface>_interface_version() functions";
        case KBIT_STAGE_VERSIONS_CHECKED: return "while resolving its functions";
        case KBIT_STAGE_RESOLVED: return "in kbit_backend_probe()";
        default: return "after kbit_backend_probe()";
    }
}

// One record sent by a validation child: its length, then Candidate::serialize().
std::string frame(const Candidate& c) {
    const std::string bytes = c.serialize();
    const uint32_t n = static_cast<uint32_t>(bytes.size());
    return std::string(reinterpret_cast<const char*>(&n), sizeof n) + bytes;
}

// validate() in a child process: a backend that crashes, exits or hangs in its constructors or
// probe ends the child only. The child sends its record at each stage it reaches and at the end;
// the last one that arrived whole is the result, rejected with how the child ended unless it
// returned. Nothing stays open in this process.
std::unique_ptr<kbit_backend> validate_isolated(const Pending& p, int seconds) {
    const Isolated r = run_isolated(seconds, [&](int fd) {
        auto b = validate(p.path, p.name, p.source, [fd](const Candidate& c) { write_all(fd, frame(c)); });
        write_all(fd, frame(b->record));
    });
    auto b = std::make_unique<kbit_backend>(p.name, p.path, p.source);
    std::string last;
    for (size_t at = 0; r.data.size() - at >= sizeof(uint32_t);) {
        uint32_t n = 0;
        std::memcpy(&n, r.data.data() + at, sizeof n);
        if (r.data.size() - at - sizeof n < n) break;
        last = r.data.substr(at + sizeof n, n);
        at += sizeof n + n;
    }
    std::string why = r.ending;
    if (last.empty() && why.empty()) why = "sent no record";
    if (!last.empty() && !b->record.deserialize(last)) {
        b = std::make_unique<kbit_backend>(p.name, p.path, p.source);
        if (why.empty()) why = "sent an unreadable record";
    }
    if (!why.empty())
        b->record.reject(KBIT_VERDICT_REJECTED,
                         why + " " + running_at(b->record.pub.stage) + " (validated in a child process)");
    b->record.set_trust(check_file_trust(p.path));
    return b;
}

std::string plural(size_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string describe_choice(const Candidate& c) {
    return "default: " + c.name() + " (" + c.path() + "), probe score " + std::to_string(c.pub.score);
}

}  // namespace

Discovery discover(bool only_needed) {
    Discovery d;
    d.plan = read_search_plan();
    std::vector<Pending> pending;
    std::string backend_error;
    bool forced = false;
    if (d.plan.backend_set) {
        Pending p;
        forced = forced_candidate(d.plan, &p, &backend_error);
        if (forced) pending.push_back(p);
    }
    if (!(only_needed && d.plan.backend_set)) {
        for (const SearchEntry& dir : d.plan.dirs)
            for (const std::string& path : scan_directory(dir.text))
                if (!(forced && same_file(path, pending[0].path)))
                    pending.push_back({path, backend_name_of(path), dir.source});
    }

    const int isolate = only_needed ? 0 : isolate_seconds();
    for (size_t i = 0; i < pending.size(); ++i) {
        const Pending& p = pending[i];
        const kbit_backend* first = nullptr;
        for (const auto& earlier : d.backends)
            if (earlier->record.name() == p.name) {
                first = earlier.get();
                break;
            }
        if (first != nullptr) {
            auto b = std::make_unique<kbit_backend>(p.name, p.path, p.source);
            b->record.reject(KBIT_VERDICT_SHADOWED, "shadowed by " + first->record.path() +
                                                        " (same backend name, earlier in the search order)");
            d.backends.push_back(std::move(b));
        } else {
            d.backends.push_back(isolate > 0 ? validate_isolated(p, isolate) : validate(p.path, p.name, p.source));
        }
    }

    if (d.plan.backend_set) {
        if (!forced) {
            d.summary = "no default backend: " + backend_error;
        } else if (d.backends[0]->usable()) {
            d.chosen = 0;
            d.summary = describe_choice(d.backends[0]->record) + ", chosen by KBIT_BACKEND=" + d.plan.backend;
        } else {
            d.summary = "no default backend: KBIT_BACKEND=" + d.plan.backend + ": " + d.backends[0]->record.reason();
        }
        return d;
    }
    size_t usable = 0;
    for (size_t i = 0; i < d.backends.size(); ++i) {
        const kbit_backend& b = *d.backends[i];
        if (!b.usable()) continue;
        ++usable;
        if (d.chosen < 0 || b.record.pub.score > d.backends[d.chosen]->record.pub.score) d.chosen = static_cast<int>(i);
    }
    if (d.chosen >= 0)
        d.summary = describe_choice(d.backends[d.chosen]->record) + ", the highest of " +
                    plural(usable, "usable candidate");
    else if (d.backends.empty())
        d.summary = "no default backend: no libkbit_<name>.so in " + directories_text(d.plan);
    else
        d.summary = "no default backend: none of " + plural(d.backends.size(), "candidate") + " is usable";
    return d;
}

std::unique_ptr<kbit_backend> choose_default(std::string* why) {
    Discovery d = discover(true);
    if (debug_enabled()) debug_discovery(d);
    if (d.chosen < 0) {
        *why = d.summary;
        return nullptr;
    }
    std::unique_ptr<kbit_backend> b = std::move(d.backends[d.chosen]);
    std::string error;
    if (!finalize(*b, &error)) {
        *why = "no default backend: " + error;
        return nullptr;
    }
    return b;
}

std::unique_ptr<kbit_backend> open_named(const std::string& spec, kbit_status* status, std::string* why) {
    std::unique_ptr<kbit_backend> b;
    if (is_relative_path(spec)) {
        *status = KBIT_STATUS_INVALID_ARGUMENT;
        *why = relative_path_problem(spec);
        return nullptr;
    } else if (is_path(spec)) {
        b = validate(spec, backend_name_of(spec), KBIT_SOURCE_EXPLICIT);
    } else if (!valid_backend_name(spec)) {
        *status = KBIT_STATUS_INVALID_ARGUMENT;
        *why = "'" + spec + "' is neither a backend name (letters, digits, '_' and '-') nor a path (containing '/')";
        return nullptr;
    } else {
        const SearchPlan plan = read_search_plan();
        int32_t source = 0;
        const std::string path = find_backend(plan, spec, &source);
        if (path.empty()) {
            *status = KBIT_STATUS_NOT_SUPPORTED;
            *why = "no backend '" + spec + "': libkbit_" + spec + ".so is not in " + directories_text(plan);
            if (debug_enabled()) std::fprintf(stderr, "kbit loader: open %s: %s\n", spec.c_str(), why->c_str());
            return nullptr;
        }
        b = validate(path, spec, source);
    }
    if (debug_enabled()) debug_candidate(b->record);
    std::string error;
    if (!b->usable()) {
        *status = KBIT_STATUS_NOT_SUPPORTED;
        *why = b->record.reason();
        return nullptr;
    }
    if (!finalize(*b, &error)) {
        *status = KBIT_STATUS_NOT_SUPPORTED;
        *why = error;
        return nullptr;
    }
    return b;
}

void debug_candidate(const Candidate& c) {
    std::string line = "kbit loader: candidate " + c.name() + " (" + c.path() + ", " +
                       source_name(c.pub.source) + "): " + verdict_name(c.pub.verdict) +
                       ", reached stage '" + stage_name(c.pub.stage) + "'";
    if (c.pub.score >= 0) line += ", probe score " + std::to_string(c.pub.score);
    if (c.pub.stage >= KBIT_STAGE_VERSIONS_CHECKED || c.ifaces[KBIT_INTERFACE_CORE].version != 0) {
        line += "; interfaces:";
        for (int i = 0; i < kInterfaces; ++i) {
            const kbit_loader_interface_record& r = c.ifaces[i];
            line += std::string(i ? "," : "") + " " + interface_info(i).name + " " +
                    (r.state == KBIT_INTERFACE_ABSENT ? std::string("absent")
                                                      : std::string(version_text(r.version).text) +
                                                            (r.state == KBIT_INTERFACE_REJECTED ? " rejected" : ""));
        }
    }
    if (!c.trust().target.empty()) line += "\n  target: " + c.trust().target;
    for (const std::string& w : c.trust().warnings) line += "\n  warning: " + w;
    if (!c.reason().empty()) line += "\n  reason: " + c.reason();
    for (int i = 0; i < kInterfaces; ++i)
        if (c.ifaces[i].message[0] != '\0' && c.reason() != c.ifaces[i].message) line += std::string("\n  ") + interface_info(i).name + ": " + c.ifaces[i].message;
    std::fprintf(stderr, "%s\n", line.c_str());
}

void debug_discovery(const Discovery& d) {
    if (d.plan.backend_set) std::fprintf(stderr, "kbit loader: search: KBIT_BACKEND=%s\n", d.plan.backend.c_str());
    for (const SearchEntry& e : d.plan.dirs)
        std::fprintf(stderr, "kbit loader: search: %s %s\n", source_name(e.source), e.text.c_str());
    for (const std::string& note : d.plan.notes) std::fprintf(stderr, "kbit loader: note: %s\n", note.c_str());
    for (const auto& b : d.backends) debug_candidate(b->record);
    std::fprintf(stderr, "kbit loader: %s\n", d.summary.c_str());
}

}  // namespace kbit::loader
