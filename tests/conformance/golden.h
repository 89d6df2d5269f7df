// golden.h — golden vectors: a JSON index in tests/golden/ whose cases name byte ranges of a binary
// blob beside it (written by scripts/golden/*.py from bitsandbytes' and torchao's own outputs).
#pragma once

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

// Directory of the golden vectors (tests/golden/ of the source tree the suite was built from, or
// $KBIT_GOLDEN_DIR when set: for a binary run from another checkout or machine), with a final '/'.
inline std::string golden_dir() {
    const char* dir = std::getenv("KBIT_GOLDEN_DIR");
    return dir != nullptr && dir[0] != '\0' ? std::string(dir) + "/" : std::string(KBIT_SOURCE_DIR) + "/tests/golden/";
}

// <golden_dir()><index_file> and <golden_dir()><blob_file>.
inline Golden load_golden(const std::string& index_file, const std::string& blob_file) {
    const std::string dir = golden_dir();
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
