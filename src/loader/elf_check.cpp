#include "elf_check.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kbit::loader {
namespace {

const char* machine_name(unsigned machine) {
    switch (machine) {
        case EM_386: return "i386";
        case EM_X86_64: return "x86-64";
        case EM_AARCH64: return "AArch64";
        case EM_ARM: return "ARM";
        case EM_PPC64: return "PowerPC64";
        case EM_S390: return "s390";
        case EM_RISCV: return "RISC-V";
        case 258: return "LoongArch";  // EM_LOONGARCH, absent from older <elf.h>
        default: return "an unknown machine";
    }
}

// The header of libkbit.so as mapped in memory: the class, byte order and machine this process runs.
const ElfW(Ehdr) & own_header() {
    Dl_info info{};
    dladdr(reinterpret_cast<void*>(&check_elf), &info);
    return *static_cast<const ElfW(Ehdr)*>(info.dli_fbase);
}

std::string read_header(const std::string& path, unsigned char* buf, size_t size, size_t* got) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return "not a regular file";
    }
    ssize_t n = 0;
    *got = 0;
    while (*got < size && (n = ::read(fd, buf + *got, size - *got)) > 0) *got += static_cast<size_t>(n);
    int err = errno;
    ::close(fd);
    if (n < 0) return std::string("cannot read: ") + std::strerror(err);
    return "";
}

}  // namespace

std::string check_elf(const std::string& path) {
    unsigned char buf[sizeof(ElfW(Ehdr))] = {};
    size_t got = 0;
    std::string error = read_header(path, buf, sizeof buf, &got);
    if (!error.empty()) return error;
    if (got < EI_NIDENT || std::memcmp(buf, ELFMAG, SELFMAG) != 0) return "not an ELF file";
    const ElfW(Ehdr)& own = own_header();
    if (buf[EI_CLASS] != own.e_ident[EI_CLASS])
        return std::string("ELF class ") + (buf[EI_CLASS] == ELFCLASS32 ? "32-bit" : "64-bit") +
               ", this process is " + (own.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "64-bit");
    if (buf[EI_DATA] != own.e_ident[EI_DATA])
        return std::string(buf[EI_DATA] == ELFDATA2MSB ? "big-endian" : "little-endian") +
               " ELF file, this process is " + (own.e_ident[EI_DATA] == ELFDATA2MSB ? "big-endian" : "little-endian");
    if (got < sizeof(ElfW(Ehdr))) return "truncated ELF header";
    ElfW(Ehdr) header;
    std::memcpy(&header, buf, sizeof header);
    if (header.e_machine != own.e_machine)
        return std::string("built for ") + machine_name(header.e_machine) + " (ELF machine " +
               std::to_string(header.e_machine) + "), this process is " + machine_name(own.e_machine) + " (" +
               std::to_string(own.e_machine) + ")";
    if (header.e_type != ET_DYN)
        return "ELF type " + std::to_string(header.e_type) + " is not a shared object";
    return "";
}

}  // namespace kbit::loader
