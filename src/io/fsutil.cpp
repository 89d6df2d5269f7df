// fsutil.cpp — the file-system helpers of fsutil.h, shared by libkbit_io.so and the kbit command.
#include "fsutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace kbit::fs {

namespace {

// The temporary name of an output: its own name and a suffix (mkstemp / mkdtemp fill in the Xs).
std::string temp_template(const std::string& path) { return path + ".kbit-tmp-XXXXXX"; }

Error cannot_create(const char* what, const std::string& path, const char* why) {
    return Error(format("%s: cannot create a %s beside it: %s", path.c_str(), what, why));
}

Error cannot_rename(const std::string& path, const std::string& tmp, int e) {
    return Error(format("%s: cannot rename %s to it: %s", path.c_str(), tmp.c_str(), std::strerror(e)));
}

// An unnamed file in dir (O_TMPFILE, mode 0666 & ~umask), or -1 where the file system has none or
// /proc, through which publish() links it in, is not mounted (a bare chroot): then the caller names one.
int open_unnamed(const std::string& dir) {
    if (access("/proc/self/fd", X_OK) != 0) return -1;
    return open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
}

// A name beside path that is not there yet: PATH.kbit-tmp- and six random letters or digits.
std::string fresh_name(const std::string& path) {
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[6] = {};
    if (getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))  // never short for 6 bytes; a fallback anyway
        for (size_t i = 0; i < sizeof r; ++i) r[i] = static_cast<unsigned char>(std::rand());
    std::string name = path + ".kbit-tmp-";
    for (unsigned char c : r) name += kChars[c % (sizeof kChars - 1)];
    return name;
}

// Gives the unnamed file fd a fresh name beside path (a link never replaces a file), for publish() to
// rename over path as it renames a named temporary file.
std::string link_unnamed(int fd, const std::string& path) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string tmp = fresh_name(path);
        if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0) return tmp;
        if (errno != EEXIST) throw cannot_create("file", path, std::strerror(errno));
    }
    throw cannot_create("file", path, "no free temporary name");
}

}  // namespace

std::string format(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return fmt;
    if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
    std::string out(static_cast<size_t>(n) + 1, '\0');
    va_start(ap, fmt);
    std::vsnprintf(&out[0], out.size(), fmt, ap);
    va_end(ap);
    out.resize(static_cast<size_t>(n));
    return out;
}

bool is_dir(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool exists(const std::string& p) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0;
}

std::string strip_slashes(std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
}
std::string base_name(const std::string& p) {
    const size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}
std::string dir_of(const std::string& p) {
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : p.substr(0, slash);
}
std::string join(const std::string& dir, const std::string& name) {
    return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string read_file(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw Error(format("%s: cannot open: %s", p.c_str(), std::strerror(errno)));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
    out.close();
    if (!out) throw Error(format("%s: cannot write", p.c_str()));
}

nlohmann::json read_json(const std::string& p) {
    const std::string text = read_file(p);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(format("%s: not valid JSON (%s)", p.c_str(), e.what()));
    }
}

void remove_tree(const std::string& dir) {
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            const std::string n = e->d_name;
            if (n == "." || n == "..") continue;
            const std::string p = dir + "/" + n;
            if (is_dir(p)) remove_tree(p);
            else unlink(p.c_str());
        }
        closedir(d);
    }
    rmdir(dir.c_str());
}

// ---- TempFile ---------------------------------------------------------------------------------

TempFile::~TempFile() {
    if (fd_ < 0) return;
    close(fd_);
    if (!tmp_path_.empty()) unlink(tmp_path_.c_str());
}

void TempFile::create(const std::string& path) {
    path_ = path;
    fd_ = open_unnamed(dir_of(path));
    if (fd_ >= 0) return;
    std::string tmpl = temp_template(path);
    const int fd = mkstemp(&tmpl[0]);
    if (fd < 0) throw cannot_create("file", path, std::strerror(errno));
    fd_ = fd;
    tmp_path_ = tmpl;
    const mode_t mask = umask(0);  // the mode open(..., 0666) would give
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) { /* keep mkstemp's 0600 */ }
}

void TempFile::publish() {
    if (tmp_path_.empty()) tmp_path_ = link_unnamed(fd_, path_);  // while it is open
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) {
        unlink(tmp_path_.c_str());
        throw Error(format("%s: cannot write: %s", tmp_path_.c_str(), std::strerror(errno)));
    }
    if (rename(tmp_path_.c_str(), path_.c_str()) != 0) {
        const int e = errno;
        unlink(tmp_path_.c_str());
        throw cannot_rename(path_, tmp_path_, e);
    }
}

int open_scratch(const std::string& path) {
    int s = open(dir_of(path).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (s < 0) {  // no O_TMPFILE on this file system: a named file, unlinked at once
        std::string tmpl = path + ".kbit-scratch-XXXXXX";
        s = mkstemp(&tmpl[0]);
        if (s >= 0) unlink(tmpl.c_str());
    }
    return s;
}

// ---- TempDir ----------------------------------------------------------------------------------

TempDir::~TempDir() {
    if (!tmp_path_.empty()) remove_tree(tmp_path_);
}

void TempDir::create(const std::string& path) {
    path_ = path;
    std::string tmpl = temp_template(path);
    if (!mkdtemp(&tmpl[0])) throw cannot_create("directory", path, std::strerror(errno));
    tmp_path_ = tmpl;
}

void TempDir::publish() {
    if (rename(tmp_path_.c_str(), path_.c_str()) != 0) throw cannot_rename(path_, tmp_path_, errno);
    tmp_path_.clear();
}

}  // namespace kbit::fs
