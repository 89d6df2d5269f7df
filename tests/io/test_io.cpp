// test_io.cpp — libkbit_io.so against the checkpoints the Python package wrote
// (tests/io/make_checkpoints.py, run by the ctest fixture io.make_checkpoints into KBIT_IO_TEST_DATA):
// every tensor and every described layer field, every pointed-to byte, the pointers passed straight
// to the kernels (libkbit.so's default backend: the CPU one here) giving Python's dequantized weights,
// the sharded directory, and each bad-file case with its status and message.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kbit/kbit.h"
#include "kbit/kbit_io.h"

namespace {

using nlohmann::json;

const std::string kData = KBIT_IO_TEST_DATA;

json read_json(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    return json::parse(in);
}

std::string hex(const void* p, uint64_t n) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    const auto* b = static_cast<const uint8_t*>(p);
    for (uint64_t i = 0; i < n; ++i) {
        s += digits[b[i] >> 4];
        s += digits[b[i] & 15];
    }
    return s;
}

std::vector<int64_t> shape_of(const int64_t* shape, int32_t ndim) { return std::vector<int64_t>(shape, shape + ndim); }

std::string e_weight_name(const json& exp, const std::string& prefix) {
    return exp["layers"][prefix]["weight_name"].get<std::string>();
}

// numpy's dtype name -> the safetensors one.
std::string safe_dtype(const std::string& numpy) {
    if (numpy == "float32") return "F32";
    if (numpy == "float16") return "F16";
    if (numpy == "uint8") return "U8";
    if (numpy == "int8") return "I8";
    if (numpy == "uint16") return "U16";
    if (numpy == "bfloat16") return "BF16";
    return "?" + numpy;
}

struct Checkpoint {
    kbit_io_checkpoint* ck = nullptr;
    explicit Checkpoint(const std::string& path) {
        const kbit_status s = kbit_io_open(path.c_str(), &ck);
        INFO(kbit_io_last_error_message());
        REQUIRE(s == KBIT_STATUS_SUCCESS);
        REQUIRE(ck != nullptr);
    }
    ~Checkpoint() { kbit_io_close(ck); }
};

// Layer `prefix` of a checkpoint that has it.
const kbit_io_quant* find_quant(const Checkpoint& c, const char* prefix) {
    const kbit_io_quant* q = nullptr;
    REQUIRE(kbit_io_quant_find(c.ck, prefix, &q) == KBIT_STATUS_SUCCESS);
    return q;
}

// A copy of good/'s model.layers.0.q_proj (another file, other keys): its absmax, quant map and weight
// bytes are those good/expected.json records.
void check_recorded_bytes(const kbit_io_quant* q) {
    const json e = read_json(kData + "/good/expected.json")["layers"]["model.layers.0.q_proj"];
    CHECK(hex(q->absmax, q->absmax_bytes) == e["absmax"].get<std::string>());
    CHECK(hex(q->quant_map, 64) == e["quant_map"].get<std::string>());
    CHECK(hex(q->weight, q->weight_bytes) == e["weight"].get<std::string>());
}

void check_against_python(const kbit_io_checkpoint* ck, const json& exp) {
    const json& tensors = exp["tensors"];
    REQUIRE(kbit_io_tensor_count(ck) == tensors.size());
    std::string prev;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t = nullptr;
        REQUIRE(kbit_io_tensor_at(ck, i, &t) == KBIT_STATUS_SUCCESS);
        REQUIRE(t->size == sizeof(kbit_io_tensor));
        INFO(t->name);
        CHECK(std::string(t->name) > prev);  // name order
        prev = t->name;
        REQUIRE(tensors.contains(t->name));
        const json& e = tensors[t->name];
        CHECK(t->dtype_name == safe_dtype(e["dtype"]));
        CHECK(std::string(kbit_io_dtype_name(t->dtype)) == t->dtype_name);
        CHECK(shape_of(t->shape, t->ndim) == e["shape"].get<std::vector<int64_t>>());
        CHECK(t->nbytes == e["hex"].get<std::string>().size() / 2);
        CHECK(hex(t->data, t->nbytes) == e["hex"].get<std::string>());
        const kbit_io_tensor* f = nullptr;
        REQUIRE(kbit_io_tensor_find(ck, t->name, &f) == KBIT_STATUS_SUCCESS);
        CHECK(f == t);
        CHECK(static_cast<const uint8_t*>(t->data) - t->file_offset != nullptr);
    }
    const json& order = exp["order"];
    REQUIRE(kbit_io_quant_count(ck) == order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        const kbit_io_quant* q = nullptr;
        {
            const kbit_status s = kbit_io_quant_describe(ck, i, &q);
            INFO(kbit_io_last_error_message());
            REQUIRE(s == KBIT_STATUS_SUCCESS);
        }
        const std::string prefix = order[i];
        INFO(prefix);
        CHECK(q->size == sizeof(kbit_io_quant));
        CHECK(q->prefix == prefix);
        CHECK(kbit_io_quant_prefix(ck, i) == std::string(q->prefix));
        CHECK(q->weight_name == e_weight_name(exp, prefix));
        CHECK(q->parameter == exp["layers"][prefix]["parameter"].get<bool>());
        CHECK(q->experts == exp["layers"][prefix]["experts"].get<uint64_t>());
        const kbit_io_quant* same = nullptr;
        REQUIRE(kbit_io_quant_find(ck, prefix.c_str(), &same) == KBIT_STATUS_SUCCESS);
        CHECK(same == q);
        const json& e = exp["layers"][prefix];
        CHECK(kbit_io_format_name(q->format) == e["format"].get<std::string>());
        CHECK(shape_of(q->shape, q->ndim) == e["shape"].get<std::vector<int64_t>>());
        uint64_t numel = 1;
        for (int64_t d : e["shape"]) numel *= static_cast<uint64_t>(d);
        CHECK(q->numel == numel);
        CHECK(q->aligned);
        CHECK(hex(q->weight, q->weight_bytes) == e["weight"].get<std::string>());
        if (e["format"] == "int8") {
            CHECK(q->storage_dtype == KBIT_IO_DTYPE_I8);
            CHECK(q->blocksize == 0);
            CHECK(q->dtype == -1);
            CHECK(q->absmax == nullptr);
            CHECK(q->quant_map == nullptr);
            CHECK(!q->nested);
            CHECK(q->weight_bytes == numel);
            REQUIRE(q->scb != nullptr);
            CHECK(hex(q->scb, 4 * static_cast<uint64_t>(q->shape[0])) == e["scb"].get<std::string>());
            continue;
        }
        CHECK(q->blocksize == e["blocksize"].get<int32_t>());
        CHECK(q->dtype_name == e["dtype"].get<std::string>());
        const int32_t dt = e["dtype"] == "float32" ? KBIT_DTYPE_FP32 : e["dtype"] == "float16" ? KBIT_DTYPE_FP16
                                                                                              : KBIT_DTYPE_BF16;
        CHECK(q->dtype == dt);
        CHECK(q->nested == e["nested"].get<bool>());
        CHECK(kbit_io_dtype_name(q->storage_dtype) == safe_dtype(e["storage"]));
        CHECK(q->weight_bytes == (numel + 1) / 2);
        const uint64_t blocks = (numel + q->blocksize - 1) / q->blocksize;
        CHECK(q->blocks == blocks);
        CHECK(q->absmax_dtype == (q->nested ? KBIT_IO_DTYPE_U8 : KBIT_IO_DTYPE_F32));
        CHECK(q->absmax_bytes == blocks * (q->nested ? 1 : 4));
        CHECK(hex(q->absmax, q->absmax_bytes) == e["absmax"].get<std::string>());
        CHECK(hex(q->quant_map, 64) == e["quant_map"].get<std::string>());
        CHECK(q->scb == nullptr);
        if (q->nested) {
            CHECK(q->nested_blocksize == e["nested_blocksize"].get<int32_t>());
            CHECK(q->nested_blocks == (blocks + q->nested_blocksize - 1) / q->nested_blocksize);
            CHECK(hex(q->nested_absmax, 4 * q->nested_blocks) == e["nested_absmax"].get<std::string>());
            CHECK(hex(q->nested_quant_map, 1024) == e["nested_quant_map"].get<std::string>());
            uint32_t bits;
            std::memcpy(&bits, &q->nested_offset, 4);
            CHECK(bits == e["nested_offset_bits"].get<uint32_t>());
        } else {
            CHECK(q->nested_absmax == nullptr);
            CHECK(q->nested_quant_map == nullptr);
            CHECK(q->nested_blocks == 0);
            CHECK(q->nested_blocksize == 0);
            CHECK(q->nested_offset == 0.0f);
        }
        // The pointers go to the kernels as they are (host memory: the CPU backend).
        std::vector<float> absmax(blocks);
        if (q->nested) {
            REQUIRE(kbit_nested_absmax_dequantize(static_cast<const uint8_t*>(q->absmax), q->nested_quant_map,
                                                  q->nested_absmax, q->nested_offset, absmax.data(),
                                                  static_cast<int64_t>(blocks), q->nested_blocksize,
                                                  nullptr) == KBIT_STATUS_SUCCESS);
        } else {
            std::memcpy(absmax.data(), q->absmax, q->absmax_bytes);
        }
        const size_t item = q->dtype == KBIT_DTYPE_FP32 ? 4 : 2;
        std::vector<uint8_t> out(numel * item);
        const int32_t qt = q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4;
        {
            const kbit_status s = kbit_dequantize_4bit(qt, q->dtype, static_cast<const uint8_t*>(q->weight),
                                                       absmax.data(), out.data(), q->blocksize,
                                                       static_cast<int64_t>(numel), nullptr);
            INFO(kbit_last_error_message());
            REQUIRE(s == KBIT_STATUS_SUCCESS);
        }
        CHECK(hex(out.data(), out.size()) == e["dequantized"].get<std::string>());
        // Fused experts [E, N, K] (N * K a multiple of blocksize here): expert x's codes and scales are
        // contiguous slices, and dequantize to its slice of the whole.
        for (uint64_t x = 0; x < q->experts; ++x) {
            INFO("expert " << x);
            const uint64_t per = numel / q->experts, bpe = per / static_cast<uint64_t>(q->blocksize);
            REQUIRE(per % static_cast<uint64_t>(q->blocksize) == 0);
            std::vector<uint8_t> one(per * item);
            REQUIRE(kbit_dequantize_4bit(qt, q->dtype, static_cast<const uint8_t*>(q->weight) + x * per / 2,
                                         absmax.data() + x * bpe, one.data(), q->blocksize, static_cast<int64_t>(per),
                                         nullptr) == KBIT_STATUS_SUCCESS);
            CHECK(hex(one.data(), one.size()) ==
                  e["dequantized"].get<std::string>().substr(2 * x * per * item, 2 * per * item));
        }
    }
}

}  // namespace

TEST_CASE("version") {
    CHECK(kbit_io_interface_version() == KBIT_MAKE_VERSION(KBIT_IO_VERSION_MAJOR, KBIT_IO_VERSION_MINOR));
}

TEST_CASE("a single file matches what Python wrote") {
    const json exp = read_json(kData + "/good/expected.json");
    Checkpoint c(kData + "/good/mixed.safetensors");
    check_against_python(c.ck, exp);
    REQUIRE(kbit_io_shard_count(c.ck) == 1);
    CHECK(std::string(kbit_io_shard_path(c.ck, 0)) == kData + "/good/mixed.safetensors");
    size_t n = 0;
    const char *key = nullptr, *value = nullptr;
    REQUIRE(kbit_io_shard_metadata(c.ck, 0, 0, &n, &key, &value) == KBIT_STATUS_SUCCESS);
    CHECK(n == 1);
    CHECK(std::string(key) == "format");
    CHECK(std::string(value) == "pt");
    // Opening the directory finds nothing (no model.safetensors), an explicit file works.
    kbit_io_checkpoint* none = nullptr;
    CHECK(kbit_io_open((kData + "/good").c_str(), &none) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(none == nullptr);
}

TEST_CASE("a sharded directory matches what Python wrote") {
    const json exp = read_json(kData + "/good/expected.json");
    for (const std::string& path : {kData + "/good/sharded", kData + "/good/sharded/",
                                   kData + "/good/sharded/model.safetensors.index.json"}) {
        INFO(path);
        Checkpoint c(path);
        check_against_python(c.ck, exp);
        REQUIRE(kbit_io_shard_count(c.ck) == exp["shards"].size());
        for (size_t i = 0; i < exp["shards"].size(); ++i) {
            const std::string p = kbit_io_shard_path(c.ck, i);
            CHECK(p == kData + "/good/sharded/" + exp["shards"][i].get<std::string>());
        }
        // A 4-bit layer's tensors are in the first shard, the int8 layer in the second.
        const kbit_io_tensor* t = nullptr;
        REQUIRE(kbit_io_tensor_find(c.ck, "model.layers.0.q_proj.weight.absmax", &t) == KBIT_STATUS_SUCCESS);
        CHECK(t->shard == 0);
        REQUIRE(kbit_io_tensor_find(c.ck, "model.layers.2.int8.SCB", &t) == KBIT_STATUS_SUCCESS);
        CHECK(t->shard == 1);
    }
}

TEST_CASE("a valid file with misaligned float tensors is described with aligned = false") {
    Checkpoint c(kData + "/good/misaligned.safetensors");
    const kbit_io_quant* q = find_quant(c, "model.layers.0.q_proj");
    CHECK(!q->aligned);
    check_recorded_bytes(q);
}

TEST_CASE("a 4-bit layer's companion tensors may sit at deeper keys, as QuantState.from_dict allows") {
    Checkpoint c(kData + "/good/deep_keys.safetensors");
    const kbit_io_quant* q = find_quant(c, "model.layers.0.q_proj");
    const kbit_io_tensor *absmax = nullptr, *quant_map = nullptr;
    REQUIRE(kbit_io_tensor_find(c.ck, "model.layers.0.q_proj.weight.extra.absmax", &absmax) == KBIT_STATUS_SUCCESS);
    REQUIRE(kbit_io_tensor_find(c.ck, "model.layers.0.q_proj.weight.extra.quant_map", &quant_map) ==
            KBIT_STATUS_SUCCESS);
    CHECK(q->absmax == absmax->data);
    CHECK(static_cast<const void*>(q->quant_map) == quant_map->data);
    check_recorded_bytes(q);
}

TEST_CASE("bad files are rejected with a message naming file, tensor and field") {
    const json cases = read_json(kData + "/bad/cases.json");
    REQUIRE(cases.size() >= 40);
    for (const json& c : cases) {
        const std::string file = kData + "/bad/" + c["file"].get<std::string>();
        const std::string where = c["where"], message = c["message"];
        const kbit_status status = c["status"];
        INFO(file << " (" << where << "): expecting '" << message << "'");
        kbit_io_checkpoint* ck = nullptr;
        const kbit_status s = kbit_io_open(file.c_str(), &ck);
        std::string got = kbit_io_last_error_message();
        if (where == "open") {
            INFO("got: " << got);
            CHECK(s == status);
            CHECK(ck == nullptr);
            CHECK(got.rfind("kbit_io_open: ", 0) == 0);
            CHECK(got.find(message) != std::string::npos);
            CHECK(got.find(c["file"].get<std::string>()) != std::string::npos);
            continue;
        }
        {
            INFO("open failed: " << got);
            REQUIRE(s == KBIT_STATUS_SUCCESS);
        }
        const kbit_io_quant* q = nullptr;
        CHECK(kbit_io_quant_find(ck, where.c_str(), &q) == status);
        got = kbit_io_last_error_message();
        INFO("got: " << got);
        CHECK(q == nullptr);
        CHECK(got.rfind("kbit_io_quant_find: ", 0) == 0);
        CHECK(got.find(message) != std::string::npos);
        CHECK(got.find(file) != std::string::npos);
        // The same result by index.
        REQUIRE(kbit_io_quant_count(ck) == 1);
        CHECK(kbit_io_quant_prefix(ck, 0) == where);
        CHECK(kbit_io_quant_prefix(ck, 1) == nullptr);
        CHECK(kbit_io_quant_describe(ck, 0, &q) == status);
        CHECK(std::string(kbit_io_last_error_message()).find(message) != std::string::npos);
        // The tensors are still listed.
        CHECK(kbit_io_tensor_count(ck) > 0);
        kbit_io_close(ck);
    }
}

TEST_CASE("bad arguments") {
    kbit_io_checkpoint* ck = nullptr;
    CHECK(kbit_io_open(nullptr, &ck) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(kbit_io_last_error_message()) == "kbit_io_open: path and out must not be NULL");
    CHECK(kbit_io_open("x", nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(kbit_io_open((kData + "/no/such.safetensors").c_str(), &ck) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(kbit_io_last_error_message()).find("no/such.safetensors: cannot open: No such file") !=
          std::string::npos);
    CHECK(ck == nullptr);
    CHECK(kbit_io_close(nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(kbit_io_tensor_count(nullptr) == 0);
    CHECK(kbit_io_quant_count(nullptr) == 0);
    CHECK(kbit_io_shard_count(nullptr) == 0);
    CHECK(kbit_io_shard_path(nullptr, 0) == nullptr);
    CHECK(std::string(kbit_io_dtype_name(99)) == "unknown");
    CHECK(std::string(kbit_io_format_name(-1)) == "unknown");

    Checkpoint c(kData + "/good/mixed.safetensors");
    const kbit_io_tensor* t = nullptr;
    const kbit_io_quant* q = nullptr;
    const size_t n = kbit_io_tensor_count(c.ck);
    CHECK(kbit_io_tensor_at(c.ck, n, &t) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(kbit_io_last_error_message()).find("kbit_io_tensor_at: index") == 0);
    CHECK(kbit_io_tensor_at(c.ck, 0, nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(kbit_io_tensor_find(c.ck, "nope", &t) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(kbit_io_last_error_message()) == "kbit_io_tensor_find: no tensor named 'nope'");
    CHECK(kbit_io_quant_describe(c.ck, kbit_io_quant_count(c.ck), &q) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(kbit_io_quant_find(c.ck, "model.embed", &q) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(t == nullptr);
    CHECK(q == nullptr);
    size_t count = 0;
    const char* key = nullptr;
    CHECK(kbit_io_shard_metadata(c.ck, 1, 0, &count, nullptr, nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(kbit_io_shard_metadata(c.ck, 0, 1, nullptr, &key, nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(kbit_io_shard_metadata(c.ck, 0, 7, &count, nullptr, nullptr) == KBIT_STATUS_SUCCESS);  // count only
    CHECK(count == 1);
    CHECK(key == nullptr);
}
