#include "candidate.h"

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

void Candidate::point_strings() {
    pub.name = strings->name.c_str();
    pub.path = strings->path.c_str();
    pub.reason = strings->reason.c_str();
    for (int i = 0; i < kInterfaces; ++i) ifaces[i].message = strings->iface_message[i].c_str();
}

}  // namespace kbit::loader
