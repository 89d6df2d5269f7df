#include "file_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

namespace kbit::loader {
namespace {

std::string parent(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

void check(const std::string& kind, const std::string& path, std::vector<std::string>* warnings) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return;  // the validation reports a missing file
    if ((st.st_mode & 022) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        const char* who = (st.st_mode & 022) == 022 ? "group and others"
                          : (st.st_mode & 020) != 0 ? "its group" : "others";
        warnings->push_back(kind + " " + path + " is writable by " + who + " (mode " + mode + ")");
    }
    if (st.st_uid != 0 && st.st_uid != geteuid())
        warnings->push_back(kind + " " + path + " is owned by uid " + std::to_string(st.st_uid) +
                            ", neither root nor this process's user (uid " + std::to_string(geteuid()) + ")");
}

std::string real(const std::string& path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

}  // namespace

FileTrust check_file_trust(const std::string& path) {
    FileTrust t;
    const std::string dir = parent(path);
    check("directory", dir, &t.warnings);
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        t.target = real(path);
        if (t.target.empty()) return t;  // a dangling link: the validation rejects it
        check("file", t.target, &t.warnings);
        if (parent(t.target) != real(dir)) check("directory", parent(t.target), &t.warnings);
    } else {
        check("file", path, &t.warnings);
    }
    return t;
}

}  // namespace kbit::loader
