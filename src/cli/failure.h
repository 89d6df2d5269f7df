// failure.h — the error of `kbit quantize` / `kbit dequantize`: a message for stderr and exit status
// 1 (nothing is written). Thrown by the job, its threads and its progress; caught in convert_args.cpp.
#pragma once

#include <stdexcept>

namespace kbit::cli {

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace kbit::cli
