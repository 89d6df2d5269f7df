#include "isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kbit::loader {
namespace {

// Written by the child after work() returned, to tell that from a vendor's exit(0).
const std::string kReturned("\0kbit: work returned", 20);

long long now_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

std::string signal_text(int sig) {
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev != nullptr ? std::string(" (SIG") + abbrev + ")" : "");
}

}  // namespace

bool write_all(int fd, const std::string& data) {
    for (size_t done = 0; done < data.size();) {
        const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

Isolated run_isolated(int seconds, const std::function<void(int fd)>& work) {
    Isolated r;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        r.ending = std::string("could not start a child process: pipe: ") + std::strerror(errno);
        return r;
    }
    std::fflush(nullptr);  // else a child that calls exit() writes our buffered output a second time
    const pid_t pid = fork();
    if (pid < 0) {
        r.ending = std::string("could not start a child process: fork: ") + std::strerror(errno);
        ::close(fds[0]);
        ::close(fds[1]);
        return r;
    }
    if (pid == 0) {
        ::close(fds[0]);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        // The crash ends the child, not a handler the program installed (which might report it as
        // the program's own failure, or go on).
        for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS}) signal(sig, SIG_DFL);
        try {
            work(fds[1]);
            write_all(fds[1], kReturned);
        } catch (...) {
            _exit(125);
        }
        _exit(0);
    }
    ::close(fds[1]);
    const long long deadline = now_ms() + seconds * 1000LL;
    bool timed_out = false;
    for (;;) {  // read until the child closes its end (it ended) or the time is up
        const long long left = deadline - now_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        const int ready = poll(&p, 1, static_cast<int>(left));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        char buf[4096];
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        r.data.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    for (;;) {  // a child may close the pipe and still not end
        const pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) break;
        if (timed_out || now_ms() >= deadline) {
            timed_out = true;
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            break;
        }
        usleep(5000);
    }
    const bool returned = r.data.size() >= kReturned.size() &&
                          r.data.compare(r.data.size() - kReturned.size(), kReturned.size(), kReturned) == 0;
    if (returned) r.data.resize(r.data.size() - kReturned.size());
    if (timed_out) r.ending = "timed out after " + std::to_string(seconds) + " s";
    else if (WIFSIGNALED(status)) r.ending = signal_text(WTERMSIG(status));
    else if (WIFEXITED(status) && (WEXITSTATUS(status) != 0 || !returned))
        r.ending = "exited with status " + std::to_string(WEXITSTATUS(status));
    return r;
}

}  // namespace kbit::loader
