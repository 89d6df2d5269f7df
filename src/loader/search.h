// search.h — where the loader looks for backends: KBIT_BACKEND, KBIT_BACKEND_PATH, and the directory
// of libkbit.so itself (never the current directory). Read anew on every call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit::loader {

struct SearchEntry {
    std::string text;  // KBIT_BACKEND's value, or a directory
    int32_t source;    // KBIT_SOURCE_*
};

struct SearchPlan {
    bool backend_set = false;        // KBIT_BACKEND is set and not empty
    std::string backend;             // its value (a name or a path)
    std::vector<SearchEntry> dirs;   // KBIT_BACKEND_PATH directories, then the loader's own, no repeats
    std::vector<std::string> notes;  // entries that were ignored, and why (for KBIT_LOADER_DEBUG)
};

SearchPlan read_search_plan();

// Absolute path of libkbit.so ("" if unknown); its directory ends the search order.
const std::string& loader_library_path();

// A backend name: non-empty letters, digits, '_' and '-'.
bool valid_backend_name(const std::string& name);

// True when `spec` names a file (contains '/') rather than a backend.
inline bool is_path(const std::string& spec) { return spec.find('/') != std::string::npos; }

// A path that does not start with '/' would be looked up from the current directory, which the
// loader never searches: it is refused with this reason.
inline bool is_relative_path(const std::string& spec) { return is_path(spec) && spec[0] != '/'; }
inline std::string relative_path_problem(const std::string& spec) {
    return "'" + spec + "' is a relative path: an absolute path is needed (the current directory is never searched)";
}

// NAME for a file libkbit_NAME.so (any directory), otherwise the file name itself.
std::string backend_name_of(const std::string& path);

// Full paths of the regular files libkbit_<name>.so in `dir` with a valid name, sorted by name.
std::vector<std::string> scan_directory(const std::string& dir);

// The first directory of the plan that holds libkbit_<name>.so: its path, and the directory's
// source in *source. "" when none does.
std::string find_backend(const SearchPlan& plan, const std::string& name, int32_t* source);

// "dir1, dir2" of the plan's directories (for messages), or "no directory" when empty.
std::string directories_text(const SearchPlan& plan);

// True when KBIT_LOADER_DEBUG asks for the loader's diagnostics on stderr.
bool debug_enabled();

}  // namespace kbit::loader
