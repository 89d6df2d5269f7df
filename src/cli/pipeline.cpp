// pipeline.cpp — the computing threads and the write-behind thread of `kbit quantize` /
// `kbit dequantize` (pipeline.h).
#include "pipeline.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "failure.h"

namespace kbit::cli {

namespace {

// Elements per piece of a tensor: small enough that two threads end a 4096x4096 weight within a few
// percent of each other, large enough that the backend's per-call checks do not show.
constexpr int64_t kPieceElements = int64_t{1} << 18;

}  // namespace

// The command splits the work itself (ComputeThreads) and calls the backend from each of its threads
// with one OpenMP thread: libgomp reads OMP_NUM_THREADS when the backend is loaded, which is after
// this. The backend's own split is static, so a team member that the writing thread displaces holds
// up the whole team at the end of every call (measured: two OpenMP threads beside the writer on two
// cores were slower than one); the command's pieces are claimed one at a time, so the threads the
// writer leaves alone take more of them.
int command_threads() {
    int n = 0;
    if (const char* e = std::getenv("OMP_NUM_THREADS")) n = std::atoi(e);
    if (n <= 0) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    setenv("OMP_NUM_THREADS", "1", 1);
    return std::max(n, 1);
}

void ComputeThreads::run(int64_t total, int64_t piece, const std::function<void(int64_t, int64_t)>& body) const {
    const int64_t pieces = (total + piece - 1) / piece;
    if (threads_ < 2 || pieces < 2) {
        if (total > 0) body(0, total);
        return;
    }
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex m;
    std::string failure;
    auto work = [&] {
        try {
            for (int64_t p; !failed.load(std::memory_order_relaxed) && (p = next.fetch_add(1)) < pieces;)
                body(p * piece, std::min(total, (p + 1) * piece));
        } catch (const std::exception& e) {  // Failure, bad_alloc: the message is read in this thread
            std::lock_guard<std::mutex> lock(m);
            if (!failed.exchange(true)) failure = e.what();
        }
    };
    std::vector<std::thread> helpers;
    for (int t = 1; t < std::min<int64_t>(threads_, pieces); ++t) {
        try {
            helpers.emplace_back(work);
        } catch (const std::system_error&) {  // no more threads: the ones running take every piece
            break;
        }
    }
    work();
    for (std::thread& h : helpers) h.join();
    if (failed) throw Failure(failure);
}

int64_t piece_of(int64_t blocksize) {
    const int64_t unit = blocksize % 2 == 0 ? blocksize : 2 * blocksize;
    return std::max<int64_t>(1, kPieceElements / unit) * unit;
}

int64_t rows_per_piece(int64_t cols) { return std::max<int64_t>(1, kPieceElements / std::max<int64_t>(cols, 1)); }

void WriteBehind::submit(std::function<void()> write) {
    if (!threaded_) {
        write();
        return;
    }
    wait();
    pending_ = std::async(std::launch::async, [write = std::move(write)]() -> std::string {
        try {
            write();
            return {};
        } catch (const Failure& f) {  // the message is read in this thread (it is thread-local)
            return f.what();
        }
    });
}

void WriteBehind::wait() {
    if (!pending_.valid()) return;
    const std::string failure = pending_.get();
    if (!failure.empty()) throw Failure(failure);
}

WriteBehind::~WriteBehind() {
    if (pending_.valid()) pending_.wait();  // a failure elsewhere: the caller discards the writers next
}

}  // namespace kbit::cli
