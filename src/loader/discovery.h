// discovery.h — walking the search order, choosing the default backend, and reporting what happened.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "search.h"

struct kbit_loader_report {
    std::vector<kbit::loader::SearchEntry> search;
    std::vector<std::unique_ptr<kbit::loader::Candidate>> candidates;
    int default_index = -1;
    std::string summary;
};

namespace kbit::loader {

struct Discovery {
    SearchPlan plan;
    std::vector<std::unique_ptr<kbit_backend>> backends;  // every candidate, in search order
    int chosen = -1;                                      // index of the default choice, or -1
    std::string summary;                                  // one sentence on the choice
};

// Validates the candidates of the search order. With `only_needed`, stops at what the default choice
// needs (only KBIT_BACKEND's file when it is set); otherwise validates every candidate for a report.
// Usable backends stay open; the caller closes or keeps them.
Discovery discover(bool only_needed);

// The default backend, finalized (stubs installed), or NULL with *why ("no default backend: ...").
std::unique_ptr<kbit_backend> choose_default(std::string* why);

// Opens one backend by name or path (kbit_loader_open's non-default case): NULL with *status and
// *why set on failure.
std::unique_ptr<kbit_backend> open_named(const std::string& spec, kbit_status* status, std::string* why);

// KBIT_LOADER_DEBUG output of one candidate / of a whole discovery.
void debug_candidate(const Candidate& c);
void debug_discovery(const Discovery& d);

}  // namespace kbit::loader
