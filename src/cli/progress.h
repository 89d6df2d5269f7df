// progress.h — what `kbit quantize` / `kbit dequantize` print while they work (a redrawn line on a
// terminal, a line per tensor elsewhere, nothing with --quiet), and the signals that stop them: each
// step is where a job notices SIGINT / SIGTERM / SIGHUP, between two tensors.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kbit::cli {

// From now on SIGINT, SIGTERM and SIGHUP stop the job at its next Progress::step(), which throws
// Failure; the job's destructors then remove what was written.
void catch_signals();

// The terminal progress line or plain lines.
class Progress {
  public:
    Progress(const char* verb, bool quiet, size_t tensors, uint64_t bytes);
    // Tensor `name` (`bytes` of the input) is done: `what` became of it. Throws Failure after a signal.
    void step(const std::string& name, uint64_t bytes, const std::string& what);
    // The last line, naming the output.
    void finish(const std::string& out);

  private:
    const char* verb_;
    bool quiet_, tty_;
    size_t tensors_, done_ = 0;
    uint64_t bytes_, done_bytes_ = 0;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace kbit::cli
