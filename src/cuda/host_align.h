// host_align.h — the host's alignment test of a device pointer (which kernel variant a launch may take),
// in a plain header so that host-only code and tests use it too.
#pragma once

#include <cstdint>

namespace kbit::cuda {

inline bool host_aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0; }

}  // namespace kbit::cuda
