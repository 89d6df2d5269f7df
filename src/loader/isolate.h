// isolate.h — running a piece of work in a forked child process, so that a backend whose
// constructors or probe crash, exit or hang ends the child only. Used by kbit_loader_discover() with
// KBIT_LOADER_ISOLATE (discovery.cpp) and by `kbit info --isolate` (kbit_backend_info()).
#pragma once

#include <functional>
#include <string>

namespace kbit::loader {

struct Isolated {
    std::string data;    // what the child wrote to its pipe
    std::string ending;  // "" when work() returned; else "killed by signal 11 (SIGSEGV)", "exited with
                         // status 3" (also 0: exit() inside work), "timed out after 5 s", or why it
                         // could not start
};

// Forks; the child runs work(fd) (fd: the write end of a pipe to this process, stdout redirected to
// stderr so that vendor output cannot mix into ours) and then _exit(0)s. The child is killed
// (SIGKILL) when it has not ended `seconds` after the start.
Isolated run_isolated(int seconds, const std::function<void(int fd)>& work);

// Writes all of `data` to fd (false on an error).
bool write_all(int fd, const std::string& data);

}  // namespace kbit::loader
