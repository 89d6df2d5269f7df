// `kbit quantize IN OUT --nf4|--fp4|--int8 ...` and `kbit dequantize IN OUT [--dtype D]`: a dense
// safetensors checkpoint (file or model directory) to the transformers / bitsandbytes layout and back,
// read with libkbit_io.so (mmap), written with its writer, the numbers computed by the CPU backend
// through the loader's tables (the quantizers of the Python package). One tensor computed while the
// previous one is written; every output goes to a temporary name first (docs/cli.md).
// Exit status: 0 done, 1 a bad input, a failed write or backend call (nothing written), 2 usage.
#include <dirent.h>
#include <fnmatch.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "fsutil.h"
#include "kbit/kbit_io.h"
#include "kbit/kbit_loader.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"
#include "kbit_half_array.h"

namespace kbit::cli {

namespace {

using json = nlohmann::json;
using kbit::fs::base_name;
using kbit::fs::exists;
using kbit::fs::format;
using kbit::fs::is_dir;

// A failure with its message (exit status 1).
struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

const char kQuantizeUsage[] =
    "usage: kbit quantize IN OUT --nf4|--fp4|--int8 [--blocksize N] [--double-quant] [--skip PATTERN]...\n"
    "                     [--no-default-skip] [--compute-dtype fp32|fp16|bf16] [--quiet]\n"
    "\n"
    "Quantizes the linear-layer weights of a float32/float16/bfloat16 safetensors checkpoint to the\n"
    "layout transformers + bitsandbytes load (bnb-4bit NF4/FP4 or LLM.int8). IN is a .safetensors file\n"
    "(OUT: a file) or a model directory (OUT: a new directory, sharded like IN, with the index rewritten,\n"
    "config.json given its quantization_config, the other files copied).\n"
    "\n"
    "Quantized: every 2-D float tensor named *.weight that no skip pattern matches (by its module name,\n"
    "without .weight); everything else is copied unchanged.\n"
    "  --nf4, --fp4       4-bit, blocks of --blocksize (32 ... 4096, default 64) elements\n"
    "  --int8             LLM.int8: one int8 row per output, scale SCB (through float16, as bitsandbytes)\n"
    "  --double-quant     4-bit: nested absmax (bnb_4bit_use_double_quant)\n"
    "  --skip PATTERN     also keep these modules dense: a module name, a dotted suffix or prefix of one\n"
    "                     (\"lm_head\", \"mlp.down_proj\"), or a glob (\"*.layers.0.*\"); repeatable\n"
    "  --no-default-skip  do not skip lm_head, *embed*, *norm*, wte, wpe (the defaults)\n"
    "  --compute-dtype D  4-bit: bnb_4bit_compute_dtype of config.json (default bf16)\n"
    "  --quiet            no progress output\n"
    "\n"
    "exit status: 0 done, 1 bad input or failed write (nothing is written), 2 usage error\n";

const char kDequantizeUsage[] =
    "usage: kbit dequantize IN OUT [--dtype fp32|fp16|bf16] [--quiet]\n"
    "\n"
    "Turns every bitsandbytes layer (NF4/FP4, nested or not; LLM.int8) of a checkpoint back into one dense\n"
    "P.weight; the other tensors are copied. IN is a .safetensors file or a model directory (OUT: a new\n"
    "directory; config.json loses its quantization_config).\n"
    "  --dtype D   the dense weights' dtype (default: each 4-bit layer's original dtype, float16 for int8)\n"
    "  --quiet     no progress output\n"
    "\n"
    "exit status: 0 done, 1 bad input or failed write (nothing is written), 2 usage error\n";

constexpr const char* kIndex = "model.safetensors.index.json";

// json.dumps(obj, indent=2, sort_keys=True) + "\n", as transformers writes config.json and the index.
std::string python_json(const json& j) { return j.dump(2, ' ', true) + "\n"; }

// SIGINT / SIGTERM / SIGHUP: stop after the current tensor and remove what was written.
volatile sig_atomic_t g_stop = 0;
void on_signal(int sig) { g_stop = sig; }
void catch_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

// The terminal progress line or plain lines.
class Progress {
public:
    Progress(const char* verb, bool quiet, size_t tensors, uint64_t bytes)
        : verb_(verb), quiet_(quiet), tty_(isatty(STDERR_FILENO)), tensors_(tensors), bytes_(bytes),
          start_(std::chrono::steady_clock::now()) {}
    void step(const std::string& name, uint64_t bytes, const std::string& what) {
        ++done_;
        done_bytes_ += bytes;
        if (g_stop) throw Failure(format("interrupted by signal %d; nothing was written", static_cast<int>(g_stop)));
        if (quiet_) return;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        const double rate = s > 0 ? done_bytes_ / s : 0;
        const double eta = rate > 0 ? (bytes_ - done_bytes_) / rate : 0;
        if (tty_) {
            std::fprintf(stderr, "\r\033[K%s [%zu/%zu tensors] %.1f/%.1f MiB, %.0f MiB/s, ETA %d:%02d", verb_, done_,
                         tensors_, done_bytes_ / 1048576.0, bytes_ / 1048576.0, rate / 1048576.0,
                         static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
            if (done_ == tensors_) std::fputc('\n', stderr);
        } else {
            std::fprintf(stderr, "%s %zu/%zu %s: %s\n", verb_, done_, tensors_, name.c_str(), what.c_str());
        }
        std::fflush(stderr);
    }
    void finish(const std::string& out) {
        if (quiet_) return;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        std::fprintf(stderr, "%s: wrote %s (%zu tensors, %.1f MiB read in %.1f s)\n", verb_, out.c_str(), tensors_,
                     bytes_ / 1048576.0, s);
    }

private:
    const char* verb_;
    bool quiet_, tty_;
    size_t tensors_, done_ = 0;
    uint64_t bytes_, done_bytes_ = 0;
    std::chrono::steady_clock::time_point start_;
};

// The command's threads: OMP_NUM_THREADS (its first level), else the CPUs this process may run on.
// The command splits the work itself (ComputeThreads) and calls the backend from each of its threads
// with one OpenMP thread: libgomp reads OMP_NUM_THREADS when the backend is loaded, which is after
// this. The backend's own split is static, so a team member that the writing thread displaces holds
// up the whole team at the end of every call (measured: two OpenMP threads beside the writer on two
// cores were slower than one); the command's pieces are claimed one at a time, so the threads the
// writer leaves alone take more of them.
int command_threads() {
    int n = 0;
    if (const char* e = std::getenv("OMP_NUM_THREADS")) n = std::atoi(e);
    if (n <= 0) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    setenv("OMP_NUM_THREADS", "1", 1);
    return std::max(n, 1);
}

// Runs body(begin, end) over [0, total) in pieces of `piece` (the last one shorter) on `threads`
// threads, the calling one among them, each taking the next piece when it finishes one. The first
// failure stops the others taking pieces and is rethrown here.
class ComputeThreads {
  public:
    explicit ComputeThreads(int threads) : threads_(threads) {}
    int count() const { return threads_; }
    void run(int64_t total, int64_t piece, const std::function<void(int64_t, int64_t)>& body) const {
        const int64_t pieces = (total + piece - 1) / piece;
        if (threads_ < 2 || pieces < 2) {
            if (total > 0) body(0, total);
            return;
        }
        std::atomic<int64_t> next{0};
        std::atomic<bool> failed{false};
        std::mutex m;
        std::string failure;
        auto work = [&] {
            try {
                for (int64_t p; !failed.load(std::memory_order_relaxed) && (p = next.fetch_add(1)) < pieces;)
                    body(p * piece, std::min(total, (p + 1) * piece));
            } catch (const std::exception& e) {  // Failure, bad_alloc: the message is read in this thread
                std::lock_guard<std::mutex> lock(m);
                if (!failed.exchange(true)) failure = e.what();
            }
        };
        std::vector<std::thread> helpers;
        for (int t = 1; t < std::min<int64_t>(threads_, pieces); ++t) {
            try {
                helpers.emplace_back(work);
            } catch (const std::system_error&) {  // no more threads: the ones running take every piece
                break;
            }
        }
        work();
        for (std::thread& h : helpers) h.join();
        if (failed) throw Failure(failure);
    }

  private:
    int threads_;
};

// Elements per piece of a tensor: small enough that two threads end a 4096x4096 weight within a few
// percent of each other, large enough that the backend's per-call checks do not show.
constexpr int64_t kPieceElements = int64_t{1} << 18;
// A 4-bit piece: whole blocks, and an even count, so that each piece starts on a whole packed byte.
int64_t piece_of(int64_t blocksize) {
    const int64_t unit = blocksize % 2 == 0 ? blocksize : 2 * blocksize;
    return std::max<int64_t>(1, kPieceElements / unit) * unit;
}
// An int8 piece: whole rows (each row has its own scale), at least one.
int64_t rows_per_piece(int64_t cols) { return std::max<int64_t>(1, kPieceElements / std::max<int64_t>(cols, 1)); }

// The input opened, the CPU backend's tables, and where the output goes.
struct Job {
    std::string in, out;
    bool dir = false;        // IN is a directory
    kbit::fs::TempDir out_dir;  // the directory being filled (directory output)
    kbit_io_checkpoint* ck = nullptr;
    kbit_backend* backend = nullptr;
    const kbit_4bit_table* t4 = nullptr;
    const kbit_8bit_table* t8 = nullptr;
    std::vector<kbit_io_writer*> writers;  // one per shard
    ComputeThreads compute{1};             // the command's computing threads (command_threads())
    ~Job() {
        for (kbit_io_writer* w : writers) kbit_io_writer_discard(w);
        if (ck) kbit_io_close(ck);
        if (backend) kbit_loader_close(backend);
    }
};

void check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) throw Failure(format("%s: %s", what, kbit_last_error_message()));
}
void check_io(kbit_status s) {
    if (s != KBIT_STATUS_SUCCESS) throw Failure(kbit_io_last_error_message());
}

// Writes each finished tensor on a thread of its own (when `threaded`), so that writing tensor i (the
// kernel's copies into the page cache, one thread per file) overlaps computing tensor i + 1. One write
// is in flight at a time: a writer is used by one thread at a time, and a caller reuses a buffer only
// once the write that read it has returned (two buffer sets, alternating, suffice).
class WriteBehind {
  public:
    explicit WriteBehind(bool threaded) : threaded_(threaded) {}
    // Waits for the write in flight (rethrowing its failure), then starts `write`.
    void submit(std::function<void()> write) {
        if (!threaded_) {
            write();
            return;
        }
        wait();
        pending_ = std::async(std::launch::async, [write = std::move(write)]() -> std::string {
            try {
                write();
                return {};
            } catch (const Failure& f) {  // the message is read in this thread (it is thread-local)
                return f.what();
            }
        });
    }
    // Waits for the write in flight; throws its failure.
    void wait() {
        if (!pending_.valid()) return;
        const std::string failure = pending_.get();
        if (!failure.empty()) throw Failure(failure);
    }
    ~WriteBehind() {
        if (pending_.valid()) pending_.wait();  // a failure elsewhere: the caller discards the writers next
    }

  private:
    bool threaded_;
    std::future<std::string> pending_;
};

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

// Finishes every shard, writes the index, config.json and the other files, then moves the directory.
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

bool parse_dtype(const std::string& s, int32_t& out) {
    if (s == "fp32" || s == "float32") out = KBIT_DTYPE_FP32;
    else if (s == "fp16" || s == "float16") out = KBIT_DTYPE_FP16;
    else if (s == "bf16" || s == "bfloat16") out = KBIT_DTYPE_BF16;
    else return false;
    return true;
}
const char* torch_name(int32_t kbit_dtype) {
    return kbit_dtype == KBIT_DTYPE_FP32 ? "float32" : kbit_dtype == KBIT_DTYPE_FP16 ? "float16" : "bfloat16";
}

// Data of a tensor as a pointer aligned to `align` (a copy when the file does not align it).
const void* aligned_data(const kbit_io_tensor* t, size_t align, std::vector<uint8_t>& copy) {
    if (reinterpret_cast<uintptr_t>(t->data) % align == 0) return t->data;
    copy.assign(static_cast<const uint8_t*>(t->data), static_cast<const uint8_t*>(t->data) + t->nbytes);
    return copy.data();
}

bool matches(const std::string& module, const std::string& pat) {
    if (pat.find_first_of("*?[") != std::string::npos) return fnmatch(pat.c_str(), module.c_str(), 0) == 0;
    const std::string m = "." + module + ".";
    return module == pat || m.find("." + pat + ".") != std::string::npos;
}

// ---- quantize --------------------------------------------------------------------------------

struct QuantOptions {
    int32_t format = -1;  // KBIT_IO_FORMAT_*
    int blocksize = 64;
    bool nested = false;
    bool default_skip = true;
    std::vector<std::string> skip;
    int32_t compute_dtype = KBIT_DTYPE_BF16;
    bool quiet = false;
};

const char* const kDefaultSkip[] = {"lm_head", "*embed*", "*norm*", "wte", "wpe"};

std::vector<float> quant_map(const Job& j, int32_t format) {
    // As the Python package reads it: the 16 codes dequantized with scale 1 (FP4 index 8 is +0.0).
    const uint8_t packed[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
    const float one = 1.0f;
    std::vector<float> map(16);
    check(j.t4->kbit_dequantize_4bit(format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, KBIT_DTYPE_FP32,
                                     packed, &one, map.data(), 32, 16, nullptr),
          "the 4-bit table");
    if (format == KBIT_IO_FORMAT_FP4) map[8] = 0.0f;
    return map;
}

// Bytes of every tensor of the checkpoint: the progress display's total.
uint64_t tensor_bytes(const kbit_io_checkpoint* ck) {
    uint64_t total = 0;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(ck, i, &t));
        total += t->nbytes;
    }
    return total;
}

// The layer `kbit quantize` makes of weight t of module `module`, without its data.
kbit_io_quant layer_of(const kbit_io_tensor* t, const std::string& module, const QuantOptions& o) {
    kbit_io_quant layer{};
    layer.size = sizeof layer;
    layer.prefix = module.c_str();
    layer.format = o.format;
    layer.ndim = 2;
    layer.shape = t->shape;
    if (o.format == KBIT_IO_FORMAT_INT8) {
        layer.storage_dtype = KBIT_IO_DTYPE_I8;
        layer.dtype = -1;
    } else {
        layer.dtype = kbit_dtype_of(t->dtype);
        layer.blocksize = o.blocksize;
        layer.storage_dtype = KBIT_IO_DTYPE_U8;
        layer.nested = o.nested;
        layer.nested_blocksize = o.nested ? 256 : 0;
    }
    return layer;
}

int run_quantize_job(Job& j, const QuantOptions& o) {
    open_job(j);
    if (kbit_io_quant_count(j.ck) > 0)
        throw Failure(format("%s: already holds %zu bitsandbytes layer(s) ('%s'); quantize a dense checkpoint",
                          j.in.c_str(), kbit_io_quant_count(j.ck), kbit_io_quant_prefix(j.ck, 0)));
    const std::vector<float> qmap = o.format == KBIT_IO_FORMAT_INT8 ? std::vector<float>() : quant_map(j, o.format);
    const std::vector<float> code8 = kbit::dynamic_map(true);
    std::vector<std::string> skip = o.skip;
    if (o.default_skip) skip.insert(skip.begin(), std::begin(kDefaultSkip), std::end(kDefaultSkip));
    const size_t count = kbit_io_tensor_count(j.ck);
    const uint64_t total_in = tensor_bytes(j.ck);
    Progress progress("kbit quantize", o.quiet, count, total_in);
    std::map<std::string, size_t> weight_map;
    // The outputs of one weight; two sets, one being written while the other is computed.
    struct Outputs {
        std::vector<uint8_t> packed, codes;
        std::vector<float> absmax, nested_absmax, scb;
        std::vector<int8_t> cb;
    };
    Outputs outputs[2];
    std::vector<uint8_t> copy;
    std::vector<uint16_t> half;
    // Quantized: a 2-D float P.weight whose module P no skip pattern matches.
    auto module_of = [](const std::string& name) { return name.size() > 7 ? name.substr(0, name.size() - 7) : ""; };
    auto quantizes = [&](const kbit_io_tensor* t) {
        const std::string name = t->name;
        bool q = t->ndim == 2 && kbit_dtype_of(t->dtype) >= 0 && name.size() > 7 &&
                 name.compare(name.size() - 7, 7, ".weight") == 0 && t->numel > 0;
        const std::string module = module_of(name);
        for (const std::string& p : skip) q = q && !matches(module, p);
        return q;
    };
    // Every output tensor declared first, so each shard's bytes are written once (docs/cli.md). Not
    // with --double-quant: a nested layer's quant_state size depends on the offset it gets.
    if (!o.nested)
        for (size_t i = 0; i < count; ++i) {
            const kbit_io_tensor* t;
            check_io(kbit_io_tensor_at(j.ck, i, &t));
            kbit_io_writer* w = j.writers[t->shard];
            if (!quantizes(t)) {
                check_io(kbit_io_writer_declare(w, t->name, t->dtype, t->ndim, t->shape));
                continue;
            }
            const std::string module = module_of(t->name);
            const kbit_io_quant layer = layer_of(t, module, o);
            check_io(kbit_io_writer_declare_quant(w, &layer));
        }
    size_t quantized = 0;
    WriteBehind write_behind(j.compute.count() > 1);
    for (size_t i = 0; i < count; ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(j.ck, i, &t));
        kbit_io_writer* w = j.writers[t->shard];
        const std::string name = t->name;
        const int32_t dt = kbit_dtype_of(t->dtype);
        const std::string module = module_of(name);
        if (!quantizes(t)) {
            write_behind.submit([=] { check_io(kbit_io_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data)); });
            weight_map[name] = t->shard;
            progress.step(name, t->nbytes, "copied");
            continue;
        }
        const int64_t n = static_cast<int64_t>(t->numel);
        const void* data = aligned_data(t, dtype_size(dt), copy);
        Outputs& out = outputs[quantized % 2];
        auto& [packed, codes, absmax, nested_absmax, scb, cb] = out;
        kbit_io_quant layer = layer_of(t, module, o);
        std::vector<std::string> added;
        if (o.format == KBIT_IO_FORMAT_INT8) {
            const int64_t rows = t->shape[0], cols = t->shape[1];
            if (cols > INT32_MAX) throw Failure(format("%s: %" PRId64 " columns, more than int8 quantization takes", t->name, cols));
            // bitsandbytes quantizes the float16 copy of the weight.
            half.resize(static_cast<size_t>(n));
            cb.resize(static_cast<size_t>(n));
            scb.resize(static_cast<size_t>(rows));
            j.compute.run(rows, rows_per_piece(cols), [&](int64_t r0, int64_t r1) {
                const int64_t k0 = r0 * cols, k1 = r1 * cols;
                if (dt == KBIT_DTYPE_FP16) std::memcpy(half.data() + k0, static_cast<const uint16_t*>(data) + k0, static_cast<size_t>(k1 - k0) * 2);
                else if (dt == KBIT_DTYPE_BF16) kbit::bf16_to_half_array(static_cast<const uint16_t*>(data) + k0, half.data() + k0, k1 - k0);
                else kbit::float_to_half_array(static_cast<const float*>(data) + k0, half.data() + k0, k1 - k0);
                // a piece is one row or at most kPieceElements: rows x cols fits the int arguments
                check(j.t8->cint8_vector_quant(reinterpret_cast<kbit_half*>(half.data() + k0), cb.data() + k0, scb.data() + r0,
                                               0.0f, static_cast<int>(r1 - r0), static_cast<int>(cols), nullptr),
                      t->name);
            });
            layer.weight = cb.data();
            layer.scb = scb.data();
            added = {module + ".weight", module + ".SCB", module + ".weight_format"};
        } else {
            const int64_t blocks = (n + o.blocksize - 1) / o.blocksize;
            packed.resize(static_cast<size_t>((n + 1) / 2));
            absmax.resize(static_cast<size_t>(blocks));
            const size_t elem = dtype_size(dt);
            const int64_t bs = o.blocksize;
            j.compute.run(n, piece_of(bs), [&](int64_t begin, int64_t end) {
                check(j.t4->kbit_quantize_4bit(o.format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, dt,
                                               static_cast<const char*>(data) + begin * elem, absmax.data() + begin / bs,
                                               packed.data() + begin / 2, bs, end - begin, nullptr),
                      t->name);
            });
            layer.weight = packed.data();
            layer.quant_map = qmap.data();
            layer.absmax = absmax.data();
            added = {module + ".weight", module + ".weight.absmax", module + ".weight.quant_map",
                     module + ".weight.quant_state.bitsandbytes__" + (o.format == KBIT_IO_FORMAT_NF4 ? "nf4" : "fp4")};
            if (o.nested) {
                const int64_t nb = (blocks + 255) / 256;
                codes.resize(static_cast<size_t>(blocks));
                nested_absmax.resize(static_cast<size_t>(nb));
                float offset = 0;
                check(j.t4->kbit_nested_absmax_quantize(absmax.data(), code8.data(), codes.data(), nested_absmax.data(),
                                                        &offset, blocks, 256, nullptr),
                      t->name);
                layer.absmax = codes.data();
                layer.nested_absmax = nested_absmax.data();
                layer.nested_quant_map = code8.data();
                layer.nested_offset = offset;
                added.push_back(module + ".weight.nested_absmax");
                added.push_back(module + ".weight.nested_quant_map");
            }
        }
        write_behind.submit([=, prefix = module]() mutable {
            layer.prefix = prefix.c_str();
            check_io(kbit_io_writer_add_quant(w, &layer));
        });
        for (const std::string& a : added) weight_map[a] = t->shard;
        ++quantized;
        progress.step(name, t->nbytes, kbit_io_format_name(o.format));
    }
    write_behind.wait();
    finish_job(j, weight_map, [&](json& cfg) {
        json qc = json::object();
        const bool four = o.format != KBIT_IO_FORMAT_INT8;
        qc["quant_method"] = "bitsandbytes";
        qc["_load_in_4bit"] = four;
        qc["_load_in_8bit"] = !four;
        qc["load_in_4bit"] = four;
        qc["load_in_8bit"] = !four;
        qc["llm_int8_threshold"] = 6.0;
        qc["llm_int8_has_fp16_weight"] = false;
        qc["llm_int8_enable_fp32_cpu_offload"] = false;
        if (o.skip.empty()) {
            qc["llm_int8_skip_modules"] = nullptr;
        } else {
            json mods = json::array();
            if (std::find(o.skip.begin(), o.skip.end(), "lm_head") == o.skip.end()) mods.push_back("lm_head");
            for (const std::string& s : o.skip) mods.push_back(s);
            qc["llm_int8_skip_modules"] = mods;
        }
        // An int8 model keeps BitsAndBytesConfig's 4-bit defaults (fp4, float32), as transformers writes them.
        qc["bnb_4bit_quant_type"] = !four ? "fp4" : o.format == KBIT_IO_FORMAT_FP4 ? "fp4" : "nf4";
        qc["bnb_4bit_use_double_quant"] = o.nested;
        qc["bnb_4bit_compute_dtype"] = four ? torch_name(o.compute_dtype) : "float32";
        qc["bnb_4bit_quant_storage"] = "uint8";
        cfg["quantization_config"] = qc;
    });
    progress.finish(j.out);
    if (!o.quiet && quantized == 0) std::fprintf(stderr, "kbit quantize: note: no tensor was quantized\n");
    return 0;
}

// ---- dequantize ------------------------------------------------------------------------------

int run_dequantize_job(Job& j, int32_t out_dtype, bool quiet) {
    open_job(j);
    // The layer whose weight each P.weight is; the other tensors of a layer (P.weight.* of a 4-bit
    // layer, P.SCB and P.weight_format of an int8 one) are dropped.
    std::map<std::string, const kbit_io_quant*> layer_of_weight;
    std::map<std::string, int32_t> format_of;  // prefix -> format
    for (size_t i = 0; i < kbit_io_quant_count(j.ck); ++i) {
        const kbit_io_quant* q;
        check_io(kbit_io_quant_describe(j.ck, i, &q));
        layer_of_weight[std::string(q->prefix) + ".weight"] = q;
        format_of[q->prefix] = q->format;
    }
    auto companion = [&](const std::string& n) {
        for (size_t at = n.find(".weight."); at != std::string::npos; at = n.find(".weight.", at + 1)) {
            const auto f = format_of.find(n.substr(0, at));
            if (f != format_of.end() && f->second != KBIT_IO_FORMAT_INT8) return true;
        }
        for (const char* suffix : {".SCB", ".weight_format"}) {
            const size_t len = std::strlen(suffix);
            if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0) {
                const auto f = format_of.find(n.substr(0, n.size() - len));
                if (f != format_of.end() && f->second == KBIT_IO_FORMAT_INT8) return true;
            }
        }
        return false;
    };
    const size_t count = kbit_io_tensor_count(j.ck);
    const uint64_t total_in = tensor_bytes(j.ck);
    Progress progress("kbit dequantize", quiet, count, total_in);
    std::map<std::string, size_t> weight_map;
    std::vector<float> absmax;
    std::vector<uint8_t> outputs[2];  // one being written while the other is computed
    size_t dequantized = 0;
    WriteBehind write_behind(j.compute.count() > 1);
    auto dense_dtype = [&](const kbit_io_quant* q) {
        return out_dtype >= 0 ? out_dtype : q->format == KBIT_IO_FORMAT_INT8 ? KBIT_DTYPE_FP16 : q->dtype;
    };
    // Every output tensor declared first, so each shard's bytes are written once (docs/cli.md).
    for (size_t i = 0; i < count; ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(j.ck, i, &t));
        if (companion(t->name)) continue;
        const auto it = layer_of_weight.find(t->name);
        if (it == layer_of_weight.end())
            check_io(kbit_io_writer_declare(j.writers[t->shard], t->name, t->dtype, t->ndim, t->shape));
        else
            check_io(kbit_io_writer_declare(j.writers[t->shard], t->name, io_dtype_of(dense_dtype(it->second)),
                                            it->second->ndim, it->second->shape));
    }
    for (size_t i = 0; i < count; ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(j.ck, i, &t));
        const std::string name = t->name;
        kbit_io_writer* w = j.writers[t->shard];
        if (companion(name)) {
            progress.step(name, t->nbytes, "dropped (part of a layer)");
            continue;
        }
        const auto it = layer_of_weight.find(name);
        if (it == layer_of_weight.end()) {
            write_behind.submit([=] { check_io(kbit_io_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data)); });
            weight_map[name] = t->shard;
            progress.step(name, t->nbytes, "copied");
            continue;
        }
        const kbit_io_quant* q = it->second;
        std::vector<uint8_t>& out = outputs[dequantized++ % 2];
        const int64_t n = static_cast<int64_t>(q->numel);
        const int32_t dt = dense_dtype(q);
        out.resize(static_cast<size_t>(n) * dtype_size(dt));
        if (q->format == KBIT_IO_FORMAT_INT8) {
            const int64_t rows = q->shape[0], cols = q->shape[1];
            const int8_t* cbp = static_cast<const int8_t*>(q->weight);
            std::vector<float> scb_copy(static_cast<size_t>(rows));  // copied: the file may not align it
            std::memcpy(scb_copy.data(), static_cast<const void*>(q->scb), static_cast<size_t>(rows) * 4);
            j.compute.run(rows, rows_per_piece(cols), [&](int64_t r0, int64_t r1) {
                std::vector<float> row(static_cast<size_t>(cols));
                std::vector<uint16_t> h(dt == KBIT_DTYPE_FP32 ? 0 : static_cast<size_t>(cols));
                for (int64_t r = r0; r < r1; ++r) {
                    // bitsandbytes' int8_vectorwise_dequant: CB * SCB * (1 / 127) in float32.
                    const int8_t* in = cbp + r * cols;
                    for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(in[c]) * scb_copy[r] * 7.874015718698502e-3f;
                    uint8_t* dst = out.data() + static_cast<size_t>(r * cols) * dtype_size(dt);
                    if (dt == KBIT_DTYPE_FP32) {
                        std::memcpy(dst, row.data(), static_cast<size_t>(cols) * 4);
                        continue;
                    }
                    if (dt == KBIT_DTYPE_FP16)
                        kbit::float_to_half_array(row.data(), h.data(), cols);
                    else
                        for (int64_t c = 0; c < cols; ++c) h[c] = kbit::float_to_bf16(row[c]);
                    std::memcpy(dst, h.data(), static_cast<size_t>(cols) * 2);
                }
            });
        } else {
            absmax.resize(q->blocks);
            if (q->nested) {
                std::vector<float> nab(q->nested_blocks), nqm(256);
                std::memcpy(nab.data(), static_cast<const void*>(q->nested_absmax), q->nested_blocks * 4);
                std::memcpy(nqm.data(), static_cast<const void*>(q->nested_quant_map), 256 * 4);
                check(j.t4->kbit_nested_absmax_dequantize(static_cast<const uint8_t*>(q->absmax), nqm.data(), nab.data(),
                                                          q->nested_offset, absmax.data(), static_cast<int64_t>(q->blocks),
                                                          q->nested_blocksize, nullptr),
                      t->name);
            } else {
                std::memcpy(absmax.data(), q->absmax, q->absmax_bytes);
            }
            const int64_t bs = q->blocksize;
            const size_t elem = dtype_size(dt);
            j.compute.run(n, piece_of(bs), [&](int64_t begin, int64_t end) {
                check(j.t4->kbit_dequantize_4bit(q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, dt,
                                                 static_cast<const uint8_t*>(q->weight) + begin / 2, absmax.data() + begin / bs,
                                                 out.data() + begin * elem, bs, end - begin, nullptr),
                      t->name);
            });
        }
        write_behind.submit([=, data = out.data()] {
            check_io(kbit_io_writer_add(w, t->name, io_dtype_of(dt), q->ndim, q->shape, data));
        });
        weight_map[name] = t->shard;
        progress.step(name, t->nbytes, std::string(kbit_io_format_name(q->format)) + " to " + torch_name(dt));
    }
    write_behind.wait();
    finish_job(j, weight_map, [](json& cfg) { cfg.erase("quantization_config"); });
    progress.finish(j.out);
    return 0;
}

int usage_error(const char* cmd, const std::string& msg, const char* usage) {
    std::fprintf(stderr, "kbit %s: %s\n%s", cmd, msg.c_str(), usage);
    return 2;
}

}  // namespace

int run_quantize(int argc, char** argv) {
    QuantOptions o;
    bool blocksize_given = false, compute_given = false;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (a == "--help" || a == "-h") {
            std::fputs(kQuantizeUsage, stdout);
            return 0;
        } else if (a == "--nf4" || a == "--fp4" || a == "--int8") {
            const int32_t f = a == "--nf4" ? KBIT_IO_FORMAT_NF4 : a == "--fp4" ? KBIT_IO_FORMAT_FP4 : KBIT_IO_FORMAT_INT8;
            if (o.format >= 0 && o.format != f) return usage_error("quantize", "--nf4, --fp4 and --int8 exclude each other", kQuantizeUsage);
            o.format = f;
        } else if (a == "--blocksize") {
            const char* v = value();
            char* end = nullptr;
            const long b = v ? std::strtol(v, &end, 10) : 0;
            if (!v || *end || b < KBIT_BLOCKSIZE_MIN || b > KBIT_BLOCKSIZE_MAX || (b & (b - 1)))
                return usage_error("quantize", format("--blocksize %s: not a power of two in 32 ... 4096", v ? v : "(missing)"), kQuantizeUsage);
            o.blocksize = static_cast<int>(b);
            blocksize_given = true;
        } else if (a == "--double-quant") {
            o.nested = true;
        } else if (a == "--skip") {
            const char* v = value();
            if (!v || !*v) return usage_error("quantize", "--skip needs a pattern", kQuantizeUsage);
            o.skip.push_back(v);
        } else if (a == "--no-default-skip") {
            o.default_skip = false;
        } else if (a == "--compute-dtype") {
            const char* v = value();
            if (!v || !parse_dtype(v, o.compute_dtype))
                return usage_error("quantize", format("--compute-dtype %s: not fp32, fp16 or bf16", v ? v : "(missing)"), kQuantizeUsage);
            compute_given = true;
        } else if (a == "--quiet" || a == "-q") {
            o.quiet = true;
        } else if (!a.empty() && a[0] == '-') {
            return usage_error("quantize", "unknown option '" + a + "'", kQuantizeUsage);
        } else {
            pos.push_back(a);
        }
    }
    if (pos.size() != 2) return usage_error("quantize", "IN and OUT are required (and nothing else)", kQuantizeUsage);
    if (o.format < 0) return usage_error("quantize", "one of --nf4, --fp4, --int8 is required", kQuantizeUsage);
    if (o.format == KBIT_IO_FORMAT_INT8 && (o.nested || blocksize_given || compute_given))
        return usage_error("quantize", "--double-quant, --blocksize and --compute-dtype are for --nf4 / --fp4", kQuantizeUsage);
    Job j;
    j.in = pos[0];
    j.out = pos[1];
    catch_signals();
    try {
        return run_quantize_job(j, o);
    } catch (const Failure& e) {
        std::fprintf(stderr, "%skbit quantize: %s\n", isatty(STDERR_FILENO) && !o.quiet ? "\n" : "", e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%skbit quantize: %s\n", isatty(STDERR_FILENO) && !o.quiet ? "\n" : "", e.what());
    }
    return 1;
}

int run_dequantize(int argc, char** argv) {
    int32_t dtype = -1;
    bool quiet = false;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kDequantizeUsage, stdout);
            return 0;
        } else if (a == "--dtype") {
            const char* v = i + 1 < argc ? argv[++i] : nullptr;
            if (!v || !parse_dtype(v, dtype))
                return usage_error("dequantize", format("--dtype %s: not fp32, fp16 or bf16", v ? v : "(missing)"), kDequantizeUsage);
        } else if (a == "--quiet" || a == "-q") {
            quiet = true;
        } else if (!a.empty() && a[0] == '-') {
            return usage_error("dequantize", "unknown option '" + a + "'", kDequantizeUsage);
        } else {
            pos.push_back(a);
        }
    }
    if (pos.size() != 2) return usage_error("dequantize", "IN and OUT are required (and nothing else)", kDequantizeUsage);
    Job j;
    j.in = pos[0];
    j.out = pos[1];
    catch_signals();
    try {
        return run_dequantize_job(j, dtype, quiet);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%skbit dequantize: %s\n", isatty(STDERR_FILENO) && !quiet ? "\n" : "", e.what());
    }
    return 1;
}

}  // namespace kbit::cli
