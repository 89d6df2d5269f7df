#include "candidate.h"

#include <cstring>

namespace kbit::loader {

Candidate::Candidate(const std::string& name, const std::string& path, int32_t source)
    : pub{}, ifaces{}, strings(new CandidateStrings{name, path, "", {}, {}}) {
    pub.size = sizeof pub;
    pub.source = source;
    pub.stage = KBIT_STAGE_FOUND;
    pub.verdict = KBIT_VERDICT_REJECTED;  // until every stage has passed
    pub.score = -1;
    for (int i = 0; i < kInterfaces; ++i) {
        const InterfaceInfo& info = interface_info(i);
        ifaces[i].size = sizeof ifaces[i];
        ifaces[i].interface_id = i;
        ifaces[i].state = KBIT_INTERFACE_ABSENT;
        ifaces[i].loader_version = KBIT_MAKE_VERSION(info.major, info.minor);
        ifaces[i].function_count = info.function_count;
    }
    point_strings();
}

Candidate::Candidate(const Candidate& other)
    : pub(other.pub), ifaces(), strings(new CandidateStrings(*other.strings)) {
    for (int i = 0; i < kInterfaces; ++i) ifaces[i] = other.ifaces[i];
    point_strings();
}

Candidate::~Candidate() { delete strings; }

void Candidate::reject(int32_t verdict, const std::string& why) {
    pub.verdict = verdict;
    strings->reason = strings->path.empty() ? why : strings->path + ": " + why;
    point_strings();
}

void Candidate::set_interface_message(int iface, const std::string& message) {
    strings->iface_message[iface] = message;
    point_strings();
}

namespace {

void put(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put(std::string& out, const std::string& s) {
    put(out, static_cast<uint32_t>(s.size()));
    out += s;
}

struct Reader {
    const std::string& in;
    size_t at = 0;
    bool ok = true;
    uint32_t u32() {
        uint32_t v = 0;
        if (in.size() - at < sizeof v) {
            ok = false;
            return 0;
        }
        std::memcpy(&v, in.data() + at, sizeof v);
        at += sizeof v;
        return v;
    }
    std::string str() {
        const uint32_t n = u32();
        if (!ok || in.size() - at < n) {
            ok = false;
            return "";
        }
        at += n;
        return in.substr(at - n, n);
    }
};

}  // namespace

std::string Candidate::serialize() const {
    std::string out;
    for (int32_t v : {pub.stage, pub.verdict, pub.score}) put(out, static_cast<uint32_t>(v));
    put(out, strings->reason);
    for (int i = 0; i < kInterfaces; ++i) {
        for (uint32_t v : {static_cast<uint32_t>(ifaces[i].state), ifaces[i].version, ifaces[i].missing_count,
                           ifaces[i].newer_count})
            put(out, v);
        put(out, strings->iface_message[i]);
    }
    return out;
}

bool Candidate::deserialize(const std::string& bytes) {
    Reader r{bytes};
    pub.stage = static_cast<int32_t>(r.u32());
    pub.verdict = static_cast<int32_t>(r.u32());
    pub.score = static_cast<int32_t>(r.u32());
    strings->reason = r.str();
    for (int i = 0; i < kInterfaces; ++i) {
        ifaces[i].state = static_cast<int32_t>(r.u32());
        ifaces[i].version = r.u32();
        ifaces[i].missing_count = r.u32();
        ifaces[i].newer_count = r.u32();
        strings->iface_message[i] = r.str();
    }
    point_strings();
    return r.ok && r.at == bytes.size();
}

void Candidate::point_strings() {
    pub.name = strings->name.c_str();
    pub.path = strings->path.c_str();
    pub.reason = strings->reason.c_str();
    for (int i = 0; i < kInterfaces; ++i) ifaces[i].message = strings->iface_message[i].c_str();
}

}  // namespace kbit::loader
