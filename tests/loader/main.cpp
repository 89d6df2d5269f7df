// The loader test kit (tests/loader): fake vendor backends against private copies of libkbit.so.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
