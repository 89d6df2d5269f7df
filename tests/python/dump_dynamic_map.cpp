// Prints kbit::dynamic_map(true) and dynamic_map(false) (src/common/kbit_dynamic_map.h, the tables
// the conformance suite uses) as fp32 bit patterns, one table per line, so that test_dynamic_map.py
// can compare the Python package's create_dynamic_map() with it bit for bit.
#include <cstdio>

#include "testutil.h"

int main() {
    for (bool is_signed : {true, false}) {
        for (float v : kbit_test::dynamic_map(is_signed)) std::printf("%08x ", kbit_test::bits_of(v));
        std::printf("\n");
    }
    return 0;
}
