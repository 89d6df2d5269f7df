// candidate.h — the loader's record of one backend file: the public kbit_loader_candidate and its
// per-interface records, plus the strings they point to.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "file_trust.h"
#include "loader_fns.h"

namespace kbit::loader {

struct CandidateStrings {
    std::string name, path, reason;
    std::string iface_message[kInterfaces];
    FileTrust trust;  // not in the public record (loader API 1.0): KBIT_LOADER_DEBUG and `kbit info`
};

// Standard layout with the public record first, so a `const kbit_loader_candidate*` handed out
// converts back (kbit_loader_candidate_interface()).
struct Candidate {
    kbit_loader_candidate pub;
    kbit_loader_interface_record ifaces[kInterfaces];
    CandidateStrings* strings;

    Candidate(const std::string& name, const std::string& path, int32_t source);
    Candidate(const Candidate& other);
    Candidate& operator=(const Candidate&) = delete;
    ~Candidate();

    const std::string& name() const { return strings->name; }
    const std::string& path() const { return strings->path; }
    const std::string& reason() const { return strings->reason; }
    const FileTrust& trust() const { return strings->trust; }
    void set_trust(FileTrust trust) { strings->trust = std::move(trust); }

    // Ends validation: verdict REJECTED (or SHADOWED) with "<path>: <why>" (just <why> without a path).
    void reject(int32_t verdict, const std::string& why);
    void set_interface_message(int iface, const std::string& message);

    // The record's results (stage, verdict, score, reason, interface records; not the trust
    // checks) as bytes, and back: a record made in a child process (discovery.cpp).
    std::string serialize() const;
    bool deserialize(const std::string& bytes);

    static const Candidate* from(const kbit_loader_candidate* pub) {
        return reinterpret_cast<const Candidate*>(pub);
    }

private:
    void point_strings();
};

static_assert(std::is_standard_layout_v<Candidate>, "Candidate converts from its first member");

}  // namespace kbit::loader
