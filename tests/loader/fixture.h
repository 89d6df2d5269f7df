// fixture.h — scenario isolation for the loader tests: a fresh temporary directory per scenario
// holding a private copy of libkbit.so and the fake backends it should see, KBIT_* variables set
// for the scenario only, and typed access to the copy's exports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kbit/kbit_loader.h"

namespace loader_test {

// The loader API of one libkbit.so copy, typed from abi/kbit_loader.def.
struct LoaderApi {
#define KBIT_FN(minor, ret, name, params, args, variant) ret(*name) params = nullptr;
#include "kbit_loader.def"
#undef KBIT_FN
    uint32_t (*kbit_loader_interface_version)(void) = nullptr;
};

// A directory under $TMPDIR (or /tmp), canonical path, removed with its contents at the end.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    // Copies `file` into the directory (as `as`, default its own name); returns the new path. Copies
    // and subdirectories are writable by their owner only (the loader warns otherwise), whatever
    // the umask of the build.
    std::string add(const std::string& file, const std::string& as = "") const;
    // Creates a subdirectory (canonical path returned).
    std::string subdir(const std::string& name) const;

private:
    std::string path_;
};

// Clears KBIT_BACKEND, KBIT_BACKEND_PATH, KBIT_LOADER_DEBUG, KBIT_LOG and KBIT_LOADER_ISOLATE for a
// scenario and restores them after.
class Env {
public:
    Env();
    ~Env();
    void set(const char* name, const std::string& value);
    void unset(const char* name);

private:
    std::vector<std::pair<std::string, std::string>> saved_;
    std::vector<std::string> unset_;
};

// A private copy of a loader (default: the build's libkbit.so) as <dir>/libkbit.so, dlopened with
// RTLD_LOCAL, so each scenario starts with a loader that has chosen no default backend yet.
class Loader {
public:
    explicit Loader(const std::string& dir, const std::string& source = KBIT_TEST_LOADER);
    ~Loader();
    Loader(const Loader&) = delete;
    Loader& operator=(const Loader&) = delete;
    // Any export of the copy (a trampoline, a version symbol); fails the test if absent. Uses Catch
    // assertions, so call it from the test's thread only.
    template <class F>
    F sym(const char* name) const {
        return reinterpret_cast<F>(raw_sym(name));
    }
    void* raw_sym(const char* name) const;
    // kbit_last_error_message() of this copy (safe from any thread).
    std::string last_error() const { return last_error_fn(); }

    LoaderApi api;
    const char* (*last_error_fn)(void) = nullptr;
    std::string path;
    void* handle = nullptr;
};

// kbit_loader_open() through a loader copy: the status, the handle (NULL on failure) and the
// message kbit_last_error_message() reports for a failure ("" on success).
struct Opened {
    kbit_status status;
    kbit_backend* backend;
    std::string message;
};
Opened open_backend(const Loader& loader, const char* spec);

// The start of a scenario, as Catch2 fixtures (TEST_CASE_METHOD(Scenario, ...)): a fresh directory
// `dir` and cleared KBIT_* variables `env` ...
struct Sandbox {
    TempDir dir;
    Env env;
};

// ... and a private loader copy `l` in the directory. The copy looks at the directory and the
// variables only when called, so fakes may be added and variables set after it is made.
struct Scenario : Sandbox {
    Loader l{dir.path()};
    // Copies fake `variant` into the directory (the copy's path is kept in `path`) and opens that
    // copy by its path with kbit_loader_open().
    Opened open_fake(const std::string& variant);
    std::string path;
};

// Calls a function with value-initialised arguments (NULL pointers, zeros): the fakes ignore them.
template <class R, class... A>
R call_with_zeros(R (*fn)(A...)) {
    return fn(A{}...);
}

// The `kbit` command run with the loader copy in `dir` (copied there if absent; LD_LIBRARY_PATH), so
// that it sees the scenario's backends only. `args` is shell text.
struct CommandResult {
    int status;  // exit status, or 128 + the signal that killed it
    std::string output;  // stdout and stderr
};
CommandResult run_kbit(const std::string& dir, const std::string& args);

// A shell command, with stderr into the output.
CommandResult run_command(const std::string& command);

// Path of a fake variant: <build>/tests/loader/fakes/libkbit_<variant>.so.
std::string fake(const std::string& variant);
// Path of a fake that crashes, exits or hangs: <build>/tests/loader/fakes/crashing/libkbit_<variant>.so.
std::string crashing_fake(const std::string& variant);

// The test controls of a fake that is already loaded (by a loader) at `path`.
class FakeControls {
public:
    explicit FakeControls(const std::string& path);
    ~FakeControls();
    FakeControls(const FakeControls&) = delete;
    FakeControls& operator=(const FakeControls&) = delete;
    int (*probe_calls)(void) = nullptr;
    void (*set_result)(int32_t) = nullptr;
    const char* (*last_call)(void) = nullptr;
    void* handle = nullptr;
};

// Everything written to file descriptor 2 while alive (KBIT_LOADER_DEBUG output).
class StderrCapture {
public:
    StderrCapture();
    ~StderrCapture();
    std::string finish();

private:
    int saved_fd_ = -1;
    std::string file_;
    bool done_ = false;
};

// Number of memory mappings of the file at `path` in this process (/proc/self/maps).
int mappings(const std::string& path);
inline bool is_mapped(const std::string& path) { return mappings(path) > 0; }

// "MAJOR.MINOR".
std::string version(uint32_t packed);

// What this process is, as the loader names it in ELF machine mismatches ("x86-64 (62)").
std::string this_machine();
// The other 64-bit machine the foreign fakes are built for (libkbit_crafted64.so and, with clang, the
// real fake foreign_fake()): AArch64 on x86-64, x86-64 on AArch64; as the loader names it.
std::string foreign_machine();
const char* foreign_fake();

}  // namespace loader_test
