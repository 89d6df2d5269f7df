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

// An open backend file. O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
// forever; a FIFO (or any other non-regular file) is then rejected by its type.
struct File {
    int fd = -1;
    off_t size = 0;
    ~File() {
        if (fd >= 0) ::close(fd);
    }
};

std::string open_regular(const std::string& path, File* f) {
    f->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f->fd < 0) return std::string("cannot open: ") + std::strerror(errno);
    struct stat st {};
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) return "not a regular file";
    f->size = st.st_size;
    return "";
}

// Up to `size` bytes at `offset`; *got says how many there were.
std::string read_at(const File& f, off_t offset, void* buf, size_t size, size_t* got) {
    *got = 0;
    while (*got < size) {
        const ssize_t n = ::pread(f.fd, static_cast<unsigned char*>(buf) + *got, size - *got,
                                  offset + static_cast<off_t>(*got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::string("cannot read: ") + std::strerror(errno);
        if (n == 0) break;
        *got += static_cast<size_t>(n);
    }
    return "";
}

// dlopen maps every PT_LOAD segment from the file: a segment that ends past the end of the file
// (a truncated or cut-short copy) would be a SIGBUS on first touch, inside dlopen or much later.
std::string check_program_headers(const File& f, const ElfW(Ehdr) & h) {
    const auto size = static_cast<uint64_t>(f.size);
    if (h.e_phentsize != sizeof(ElfW(Phdr))) return "program header size " + std::to_string(h.e_phentsize) + " is wrong";
    if (h.e_phnum == 0) return "no program headers";
    const uint64_t table_end = static_cast<uint64_t>(h.e_phoff) + uint64_t{h.e_phnum} * sizeof(ElfW(Phdr));
    if (h.e_phoff > size || table_end > size)
        return "truncated: program headers end at byte " + std::to_string(table_end) + ", the file has " +
               std::to_string(size);
    // The section headers (last in a linked file) are not mapped, but a file cut anywhere is a broken
    // copy: reject it whole rather than load what is left.
    const uint64_t sections_end = static_cast<uint64_t>(h.e_shoff) + uint64_t{h.e_shnum} * h.e_shentsize;
    if (h.e_shnum != 0 && (h.e_shoff > size || sections_end > size))
        return "truncated: section headers end at byte " + std::to_string(sections_end) + ", the file has " +
               std::to_string(size);
    for (unsigned i = 0; i < h.e_phnum; ++i) {
        ElfW(Phdr) ph;
        size_t got = 0;
        std::string error = read_at(f, static_cast<off_t>(h.e_phoff + i * sizeof ph), &ph, sizeof ph, &got);
        if (!error.empty()) return error;
        if (got != sizeof ph) return "truncated program header";
        if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC) continue;
        const uint64_t end = static_cast<uint64_t>(ph.p_offset) + ph.p_filesz;
        if (ph.p_offset > size || end < ph.p_offset || end > size)
            return "truncated: segment " + std::to_string(i) + " ends at byte " + std::to_string(end) +
                   ", the file has " + std::to_string(size);
    }
    return "";
}

}  // namespace

std::string check_elf(const std::string& path) {
    unsigned char buf[sizeof(ElfW(Ehdr))] = {};
    size_t got = 0;
    File file;
    std::string error = open_regular(path, &file);
    if (error.empty()) error = read_at(file, 0, buf, sizeof buf, &got);
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
    return check_program_headers(file, header);
}

}  // namespace kbit::loader
