// After fork() the child has only the forking thread, but GNU OpenMP's thread pool still lists the
// parent's workers: the child's next parallel region waits for them forever. A child therefore runs
// every kernel on its own thread (max_workers() is 1 there); the parent keeps its threads.
#include <pthread.h>

#include <atomic>

#include "parallel_range.h"

namespace kbit::cpu {
namespace {

std::atomic<bool> g_forked_child{false};

void mark_forked_child() { g_forked_child.store(true, std::memory_order_relaxed); }

// Registered when the library is loaded; glibc drops the handler when it is unloaded.
const bool g_fork_handler = pthread_atfork(nullptr, nullptr, mark_forked_child) == 0;

}  // namespace

bool in_forked_child() { return g_forked_child.load(std::memory_order_relaxed); }

}  // namespace kbit::cpu
