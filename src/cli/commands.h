// commands.h — the subcommands of the `kbit` tool. Add one by writing cmd_<name>.cpp with a
// run function and listing it in kCommands (main.cpp); quantize and dequantize, which share their
// job, are the convert_*.cpp files (entry points in convert_args.cpp).
#pragma once

namespace kbit::cli {

struct Command {
    const char* name;
    const char* summary;  // one line for `kbit help`
    int (*run)(int argc, char** argv);  // argv[0] is the command name; returns the exit status
};

// `kbit info [--json] [--isolate[=SECONDS]]`: the loader, its search order, every candidate backend
// and the default; --isolate validates each candidate in a child process.
int run_info(int argc, char** argv);

// `kbit inspect PATH [--json]`: the tensors of a safetensors checkpoint and its bitsandbytes layers
// (libkbit_io.so).
int run_inspect(int argc, char** argv);

// `kbit quantize IN OUT --nf4|--fp4|--int8 ...`: a dense checkpoint to the bitsandbytes layout.
int run_quantize(int argc, char** argv);

// `kbit dequantize IN OUT [--dtype D]`: every bitsandbytes layer back to a dense weight.
int run_dequantize(int argc, char** argv);

}  // namespace kbit::cli
