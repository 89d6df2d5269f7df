// convert_args.cpp — `kbit quantize IN OUT --nf4|--fp4|--int8 ...` and `kbit dequantize IN OUT
// [--dtype D]`: a dense safetensors checkpoint (file or model directory) to the transformers /
// bitsandbytes layout and back (docs/cli.md). This file holds the commands' entry points: usage,
// options, and the exit status: 0 done, 1 a bad input, a failed write or backend call (nothing
// written), 2 usage. The job itself: convert_job.h (read with libkbit_io.so, written with its writer,
// computed by the CPU backend through the loader's tables, one tensor computed while the previous one
// is written, every output under a temporary name first).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "convert_job.h"
#include "progress.h"

namespace kbit::cli {

namespace {

using kbit::fs::format;

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
    "without .weight), and with --nf4 / --fp4 every 3-D float tensor named *.experts.NAME (fused MoE\n"
    "experts, transformers v5: mlp.experts.gate_up_proj, down_proj) that no skip pattern matches (by its\n"
    "name), stored under its own name; everything else is copied unchanged.\n"
    "  --nf4, --fp4       4-bit, blocks of --blocksize (32 ... 4096, default 64) elements\n"
    "  --int8             LLM.int8: one int8 row per output, scale SCB (through float16, as bitsandbytes)\n"
    "  --double-quant     4-bit: nested absmax (bnb_4bit_use_double_quant)\n"
    "  --skip PATTERN     also keep these modules dense: a module name, a dotted suffix or prefix of one\n"
    "                     (\"lm_head\", \"mlp.down_proj\"), or a glob (\"*.layers.0.*\"); repeatable\n"
    "  --no-default-skip  do not skip lm_head, *embed*, *norm*, wte, wpe, nor the router P.gate of a block\n"
    "                     with fused experts P.experts.* (the defaults)\n"
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

// --dtype / --compute-dtype: fp32, fp16, bf16 or torch's names for them.
bool parse_dtype(const std::string& s, int32_t& out) {
    if (s == "fp32" || s == "float32") out = KBIT_DTYPE_FP32;
    else if (s == "fp16" || s == "float16") out = KBIT_DTYPE_FP16;
    else if (s == "bf16" || s == "bfloat16") out = KBIT_DTYPE_BF16;
    else return false;
    return true;
}

// A usage error (exit status 2): the message, then the command's usage.
int usage_error(const char* cmd, const std::string& msg, const char* usage) {
    std::fprintf(stderr, "kbit %s: %s\n%s", cmd, msg.c_str(), usage);
    return 2;
}

// Runs a job on IN and OUT (pos) with the signals caught; prints its failure (after the progress
// line on a terminal) and returns the exit status.
template <class Body>
int run_job(const char* cmd, const std::vector<std::string>& pos, bool quiet, Body&& body) {
    Job j;
    j.in = pos[0];
    j.out = pos[1];
    catch_signals();
    try {
        return body(j);
    } catch (const std::exception& e) {  // Failure, kbit::fs::Error, bad_alloc
        std::fprintf(stderr, "%skbit %s: %s\n", isatty(STDERR_FILENO) && !quiet ? "\n" : "", cmd, e.what());
    }
    return 1;
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
    return run_job("quantize", pos, o.quiet, [&](Job& j) { return run_quantize_job(j, o); });
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
    return run_job("dequantize", pos, quiet, [&](Job& j) { return run_dequantize_job(j, dtype, quiet); });
}

}  // namespace kbit::cli
