// `kbit <command> [options]`: command-line tools over the kbit loader.
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "kbit/kbit_loader.h"

namespace {

using kbit::cli::Command;

const Command kCommands[] = {
    {"info", "show the loader, its search order, every backend it finds and the default choice",
     kbit::cli::run_info},
#ifdef KBIT_CLI_INSPECT
    {"inspect", "list the tensors and bitsandbytes layers of a safetensors checkpoint", kbit::cli::run_inspect},
    {"quantize", "quantize a dense checkpoint to bitsandbytes NF4/FP4 or LLM.int8 (transformers layout)",
     kbit::cli::run_quantize},
    {"dequantize", "turn the bitsandbytes layers of a checkpoint back into dense weights", kbit::cli::run_dequantize},
#endif
};

void usage(FILE* out) {
    std::fprintf(out, "usage: kbit <command> [options]\n\ncommands:\n");
    for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
    std::fprintf(out, "  %-10s %s\n", "help", "show this text");
    std::fprintf(out, "\nkbit --version prints the versions of the tool and of libkbit.so.\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
        std::strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (std::strcmp(argv[1], "--version") == 0) {
        const uint32_t v = kbit_loader_interface_version();
        std::printf("kbit %s (loader API %u.%u)\n", KBIT_RELEASE_VERSION_STRING, KBIT_VERSION_MAJOR_OF(v),
                    KBIT_VERSION_MINOR_OF(v));
        return 0;
    }
    for (const Command& c : kCommands)
        if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
    std::fprintf(stderr, "kbit: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
