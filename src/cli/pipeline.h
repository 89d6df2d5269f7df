// pipeline.h — how `kbit quantize` / `kbit dequantize` keep the machine busy: the command's threads
// (ComputeThreads) take a tensor's pieces one at a time, each calling the backend with one OpenMP
// thread, while the previous tensor is written on a thread of its own (WriteBehind). docs/cli.md and
// bench/RESULTS.md say why this split and not the backend's own.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <string>

namespace kbit::cli {

// The command's threads: OMP_NUM_THREADS (its first level), else the CPUs this process may run on.
// Sets OMP_NUM_THREADS=1 for the backend, which is loaded after this.
int command_threads();

// Runs body(begin, end) over [0, total) in pieces of `piece` (the last one shorter) on `threads`
// threads, the calling one among them, each taking the next piece when it finishes one. The first
// failure stops the others taking pieces and is rethrown here.
class ComputeThreads {
  public:
    explicit ComputeThreads(int threads) : threads_(threads) {}
    int count() const { return threads_; }
    void run(int64_t total, int64_t piece, const std::function<void(int64_t, int64_t)>& body) const;

  private:
    int threads_;
};

// Elements per piece of a 4-bit tensor: whole blocks, and an even count, so that each piece starts on
// a whole packed byte.
int64_t piece_of(int64_t blocksize);
// Rows per piece of an int8 tensor: whole rows (each row has its own scale), at least one.
int64_t rows_per_piece(int64_t cols);

// Writes each finished tensor on a thread of its own (when `threaded`), so that writing tensor i (the
// kernel's copies into the page cache, one thread per file) overlaps computing tensor i + 1. One write
// is in flight at a time: a writer is used by one thread at a time, and a caller reuses a buffer only
// once the write that read it has returned (two buffer sets, alternating, suffice).
class WriteBehind {
  public:
    explicit WriteBehind(bool threaded) : threaded_(threaded) {}
    // Waits for the write in flight (rethrowing its failure), then starts `write`.
    void submit(std::function<void()> write);
    // Waits for the write in flight; throws its failure.
    void wait();
    ~WriteBehind();

  private:
    bool threaded_;
    std::future<std::string> pending_;
};

}  // namespace kbit::cli
