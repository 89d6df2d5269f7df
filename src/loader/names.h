// names.h — names of the loader's constants (used by the exported *_name functions and diagnostics).
#pragma once

#include <cstdint>

namespace kbit::loader {

const char* interface_name(int32_t iface) noexcept;
const char* interface_state_name(int32_t state) noexcept;
const char* source_name(int32_t source) noexcept;
const char* stage_name(int32_t stage) noexcept;
const char* verdict_name(int32_t verdict) noexcept;

}  // namespace kbit::loader
