// `kbit inspect PATH [--json]`: the tensors of a safetensors checkpoint (a file or a sharded model
// directory) and its bitsandbytes-quantized layers, read with libkbit_io.so (kbit_io.h).
// Exit status: 0 a valid checkpoint, 1 a file that cannot be read or a layer that fails its checks
// (the message on stderr; the rest is still listed), 2 a usage error.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "kbit/kbit_io.h"

namespace kbit::cli {

namespace {

const char kUsage[] =
    "usage: kbit inspect PATH [--json]\n"
    "\n"
    "Lists the tensors of a safetensors checkpoint (PATH: a .safetensors file, a model directory with\n"
    "model.safetensors.index.json or model.safetensors, or the index file) and describes each\n"
    "bitsandbytes-quantized layer (4-bit NF4/FP4, also fused MoE experts [E, N, K]; LLM.int8): format,\n"
    "blocksize, nesting, the bytes it takes. The checks are those of transformers / bitsandbytes\n"
    "(docs/behaviour.md §11).\n"
    "\n"
    "  --json   one JSON object on stdout instead of text\n"
    "\n"
    "exit status: 0 valid, 1 unreadable or invalid file or layer (message on stderr), 2 usage error\n";

std::string shape_text(const int64_t* shape, int32_t ndim) {
    std::string s = "[";
    for (int32_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::vector<int64_t> shape_vec(const int64_t* shape, int32_t ndim) { return std::vector<int64_t>(shape, shape + ndim); }

// What one layer's arrays take (weight, scales and maps), in bytes.
uint64_t layer_bytes(const kbit_io_quant* q) {
    uint64_t b = q->weight_bytes;
    if (q->format == KBIT_IO_FORMAT_INT8) return b + 4 * static_cast<uint64_t>(q->shape[0]);
    b += q->absmax_bytes + 16 * 4;
    if (q->nested) b += 4 * q->nested_blocks + 256 * 4;
    return b;
}

std::string human(uint64_t bytes) {
    char buf[64];
    if (bytes < 10 * 1024) std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
    else if (bytes < 10ull * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
    else if (bytes < 10ull * 1024 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
    else std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
    return buf;
}

struct LayerView {
    const kbit_io_quant* q = nullptr;  // NULL: invalid
    std::string prefix;
    std::string error;
};

}  // namespace

int run_inspect(int argc, char** argv) {
    bool as_json = false;
    const char* path = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (std::strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] == '-' || path) {
            std::fprintf(stderr, "kbit inspect: unexpected argument '%s'\n%s", argv[i], kUsage);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        std::fprintf(stderr, "kbit inspect: PATH is required\n%s", kUsage);
        return 2;
    }
    kbit_io_checkpoint* ck = nullptr;
    if (kbit_io_open(path, &ck) != KBIT_STATUS_SUCCESS) {
        std::fprintf(stderr, "kbit inspect: %s\n", kbit_io_last_error_message());
        return 1;
    }
    std::vector<const kbit_io_tensor*> tensors;
    uint64_t total = 0;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t = nullptr;
        if (kbit_io_tensor_at(ck, i, &t) == KBIT_STATUS_SUCCESS) {
            tensors.push_back(t);
            total += t->nbytes;
        }
    }
    std::vector<LayerView> layers;
    int bad = 0;
    for (size_t i = 0; i < kbit_io_quant_count(ck); ++i) {
        LayerView v;
        if (kbit_io_quant_describe(ck, i, &v.q) == KBIT_STATUS_SUCCESS) {
            v.prefix = v.q->prefix;
        } else {
            v.q = nullptr;
            v.error = kbit_io_last_error_message();
            v.prefix = kbit_io_quant_prefix(ck, i);
            ++bad;
        }
        layers.push_back(v);
    }

    if (as_json) {
        using json = nlohmann::ordered_json;
        json j;
        j["path"] = path;
        j["shards"] = json::array();
        for (size_t s = 0; s < kbit_io_shard_count(ck); ++s) {
            json shard = {{"path", kbit_io_shard_path(ck, s)}, {"metadata", json::object()}};
            size_t n = 0;
            kbit_io_shard_metadata(ck, s, 0, &n, nullptr, nullptr);
            for (size_t e = 0; e < n; ++e) {
                const char *k = nullptr, *val = nullptr;
                if (kbit_io_shard_metadata(ck, s, e, nullptr, &k, &val) == KBIT_STATUS_SUCCESS) shard["metadata"][k] = val;
            }
            j["shards"].push_back(shard);
        }
        j["tensors"] = json::array();
        for (const kbit_io_tensor* t : tensors)
            j["tensors"].push_back({{"name", t->name}, {"dtype", t->dtype_name}, {"shape", shape_vec(t->shape, t->ndim)},
                                    {"bytes", t->nbytes}, {"shard", t->shard}});
        j["total_bytes"] = total;
        j["quantized"] = json::array();
        for (const LayerView& v : layers) {
            if (!v.q) {
                j["quantized"].push_back({{"prefix", v.prefix}, {"error", v.error}});
                continue;
            }
            const kbit_io_quant* q = v.q;
            json l = {{"prefix", q->prefix}, {"format", kbit_io_format_name(q->format)},
                      {"shape", shape_vec(q->shape, q->ndim)}, {"numel", q->numel},
                      {"storage_dtype", kbit_io_dtype_name(q->storage_dtype)}, {"bytes", layer_bytes(q)},
                      {"bits_per_weight", q->numel ? 8.0 * layer_bytes(q) / q->numel : 0.0},
                      {"aligned", q->aligned}};
            if (q->parameter) {
                l["parameter"] = true;  // stored under its own key (fused experts)
                if (q->ndim == 3) l["experts"] = q->experts;
            }
            if (q->format != KBIT_IO_FORMAT_INT8) {
                l["blocksize"] = q->blocksize;
                l["dtype"] = q->dtype_name;
                l["nested"] = q->nested;
                l["blocks"] = q->blocks;
                if (q->nested) {
                    l["nested_blocksize"] = q->nested_blocksize;
                    l["nested_offset"] = q->nested_offset;
                }
            }
            j["quantized"].push_back(l);
        }
        std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    } else {
        std::printf("checkpoint: %s\n", path);
        for (size_t s = 0; s < kbit_io_shard_count(ck); ++s) std::printf("  file: %s\n", kbit_io_shard_path(ck, s));
        std::printf("tensors: %zu, %s\n", tensors.size(), human(total).c_str());
        size_t wn = 4, wd = 5, ws = 5;
        for (const kbit_io_tensor* t : tensors) {
            wn = std::max(wn, std::strlen(t->name));
            wd = std::max(wd, std::strlen(t->dtype_name));
            ws = std::max(ws, shape_text(t->shape, t->ndim).size());
        }
        for (const kbit_io_tensor* t : tensors)
            std::printf("  %-*s  %-*s  %-*s  %" PRIu64 " B\n", static_cast<int>(wn), t->name, static_cast<int>(wd),
                        t->dtype_name, static_cast<int>(ws), shape_text(t->shape, t->ndim).c_str(), t->nbytes);
        std::printf("quantized layers: %zu\n", layers.size());
        for (const LayerView& v : layers) {
            if (!v.q) {
                std::printf("  %s  INVALID: %s\n", v.prefix.c_str(), v.error.c_str());
                continue;
            }
            const kbit_io_quant* q = v.q;
            std::string detail;
            if (q->format == KBIT_IO_FORMAT_INT8) {
                detail = "int8 " + shape_text(q->shape, q->ndim) + ", row scales (SCB)";
            } else {
                detail = std::string(kbit_io_format_name(q->format)) + " " + shape_text(q->shape, q->ndim) + " " +
                         q->dtype_name +
                         (q->parameter && q->ndim == 3
                              ? ", " + std::to_string(q->experts) + " experts of [" + std::to_string(q->shape[1]) +
                                    ", " + std::to_string(q->shape[2]) + "]"
                              : std::string()) +
                         ", blocksize " + std::to_string(q->blocksize) +
                         (q->nested ? ", nested (blocksize " + std::to_string(q->nested_blocksize) + ")" : ", not nested");
                if (q->storage_dtype != KBIT_IO_DTYPE_U8)
                    detail += std::string(", storage ") + kbit_io_dtype_name(q->storage_dtype);
            }
            char bpw[32];
            std::snprintf(bpw, sizeof bpw, "%.2f", q->numel ? 8.0 * layer_bytes(q) / q->numel : 0.0);
            std::printf("  %s  %s; %s (weight %s, scales and maps %s; %s bits per weight)%s\n", q->prefix,
                        detail.c_str(), human(layer_bytes(q)).c_str(), human(q->weight_bytes).c_str(),
                        human(layer_bytes(q) - q->weight_bytes).c_str(), bpw, q->aligned ? "" : "; not aligned");
        }
    }
    if (bad)
        for (const LayerView& v : layers)
            if (!v.q) std::fprintf(stderr, "kbit inspect: %s\n", v.error.c_str());
    kbit_io_close(ck);
    return bad ? 1 : 0;
}

}  // namespace kbit::cli
