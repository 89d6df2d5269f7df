#include "fixture.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace loader_test {
namespace {

const char* const kVariables[] = {"KBIT_BACKEND", "KBIT_BACKEND_PATH", "KBIT_LOADER_DEBUG", "KBIT_LOG",
                                  "KBIT_LOADER_ISOLATE"};

std::string canonical(const std::string& p) { return fs::canonical(p).string(); }

}  // namespace

TempDir::TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && base[0] ? base : "/tmp") + "/kbit-loader-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path_ = canonical(buf.data());
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

std::string TempDir::add(const std::string& file, const std::string& as) const {
    const std::string target = path_ + "/" + (as.empty() ? fs::path(file).filename().string() : as);
    fs::copy_file(file, target, fs::copy_options::overwrite_existing);
    fs::permissions(target, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
    return target;
}

std::string TempDir::subdir(const std::string& name) const {
    const std::string dir = path_ + "/" + name;
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
    return canonical(dir);
}

Env::Env() {
    for (const char* name : kVariables) {
        if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
        else unset_.emplace_back(name);
        ::unsetenv(name);
    }
}

Env::~Env() {
    for (const char* name : kVariables) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
}

void Env::set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

void Env::unset(const char* name) { ::unsetenv(name); }

Loader::Loader(const std::string& dir, const std::string& source) {
    path = dir + "/libkbit.so";
    fs::copy_file(source, path, fs::copy_options::overwrite_existing);
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    INFO(dlerror());
    REQUIRE(handle != nullptr);
#define KBIT_FN(minor, ret, name, params, args, variant) api.name = reinterpret_cast<decltype(api.name)>(raw_sym(#name));
#include "kbit_loader.def"
#undef KBIT_FN
    api.kbit_loader_interface_version =
        reinterpret_cast<uint32_t (*)(void)>(raw_sym("kbit_loader_interface_version"));
    last_error_fn = sym<const char* (*)(void)>("kbit_last_error_message");
}

Loader::~Loader() {
    if (handle != nullptr) dlclose(handle);
}

void* Loader::raw_sym(const char* name) const {
    void* p = dlsym(handle, name);
    INFO("symbol " << name << " of " << path);
    REQUIRE(p != nullptr);
    return p;
}

Opened open_backend(const Loader& loader, const char* spec) {
    kbit_backend* b = nullptr;
    const kbit_status status = loader.api.kbit_loader_open(spec, &b);
    return {status, b, status == KBIT_STATUS_SUCCESS ? std::string() : loader.last_error()};
}

Opened Scenario::open_fake(const std::string& variant) {
    path = dir.add(fake(variant));
    return open_backend(l, path.c_str());
}

CommandResult run_kbit(const std::string& dir, const std::string& args) {
    const std::string loader = dir + "/libkbit.so";
    if (!fs::exists(loader)) fs::copy_file(KBIT_TEST_LOADER, loader);
    return run_command("LD_LIBRARY_PATH='" + dir + "' " KBIT_TEST_EMULATOR " '" KBIT_TEST_CLI "' " + args);
}

CommandResult run_command(const std::string& command) {
    std::fflush(nullptr);
    FILE* p = popen((command + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

std::string fake(const std::string& variant) { return std::string(KBIT_TEST_FAKE_DIR) + "/libkbit_" + variant + ".so"; }

std::string crashing_fake(const std::string& variant) {
    return std::string(KBIT_TEST_FAKE_DIR) + "/crashing/libkbit_" + variant + ".so";
}

FakeControls::FakeControls(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    INFO(path << " is loaded");
    REQUIRE(handle != nullptr);
    probe_calls = reinterpret_cast<int (*)(void)>(dlsym(handle, "kbit_fake_probe_calls"));
    set_result = reinterpret_cast<void (*)(int32_t)>(dlsym(handle, "kbit_fake_set_result"));
    last_call = reinterpret_cast<const char* (*)(void)>(dlsym(handle, "kbit_fake_last_call"));
    REQUIRE(probe_calls != nullptr);
    REQUIRE(set_result != nullptr);
    REQUIRE(last_call != nullptr);
}

FakeControls::~FakeControls() {
    if (handle != nullptr) dlclose(handle);
}

StderrCapture::StderrCapture() {
    char name[] = "/tmp/kbit-loader-stderr-XXXXXX";
    int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    file_ = name;
    std::fflush(stderr);
    saved_fd_ = dup(2);
    dup2(fd, 2);
    close(fd);
}

std::string StderrCapture::finish() {
    if (!done_) {
        std::fflush(stderr);
        dup2(saved_fd_, 2);
        close(saved_fd_);
        done_ = true;
    }
    std::ifstream in(file_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

StderrCapture::~StderrCapture() {
    finish();
    ::unlink(file_.c_str());
}

int mappings(const std::string& path) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    int n = 0;
    while (std::getline(maps, line))
        if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0) ++n;
    return n;
}

std::string version(uint32_t packed) {
    return std::to_string(KBIT_VERSION_MAJOR_OF(packed)) + "." + std::to_string(KBIT_VERSION_MINOR_OF(packed));
}

std::string foreign_machine() {
#if defined(__aarch64__)
    return "x86-64 (ELF machine 62)";
#else
    return "AArch64 (ELF machine 183)";
#endif
}

const char* foreign_fake() {
#if defined(__aarch64__)
    return "x86_64";
#else
    return "aarch64";
#endif
}

std::string this_machine() {
#if defined(__x86_64__)
    return "x86-64 (62)";
#elif defined(__aarch64__)
    return "AArch64 (183)";
#else
    return "unknown";
#endif
}

}  // namespace loader_test
