// file_trust.h — who else could change the code that a backend file makes this process run. Used by
// the loader (its candidate records, KBIT_LOADER_DEBUG) and by `kbit info`, which has no loader API
// field for it and runs the same checks.
#pragma once

#include <string>
#include <vector>

namespace kbit::loader {

struct FileTrust {
    std::string target;                 // the file's realpath when it is a symbolic link, else ""
    std::vector<std::string> warnings;  // one sentence each, naming the file or directory
};

// Checks the file (a symlink's target), the directory it is found in and the target's directory:
// writable by group or others (mode & 022), or owned by a user other than root and this process's
// effective user, as OpenSSH checks its key files. The loader warns and still loads: see docs/loader.md.
FileTrust check_file_trust(const std::string& path);

}  // namespace kbit::loader
