// progress.cpp — the progress output of `kbit quantize` / `kbit dequantize` and their signal handling
// (progress.h).
#include "progress.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "failure.h"
#include "fsutil.h"

namespace kbit::cli {

namespace {

// SIGINT / SIGTERM / SIGHUP: stop after the current tensor and remove what was written.
volatile sig_atomic_t g_stop = 0;
void on_signal(int sig) { g_stop = sig; }

}  // namespace

void catch_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

Progress::Progress(const char* verb, bool quiet, size_t tensors, uint64_t bytes)
    : verb_(verb), quiet_(quiet), tty_(isatty(STDERR_FILENO)), tensors_(tensors), bytes_(bytes),
      start_(std::chrono::steady_clock::now()) {}

void Progress::step(const std::string& name, uint64_t bytes, const std::string& what) {
    ++done_;
    done_bytes_ += bytes;
    if (g_stop)
        throw Failure(kbit::fs::format("interrupted by signal %d; nothing was written", static_cast<int>(g_stop)));
    if (quiet_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = s > 0 ? done_bytes_ / s : 0;
    const double eta = rate > 0 ? (bytes_ - done_bytes_) / rate : 0;
    if (tty_) {
        std::fprintf(stderr, "\r\033[K%s [%zu/%zu tensors] %.1f/%.1f MiB, %.0f MiB/s, ETA %d:%02d", verb_, done_,
                     tensors_, done_bytes_ / 1048576.0, bytes_ / 1048576.0, rate / 1048576.0,
                     static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
        if (done_ == tensors_) std::fputc('\n', stderr);
    } else {
        std::fprintf(stderr, "%s %zu/%zu %s: %s\n", verb_, done_, tensors_, name.c_str(), what.c_str());
    }
    std::fflush(stderr);
}

void Progress::finish(const std::string& out) {
    if (quiet_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "%s: wrote %s (%zu tensors, %.1f MiB read in %.1f s)\n", verb_, out.c_str(), tensors_,
                 bytes_ / 1048576.0, s);
}

}  // namespace kbit::cli
