// elf_check.h — checks a file's ELF header against this process before dlopen() runs any of it.
#pragma once

#include <string>

namespace kbit::loader {

// "" when `path` is an ELF shared object of this process's class, byte order and machine;
// otherwise a short reason ("not an ELF file", "built for AArch64 (ELF machine 183), this process is
// x86-64 (62)", ...).
std::string check_elf(const std::string& path);

}  // namespace kbit::loader
