#include "default_backend.h"

#include <atomic>

#include "discovery.h"

namespace kbit::loader {

std::atomic<const kbit_backend*> g_default_backend{nullptr};

namespace {

struct DefaultChoice {
    std::string problem;  // "" or "no default backend: <why>"
    std::unique_ptr<kbit_backend> backend;

    DefaultChoice() {
        try {
            backend = choose_default(&problem);
        } catch (const std::exception& e) {  // the trampolines must not throw
            backend = nullptr;
            problem = std::string("no default backend: internal error: ") + e.what();
        }
        if (backend == nullptr) {
            const std::string prefix = "no default backend: ";
            backend = make_null_backend(problem.compare(0, prefix.size(), prefix) == 0 ? problem.substr(prefix.size())
                                                                                        : problem);
        }
        backend->loader_owned = true;
        g_default_backend.store(backend.get(), std::memory_order_release);
    }
    ~DefaultChoice() { g_default_backend.store(nullptr, std::memory_order_release); }
};

// Constructed on first use (C++ runs it in one thread while the others wait) and destroyed when
// libkbit.so is unloaded or the process exits, which also closes the backend.
const DefaultChoice& choice() {
    static const DefaultChoice c;
    return c;
}

}  // namespace

const kbit_backend& default_backend() { return *choice().backend; }

const std::string& default_backend_problem() { return choice().problem; }

}  // namespace kbit::loader
