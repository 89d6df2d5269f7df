// golden.h — golden vectors: a JSON index in tests/golden/ whose cases name byte ranges of a binary
// blob beside it (written by scripts/golden/*.py from bitsandbytes' and torchao's own outputs).
#pragma once

#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace kbit_test {

struct Golden {
    nlohmann::json index;
    std::vector<uint8_t> blob;
};

// The directory of the running executable, resolved (no final '/'); empty when it cannot be found.
// /proc/self/exe first; where /proc is not mounted, the path the program was started with (the
// kernel's AT_EXECFN, relative to the starting directory, which the suite never changes).
inline std::string executable_dir() {
    std::string path;
    std::vector<char> buf(4096);
    const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size());
    if (n > 0 && static_cast<size_t>(n) < buf.size()) {
        path.assign(buf.data(), static_cast<size_t>(n));
    } else if (const auto execfn = reinterpret_cast<const char*>(getauxval(AT_EXECFN))) {
        if (char* real = realpath(execfn, nullptr)) {
            path = real;
            std::free(real);
        }
    }
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// Directory of the golden vectors, with a final '/': $KBIT_GOLDEN_DIR when set (any copy of
// tests/golden); else, for an installed suite (<prefix>/bin/kbit-conformance), the installed copy
// <executable's directory>/KBIT_GOLDEN_FROM_BIN (../share/kbit/golden) when it exists; else
// tests/golden of the source tree the suite was built from (a build tree's binary).
inline std::string golden_dir() {
    const char* env = std::getenv("KBIT_GOLDEN_DIR");
    if (env != nullptr && env[0] != '\0') return std::string(env) + "/";
    static const std::string found = [] {
        const std::string exe_dir = executable_dir();
        struct stat st {};
        if (!exe_dir.empty()) {
            const std::string installed = exe_dir + "/" KBIT_GOLDEN_FROM_BIN;
            if (stat(installed.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
                char* real = realpath(installed.c_str(), nullptr);
                const std::string dir = real != nullptr ? real : installed;
                std::free(real);
                return dir + "/";
            }
        }
        return std::string(KBIT_SOURCE_DIR) + "/tests/golden/";
    }();
    return found;
}

// <golden_dir()><index_file> and <golden_dir()><blob_file>.
inline Golden load_golden(const std::string& index_file, const std::string& blob_file) {
    const std::string dir = golden_dir();
    INFO("golden vectors from " << dir << " (KBIT_GOLDEN_DIR overrides)");
    std::ifstream index(dir + index_file);
    REQUIRE(index.good());
    std::ifstream blob(dir + blob_file, std::ios::binary);
    REQUIRE(blob.good());
    return {nlohmann::json::parse(index), std::vector<uint8_t>(std::istreambuf_iterator<char>(blob), {})};
}

// `count` values of V at byte `offset` of the blob.
template <class V>
std::vector<V> golden_array(const std::vector<uint8_t>& blob, size_t offset, size_t count) {
    REQUIRE(offset + count * sizeof(V) <= blob.size());
    std::vector<V> v(count);
    std::memcpy(v.data(), blob.data() + offset, count * sizeof(V));
    return v;
}

// The values of V at {"offset": ..., "bytes": ...}.
template <class V>
std::vector<V> golden_array(const std::vector<uint8_t>& blob, const nlohmann::json& where) {
    const size_t offset = where.at("offset"), bytes = where.at("bytes");
    return golden_array<V>(blob, offset, bytes / sizeof(V));
}

}  // namespace kbit_test
