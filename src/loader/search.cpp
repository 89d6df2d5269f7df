#include "search.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "kbit/kbit_loader.h"

namespace kbit::loader {
namespace {

constexpr const char kPrefix[] = "libkbit_";
constexpr const char kSuffix[] = ".so";
// kbit's own libraries of that name pattern that are not backends: the scan skips them, so `kbit info`
// does not list the checkpoint reader (libkbit_io.so, installed beside the backends) as a rejected
// candidate. Naming one explicitly (KBIT_BACKEND=io) still opens it and rejects it with the reason.
constexpr const char* kNotBackends[] = {"io"};

bool is_directory(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string canonical(const std::string& path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

void add_directory(SearchPlan& plan, std::vector<std::string>& seen, const std::string& dir, int32_t source) {
    const std::string key = canonical(dir);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
    seen.push_back(key);
    plan.dirs.push_back({dir, source});
}

}  // namespace

const std::string& loader_library_path() {
    static const std::string path = [] {
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(&read_search_plan), &info) == 0 || info.dli_fname == nullptr)
            return std::string();
        return canonical(info.dli_fname);
    }();
    return path;
}

SearchPlan read_search_plan() {
    SearchPlan plan;
    std::vector<std::string> seen;
    if (const char* v = secure_getenv("KBIT_BACKEND"); v != nullptr && v[0] != '\0') {
        plan.backend_set = true;
        plan.backend = v;
    }
    if (const char* v = secure_getenv("KBIT_BACKEND_PATH"); v != nullptr) {
        std::string list = v;
        size_t start = 0;
        while (start <= list.size()) {
            size_t end = list.find(':', start);
            if (end == std::string::npos) end = list.size();
            std::string dir = list.substr(start, end - start);
            start = end + 1;
            if (dir.empty()) continue;  // an empty entry never means the current directory
            if (dir[0] != '/')
                plan.notes.push_back("KBIT_BACKEND_PATH entry '" + dir + "' ignored: not an absolute directory");
            else if (!is_directory(dir))
                plan.notes.push_back("KBIT_BACKEND_PATH entry '" + dir + "' ignored: not a directory");
            else
                add_directory(plan, seen, dir, KBIT_SOURCE_KBIT_BACKEND_PATH);
        }
    }
    const std::string& self = loader_library_path();
    if (!self.empty()) add_directory(plan, seen, self.substr(0, self.rfind('/')), KBIT_SOURCE_LOADER_DIRECTORY);
    return plan;
}

bool valid_backend_name(const std::string& name) {
    if (name.empty()) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

std::string backend_name_of(const std::string& path) {
    const std::string file = path.substr(path.rfind('/') + 1);
    const size_t np = sizeof kPrefix - 1, ns = sizeof kSuffix - 1;
    if (file.size() > np + ns && file.compare(0, np, kPrefix) == 0 &&
        file.compare(file.size() - ns, ns, kSuffix) == 0)
        return file.substr(np, file.size() - np - ns);
    return file;
}

std::vector<std::string> scan_directory(const std::string& dir) {
    std::vector<std::string> files;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return files;
    const size_t np = sizeof kPrefix - 1, ns = sizeof kSuffix - 1;
    while (const dirent* e = readdir(d)) {
        const std::string file = e->d_name;
        if (file.size() <= np + ns || file.compare(0, np, kPrefix) != 0 ||
            file.compare(file.size() - ns, ns, kSuffix) != 0)
            continue;
        const std::string path = dir + "/" + file;
        const std::string name = backend_name_of(path);
        const bool not_backend =
            std::any_of(std::begin(kNotBackends), std::end(kNotBackends), [&](const char* n) { return name == n; });
        if (!not_backend && valid_backend_name(name) && is_regular_file(path)) files.push_back(path);
    }
    closedir(d);
    std::sort(files.begin(), files.end());
    return files;
}

std::string find_backend(const SearchPlan& plan, const std::string& name, int32_t* source) {
    for (const SearchEntry& dir : plan.dirs) {
        const std::string path = dir.text + "/" + kPrefix + name + kSuffix;
        if (is_regular_file(path)) {
            *source = dir.source;
            return path;
        }
    }
    return "";
}

std::string directories_text(const SearchPlan& plan) {
    if (plan.dirs.empty()) return "no directory";
    std::string text;
    for (const SearchEntry& dir : plan.dirs) text += (text.empty() ? "" : ", ") + dir.text;
    return text;
}

bool debug_enabled() {
    const char* v = secure_getenv("KBIT_LOADER_DEBUG");  // like the path variables
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace kbit::loader
