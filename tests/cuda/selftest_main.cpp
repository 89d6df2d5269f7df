// The CUDA self-test: every interface's functions against the CPU reference kbit::ref on paths the
// conformance suite does not reach (unaligned buffers, both int8 GEMM paths, wide reductions), plus
// exhaustive conversion checks, on a GPU. Exits 77 (skipped) without one.
#include <cstdio>

#include "catch_run.h"
#include "kbit/kbit.h"

int main(int argc, char** argv) {
    if (kbit_backend_probe() <= 0) {
        std::printf("no usable CUDA device: %s (skipped)\n", kbit_backend_info());
        return 77;
    }
    std::printf("%s\n", kbit_backend_info());
    return run_catch(argc, argv);
}
