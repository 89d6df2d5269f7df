// convert_job.h — what `kbit quantize` and `kbit dequantize` share around their job bodies: the Job
// (the input opened with libkbit_io.so, the CPU backend's tables through the loader, one writer per
// output shard, the directory being filled), how it is set up and finished, the dtype mappings, and
// the two bodies (convert_quantize.cpp, convert_dequantize.cpp) that convert_args.cpp calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fsutil.h"
#include "kbit/kbit_io.h"
#include "kbit/kbit_loader.h"
#include "pipeline.h"

namespace kbit::cli {

// The input opened, the CPU backend's tables, and where the output goes.
struct Job {
    std::string in, out;
    bool dir = false;           // IN is a directory
    kbit::fs::TempDir out_dir;  // the directory being filled (directory output)
    kbit_io_checkpoint* ck = nullptr;
    kbit_backend* backend = nullptr;
    const kbit_4bit_table* t4 = nullptr;
    const kbit_8bit_table* t8 = nullptr;
    std::vector<kbit_io_writer*> writers;  // one per shard
    ComputeThreads compute{1};             // the command's computing threads (command_threads())
    ~Job();
};

// Opens j.in (a file, a directory, or the index file standing for its directory), the CPU backend,
// and a writer for each shard of the output: j.out itself, or j.out's name in a new directory beside
// it. Throws Failure.
void open_job(Job& j);

// Finishes every shard, writes the index, config.json (edited by `edit_config`) and the other files,
// then moves the directory to j.out. `weight_map`: each output tensor's shard. Throws Failure.
void finish_job(Job& j, const std::map<std::string, size_t>& weight_map,
                const std::function<void(nlohmann::json&)>& edit_config);

// Throws Failure with the loader's (check) or libkbit_io's (check_io) message for a failed call.
void check(kbit_status s, const char* what);
void check_io(kbit_status s);

// Bytes of every tensor of the checkpoint: the progress display's total.
uint64_t tensor_bytes(const kbit_io_checkpoint* ck);

int32_t kbit_dtype_of(int32_t io_dtype);    // KBIT_IO_DTYPE_F32/F16/BF16 -> KBIT_DTYPE_*, else -1
int32_t io_dtype_of(int32_t kbit_dtype);    // KBIT_DTYPE_* -> KBIT_IO_DTYPE_*
size_t dtype_size(int32_t kbit_dtype);      // bytes per element
const char* torch_name(int32_t kbit_dtype); // "float32", "float16", "bfloat16"

// `kbit quantize`'s options (convert_args.cpp).
struct QuantOptions {
    int32_t format = -1;  // KBIT_IO_FORMAT_*
    int blocksize = 64;
    bool nested = false;
    bool default_skip = true;
    std::vector<std::string> skip;
    int32_t compute_dtype = KBIT_DTYPE_BF16;
    bool quiet = false;
};

// The job bodies; j.in and j.out set. Return the exit status; throw Failure.
int run_quantize_job(Job& j, const QuantOptions& o);
int run_dequantize_job(Job& j, int32_t out_dtype, bool quiet);

}  // namespace kbit::cli
