// fsutil.h — the file-system helpers that libkbit_io.so and the kbit command share (static library
// kbit_fsutil, linked into both: libkbit_io.so exports only its C API, so the command cannot call
// these through it). Paths, whole files, JSON files, and outputs that appear only when complete: a
// file or directory is written under a temporary name beside its destination and renamed over it at
// the end, so a reader never sees half an output and a failure leaves nothing behind.
// Failures throw Error, whose message names the path; each caller turns it into its own (the
// library's status and message, the command's exit status 1).
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kbit::fs {

// A file-system call that failed, with its message ("PATH: cannot ...: strerror").
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// printf-style std::string, of any length.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

bool is_dir(const std::string& p);   // follows a link
bool is_file(const std::string& p);  // a regular file; follows a link
bool exists(const std::string& p);   // anything there, a dangling link included

std::string strip_slashes(std::string p);             // "dir//" -> "dir"; "/" stays
std::string base_name(const std::string& p);          // after the last '/'
std::string dir_of(const std::string& p);             // before the last '/': "." without one, "/" at the root
std::string join(const std::string& dir, const std::string& name);  // one '/' between them

// The whole file. Throws Error ("P: cannot open: ...").
std::string read_file(const std::string& p);
// Replaces the file with `text`. Throws Error ("P: cannot write").
void write_file(const std::string& p, const std::string& text);
// The file parsed as JSON. Throws Error ("P: cannot open: ...", "P: not valid JSON (...)").
nlohmann::json read_json(const std::string& p);

// Removes a directory and everything below it, as far as it can (no error).
void remove_tree(const std::string& dir);

// What TempFile and TempDir hold: the path they are published to and their temporary name. Not copyable:
// one owner publishes or removes it.
class PendingPath {
  protected:
    PendingPath() = default;
    PendingPath(const PendingPath&) = delete;
    PendingPath& operator=(const PendingPath&) = delete;
    ~PendingPath() = default;

    std::string path_;
    std::string tmp_path_;  // empty while it has no name of its own: an unnamed file, a published directory
};

// The file being written for `path`: in path's directory, without a name (O_TMPFILE) where the file
// system and /proc allow it, so that even a process killed part way (SIGKILL, the OOM killer) leaves
// nothing; elsewhere PATH.kbit-tmp-XXXXXX. publish() gives it path's name; until then the destructor
// removes it.
class TempFile : PendingPath {
  public:
    TempFile() = default;
    ~TempFile();
    // Creates it, with the mode open(path, O_CREAT, 0666) would give. Throws Error.
    void create(const std::string& path);
    int fd() const { return fd_; }
    // The name messages give the file being written: path until it has a name of its own.
    const std::string& shown() const { return tmp_path_.empty() ? path_ : tmp_path_; }
    // Names it beside path if it has no name yet (a link never replaces a file), closes it and renames
    // it over path. Throws Error, having removed it.
    void publish();

  private:
    int fd_ = -1;
};

// An unnamed scratch file in path's directory (mode 0600), or where the file system has no O_TMPFILE
// a named one, unlinked at once: the bytes of a file before its layout is known. -1 (errno) on failure.
int open_scratch(const std::string& path);

// The directory being filled for `path`: PATH.kbit-tmp-XXXXXX beside it (a directory cannot be
// unnamed, so a killed process leaves it), renamed over path by publish(); until then the destructor
// removes it with all it holds.
class TempDir : PendingPath {
  public:
    TempDir() = default;
    ~TempDir();
    // Creates it (mode 0700). Throws Error.
    void create(const std::string& path);
    const std::string& name() const { return tmp_path_; }
    // Renames it over path. Throws Error (it stays, for the destructor to remove).
    void publish();
};

}  // namespace kbit::fs
