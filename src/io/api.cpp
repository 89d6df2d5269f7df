// api.cpp — the C functions of libkbit_io.so (abi/kbit_io.def): opening files (mmap) and sharded
// directories, and the read-only accessors over what io_internal.h parsed.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io_internal.h"
#include "kbit_error.h"

struct kbit_io_checkpoint {
    struct Mapping {
        void* addr = nullptr;
        size_t size = 0;
    };
    std::vector<Mapping> maps;
    std::vector<kbit::io::File> files;  // one per shard
    std::vector<std::string> labels;
    std::vector<const kbit::io::Tensor*> order;  // every tensor, by name
    std::vector<kbit_io_tensor> tensors;         // the C view of `order`
    std::map<std::string, size_t> index;         // name -> position in `order`
    std::vector<kbit::io::Layer> layers;
    std::map<std::string, size_t> layer_index;  // prefix -> first layer with it

    ~kbit_io_checkpoint() {
        for (const Mapping& m : maps)
            if (m.addr) munmap(m.addr, m.size);
    }
};

namespace {

using kbit::io::Invalid;
using kbit::io::format;

using kbit::fs::is_dir;
using kbit::fs::is_file;
using kbit::fs::join;

constexpr const char* kIndexName = "model.safetensors.index.json";

// Maps `path` read-only and parses it as shard `shard`.
void map_file(kbit_io_checkpoint& ck, const std::string& path, size_t shard) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Invalid(format("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = errno;
        close(fd);
        throw Invalid(format("%s: not a regular file%s%s", path.c_str(), e ? ": " : "", e ? std::strerror(e) : ""));
    }
    const size_t size = static_cast<size_t>(st.st_size);
    kbit_io_checkpoint::Mapping m;
    m.size = size;
    if (size > 0) {
        m.addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m.addr == MAP_FAILED) {
            const int e = errno;
            close(fd);
            throw Invalid(format("%s: cannot map %zu bytes: %s", path.c_str(), size, std::strerror(e)));
        }
    }
    close(fd);
    ck.maps.push_back(m);
    static const uint8_t kEmpty[1] = {0};
    ck.files.emplace_back();
    kbit::io::parse_safetensors(m.addr ? static_cast<const uint8_t*>(m.addr) : kEmpty, size, path, shard,
                                ck.files.back());
}

// A shard name from the index: relative, and no ".." component (it stays inside the directory).
bool inside(const std::string& name) {
    if (name.empty() || name[0] == '/') return false;
    std::stringstream ss(name);
    std::string part;
    while (std::getline(ss, part, '/'))
        if (part == "..") return false;
    return true;
}

void open_index(kbit_io_checkpoint& ck, const std::string& index_path) {
    const std::string dir = index_path.find('/') == std::string::npos ? "." : index_path.substr(0, index_path.rfind('/'));
    const char* ip = index_path.c_str();
    nlohmann::json idx = kbit::fs::read_json(index_path);  // kbit::fs::Error
    if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
        throw Invalid(format("%s: weight_map: missing or not a JSON object", ip));
    const nlohmann::json& wm = idx["weight_map"];
    // transformers opens sorted(set(weight_map.values())).
    std::set<std::string> names;
    for (auto it = wm.begin(); it != wm.end(); ++it) {
        if (!it.value().is_string())
            throw Invalid(format("%s: weight_map: '%s' maps to %s, not a file name", ip, it.key().c_str(),
                                 it.value().dump().c_str()));
        const std::string s = it.value().get<std::string>();
        if (!inside(s))
            throw Invalid(format("%s: weight_map: '%s' names the file '%s', outside the directory", ip,
                                 it.key().c_str(), s.c_str()));
        names.insert(s);
    }
    if (names.empty()) throw Invalid(format("%s: weight_map: empty", ip));
    std::map<std::string, size_t> shard_of;
    for (const std::string& s : names) {
        shard_of[s] = ck.files.size();
        map_file(ck, join(dir, s), ck.files.size());
    }
    for (auto it = wm.begin(); it != wm.end(); ++it) {
        const kbit::io::File& f = ck.files[shard_of[it.value().get<std::string>()]];
        const bool there = std::any_of(f.tensors.begin(), f.tensors.end(),
                                       [&](const kbit::io::Tensor& t) { return t.name == it.key(); });
        if (!there)
            throw Invalid(format("%s: weight_map: tensor '%s' is listed in %s, which does not hold it", ip,
                                 it.key().c_str(), f.label.c_str()));
    }
}

void build(kbit_io_checkpoint& ck) {
    for (const kbit::io::File& f : ck.files) {
        ck.labels.push_back(f.label);
        for (const kbit::io::Tensor& t : f.tensors) {
            const auto seen = ck.index.find(t.name);
            if (seen != ck.index.end())
                throw Invalid(format("%s: tensor '%s' is also in %s", f.label.c_str(), t.name.c_str(),
                                     ck.files[ck.order[seen->second]->shard].label.c_str()));
            ck.index[t.name] = ck.order.size();
            ck.order.push_back(&t);
        }
    }
    std::sort(ck.order.begin(), ck.order.end(),
              [](const kbit::io::Tensor* a, const kbit::io::Tensor* b) { return a->name < b->name; });
    static const int64_t kNoDims[1] = {0};
    for (size_t i = 0; i < ck.order.size(); ++i) {
        const kbit::io::Tensor& t = *ck.order[i];
        ck.index[t.name] = i;
        kbit_io_tensor c{};
        c.size = sizeof c;
        c.name = t.name.c_str();
        c.dtype_name = t.dtype->name;
        c.dtype = t.dtype->id;
        c.ndim = static_cast<int32_t>(t.shape.size());
        c.shape = t.shape.empty() ? kNoDims : t.shape.data();
        c.numel = t.numel;
        c.nbytes = t.nbytes;
        c.data = t.data;
        c.file_offset = t.file_offset;
        c.shard = t.shard;
        ck.tensors.push_back(c);
    }
    ck.layers = kbit::io::find_layers(ck.order, ck.labels);
    kbit::io::finish_layers(ck.layers);
    for (size_t i = ck.layers.size(); i-- > 0;) ck.layer_index[ck.layers[i].prefix] = i;
}

// KBIT_STATUS_INVALID_ARGUMENT, "<what> I is not below the count N", unless index < count.
kbit_status check_below(const char* fn, const char* what, size_t index, size_t count) {
    if (index < count) return KBIT_STATUS_SUCCESS;
    return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s %zu is not below the count %zu", what, index, count);
}

// Where `key` stands in one of the checkpoint's name maps (index, layer_index), through *position:
// kbit_io_tensor_find's and kbit_io_quant_find's look-up, which refuses their NULL arguments
// ("checkpoint, <key_name> and out must not be NULL") and a key the map lacks ("no <what> 'KEY'").
kbit_status find_position(const char* fn, const kbit_io_checkpoint* ck,
                          std::map<std::string, size_t> kbit_io_checkpoint::*names, const char* key,
                          const char* key_name, const char* what, const void* out, size_t* position) {
    return kbit::guarded(fn, [&]() -> kbit_status {
        if (!ck || !key || !out)
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "checkpoint, %s and out must not be NULL",
                                   key_name);
        const auto it = (ck->*names).find(key);
        if (it == (ck->*names).end()) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "no %s '%s'", what, key);
        *position = it->second;
        return KBIT_STATUS_SUCCESS;
    });
}

kbit_status layer_result(const char* fn, const kbit_io_checkpoint* ck, size_t i, const kbit_io_quant** out) {
    const kbit::io::Layer& L = ck->layers[i];
    if (!L.ok) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", L.error.c_str());
    *out = &L.desc;
    return KBIT_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

KBIT_API uint32_t kbit_io_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_IO_VERSION_MAJOR, KBIT_IO_VERSION_MINOR);
}

KBIT_API kbit_status kbit_io_open(const char* path, kbit_io_checkpoint** out) {
    static const char* fn = "kbit_io_open";
    return kbit::guarded(fn, [&]() -> kbit_status {
        if (!path || !out) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "path and out must not be NULL");
        auto ck = std::make_unique<kbit_io_checkpoint>();
        try {
            const std::string p = kbit::fs::strip_slashes(path);
            if (is_dir(p)) {
                if (is_file(join(p, kIndexName))) open_index(*ck, join(p, kIndexName));
                else if (is_file(join(p, "model.safetensors"))) map_file(*ck, join(p, "model.safetensors"), 0);
                else throw Invalid(format("%s: a directory without %s or model.safetensors", p.c_str(), kIndexName));
            } else if (p.size() >= 5 && p.compare(p.size() - 5, 5, ".json") == 0) {
                open_index(*ck, p);
            } else {
                map_file(*ck, p, 0);
            }
            build(*ck);
        } catch (const Invalid& e) {
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", e.what());
        } catch (const kbit::fs::Error& e) {
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", e.what());
        }
        *out = ck.release();
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_io_close(kbit_io_checkpoint* checkpoint) {
    delete checkpoint;
    return KBIT_STATUS_SUCCESS;
}

KBIT_API const char* kbit_io_last_error_message(void) { return kbit::last_error_message(); }

KBIT_API size_t kbit_io_shard_count(const kbit_io_checkpoint* checkpoint) {
    return checkpoint ? checkpoint->files.size() : 0;
}

KBIT_API const char* kbit_io_shard_path(const kbit_io_checkpoint* checkpoint, size_t index) {
    if (!checkpoint || index >= checkpoint->files.size()) return nullptr;
    return checkpoint->files[index].label.c_str();
}

KBIT_API kbit_status kbit_io_shard_metadata(const kbit_io_checkpoint* checkpoint, size_t index, size_t entry,
                                            size_t* count, const char** key, const char** value) {
    static const char* fn = "kbit_io_shard_metadata";
    if (!checkpoint) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "checkpoint must not be NULL");
    if (const kbit_status s = check_below(fn, "shard", index, checkpoint->files.size()); s != KBIT_STATUS_SUCCESS)
        return s;
    const auto& md = checkpoint->files[index].metadata;
    if (key || value)
        if (const kbit_status s = check_below(fn, "entry", entry, md.size()); s != KBIT_STATUS_SUCCESS) return s;
    if (count) *count = md.size();
    if (key) *key = md[entry].first.c_str();
    if (value) *value = md[entry].second.c_str();
    return KBIT_STATUS_SUCCESS;
}

KBIT_API size_t kbit_io_tensor_count(const kbit_io_checkpoint* checkpoint) {
    return checkpoint ? checkpoint->tensors.size() : 0;
}

KBIT_API kbit_status kbit_io_tensor_at(const kbit_io_checkpoint* checkpoint, size_t index, const kbit_io_tensor** out) {
    static const char* fn = "kbit_io_tensor_at";
    if (!checkpoint || !out) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "checkpoint and out must not be NULL");
    const kbit_status s = check_below(fn, "index", index, checkpoint->tensors.size());
    if (s == KBIT_STATUS_SUCCESS) *out = &checkpoint->tensors[index];
    return s;
}

KBIT_API kbit_status kbit_io_tensor_find(const kbit_io_checkpoint* checkpoint, const char* name,
                                         const kbit_io_tensor** out) {
    static const char* fn = "kbit_io_tensor_find";
    size_t position = 0;
    const kbit_status s =
        find_position(fn, checkpoint, &kbit_io_checkpoint::index, name, "name", "tensor named", out, &position);
    if (s == KBIT_STATUS_SUCCESS) *out = &checkpoint->tensors[position];
    return s;
}

KBIT_API size_t kbit_io_quant_count(const kbit_io_checkpoint* checkpoint) {
    return checkpoint ? checkpoint->layers.size() : 0;
}

KBIT_API kbit_status kbit_io_quant_describe(const kbit_io_checkpoint* checkpoint, size_t index,
                                            const kbit_io_quant** out) {
    static const char* fn = "kbit_io_quant_describe";
    if (!checkpoint || !out) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "checkpoint and out must not be NULL");
    const kbit_status s = check_below(fn, "index", index, checkpoint->layers.size());
    return s != KBIT_STATUS_SUCCESS ? s : layer_result(fn, checkpoint, index, out);
}

KBIT_API kbit_status kbit_io_quant_find(const kbit_io_checkpoint* checkpoint, const char* prefix,
                                        const kbit_io_quant** out) {
    static const char* fn = "kbit_io_quant_find";
    size_t position = 0;
    const kbit_status s = find_position(fn, checkpoint, &kbit_io_checkpoint::layer_index, prefix, "prefix",
                                        "quantized layer with prefix", out, &position);
    return s != KBIT_STATUS_SUCCESS ? s : layer_result(fn, checkpoint, position, out);
}

KBIT_API const char* kbit_io_quant_prefix(const kbit_io_checkpoint* checkpoint, size_t index) {
    if (!checkpoint || index >= checkpoint->layers.size()) return nullptr;
    return checkpoint->layers[index].prefix.c_str();
}

KBIT_API const char* kbit_io_dtype_name(int32_t dtype) {
    const kbit::io::DtypeInfo* d = kbit::io::dtype_by_id(dtype);
    return d ? d->name : "unknown";
}

KBIT_API const char* kbit_io_format_name(int32_t format) {
    switch (format) {
        case KBIT_IO_FORMAT_NF4: return "nf4";
        case KBIT_IO_FORMAT_FP4: return "fp4";
        case KBIT_IO_FORMAT_INT8: return "int8";
        default: return "unknown";
    }
}

}  // extern "C"
