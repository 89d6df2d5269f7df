// convert_job.cpp — setting up and finishing a `kbit quantize` / `kbit dequantize` job (convert_job.h):
// the input, the backend, the output's writers and temporary directory; at the end the shards, the
// index, config.json and the files that come along, then the directory moved into place.
#include "convert_job.h"

#include <dirent.h>
#include <sys/stat.h>

#include <set>

#include <nlohmann/json.hpp>

#include "failure.h"

namespace kbit::cli {

namespace {

using json = nlohmann::json;
using kbit::fs::base_name;
using kbit::fs::exists;
using kbit::fs::format;
using kbit::fs::is_dir;

constexpr const char* kIndex = "model.safetensors.index.json";

// json.dumps(obj, indent=2, sort_keys=True) + "\n", as transformers writes config.json and the index.
std::string python_json(const json& j) { return j.dump(2, ' ', true) + "\n"; }

}  // namespace

Job::~Job() {
    for (kbit_io_writer* w : writers) kbit_io_writer_discard(w);
    if (ck) kbit_io_close(ck);
    if (backend) kbit_loader_close(backend);
}

void check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) throw Failure(format("%s: %s", what, kbit_last_error_message()));
}
void check_io(kbit_status s) {
    if (s != KBIT_STATUS_SUCCESS) throw Failure(kbit_io_last_error_message());
}

void open_job(Job& j) {
    j.in = kbit::fs::strip_slashes(j.in);
    j.out = kbit::fs::strip_slashes(j.out);
    // The index file itself stands for its directory (the shards, config.json and the rest are there).
    if (!is_dir(j.in) && j.in.size() > 5 && j.in.compare(j.in.size() - 5, 5, ".json") == 0)
        j.in = j.in.find('/') == std::string::npos ? "." : j.in.substr(0, j.in.rfind('/'));
    j.dir = is_dir(j.in);
    check_io(kbit_io_open(j.in.c_str(), &j.ck));
    j.compute = ComputeThreads(command_threads());
    check(kbit_loader_open("cpu", &j.backend), "the CPU backend");
    j.t4 = kbit_loader_4bit_table(j.backend);
    j.t8 = kbit_loader_8bit_table(j.backend);
    if (!j.t4 || !j.t8) throw Failure("the CPU backend lacks the 4-bit or 8-bit interface");
    if (j.dir) {
        if (exists(j.out)) throw Failure(format("%s: already exists (a directory output must be new)", j.out.c_str()));
        j.out_dir.create(j.out);
    } else if (is_dir(j.out)) {
        throw Failure(format("%s: is a directory (IN is a file, so OUT is a file)", j.out.c_str()));
    }
    for (size_t s = 0; s < kbit_io_shard_count(j.ck); ++s) {
        const std::string dest = j.dir ? j.out_dir.name() + "/" + base_name(kbit_io_shard_path(j.ck, s)) : j.out;
        kbit_io_writer* w = nullptr;
        check_io(kbit_io_writer_create(dest.c_str(), &w));
        j.writers.push_back(w);
        check_io(kbit_io_writer_metadata(w, "format", "pt"));
    }
}

void finish_job(Job& j, const std::map<std::string, size_t>& weight_map, const std::function<void(json&)>& edit_config) {
    for (size_t s = 0; s < j.writers.size(); ++s) {
        kbit_io_writer* w = j.writers[s];
        j.writers[s] = nullptr;
        check_io(kbit_io_writer_finish(w));
    }
    j.writers.clear();
    if (!j.dir) return;
    const std::string index_in = j.in + "/" + kIndex;
    std::set<std::string> own = {kIndex, "config.json"};
    if (exists(index_in)) {
        json idx = kbit::fs::read_json(index_in);
        json meta = idx.contains("metadata") && idx["metadata"].is_object() ? idx["metadata"] : json::object();
        // total_size: the bytes of every tensor written (as transformers sums them), read back.
        uint64_t total_size = 0;
        for (size_t s = 0; s < kbit_io_shard_count(j.ck); ++s) {
            kbit_io_checkpoint* o = nullptr;
            check_io(kbit_io_open((j.out_dir.name() + "/" + base_name(kbit_io_shard_path(j.ck, s))).c_str(), &o));
            for (size_t k = 0; k < kbit_io_tensor_count(o); ++k) {
                const kbit_io_tensor* t;
                if (kbit_io_tensor_at(o, k, &t) == KBIT_STATUS_SUCCESS) total_size += t->nbytes;
            }
            kbit_io_close(o);
        }
        meta["total_size"] = total_size;
        json wm = json::object();
        for (const auto& kv : weight_map) wm[kv.first] = base_name(kbit_io_shard_path(j.ck, kv.second));
        idx["metadata"] = meta;
        idx["weight_map"] = wm;
        kbit::fs::write_file(j.out_dir.name() + "/" + kIndex, python_json(idx));
    }
    for (size_t s = 0; s < kbit_io_shard_count(j.ck); ++s) own.insert(base_name(kbit_io_shard_path(j.ck, s)));
    if (exists(j.in + "/config.json")) {
        json cfg = kbit::fs::read_json(j.in + "/config.json");
        if (!cfg.is_object()) throw Failure(format("%s/config.json: not a JSON object", j.in.c_str()));
        edit_config(cfg);
        kbit::fs::write_file(j.out_dir.name() + "/config.json", python_json(cfg));
    }
    // Tokenizer files and the like come along (regular files at the top level only).
    if (DIR* d = opendir(j.in.c_str())) {
        while (dirent* e = readdir(d)) {
            const std::string n = e->d_name, p = j.in + "/" + n;
            struct stat st;
            if (own.count(n) || stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
            if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) continue;
            kbit::fs::write_file(j.out_dir.name() + "/" + n, kbit::fs::read_file(p));
        }
        closedir(d);
    }
    j.out_dir.publish();
}

uint64_t tensor_bytes(const kbit_io_checkpoint* ck) {
    uint64_t total = 0;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(ck, i, &t));
        total += t->nbytes;
    }
    return total;
}

int32_t kbit_dtype_of(int32_t io_dtype) {
    switch (io_dtype) {
        case KBIT_IO_DTYPE_F32: return KBIT_DTYPE_FP32;
        case KBIT_IO_DTYPE_F16: return KBIT_DTYPE_FP16;
        case KBIT_IO_DTYPE_BF16: return KBIT_DTYPE_BF16;
        default: return -1;
    }
}
int32_t io_dtype_of(int32_t kbit_dtype) {
    return kbit_dtype == KBIT_DTYPE_FP32 ? KBIT_IO_DTYPE_F32 : kbit_dtype == KBIT_DTYPE_FP16 ? KBIT_IO_DTYPE_F16 : KBIT_IO_DTYPE_BF16;
}
size_t dtype_size(int32_t kbit_dtype) { return kbit_dtype == KBIT_DTYPE_FP32 ? 4 : 2; }
const char* torch_name(int32_t kbit_dtype) {
    return kbit_dtype == KBIT_DTYPE_FP32 ? "float32" : kbit_dtype == KBIT_DTYPE_FP16 ? "float16" : "bfloat16";
}

}  // namespace kbit::cli
