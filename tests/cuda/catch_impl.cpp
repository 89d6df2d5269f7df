// Catch2's implementation, compiled once for the CUDA test programs (each has its own main(), which
// calls run_catch): the implementation is most of a test program's compile time.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_run.h"

int run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }
