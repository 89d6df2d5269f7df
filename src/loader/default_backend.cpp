#include "default_backend.h"

#include <atomic>

#include "discovery.h"
#include "loader_state.h"

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
};

// Constructed on first use (C++ runs it in one thread while the others wait) and never destroyed:
// static destructors and atexit handlers of the program may still call kbit functions at exit (and
// the backend's own destructors run when the process ends, as for any library). So a dlclose() of
// libkbit.so leaves its default backend loaded; explicit handles are closed by their owners.
const DefaultChoice& choice() {
    static const DefaultChoice* const c = new DefaultChoice;
    return *c;
}

// A backend's probe, constructor or destructor that calls a trampoline while the loader runs it (in
// this thread) must not start the choice, or re-enter it: C++ would throw recursive_init_error from
// the static above and terminate. It gets this stand-in, whose stubs say why. (Destroyed with
// libkbit.so: unlike the default, only vendor code that the loader runs can reach it.)
const kbit_backend& reentry_backend() {
    static const std::unique_ptr<kbit_backend> b = make_reentry_backend();
    return *b;
}

}  // namespace

const kbit_backend& default_backend() {
    if (const kbit_backend* b = default_backend_if_chosen()) return *b;
    if (in_vendor_code()) return reentry_backend();
    return *choice().backend;
}

const std::string& default_backend_problem() { return choice().problem; }

}  // namespace kbit::loader
