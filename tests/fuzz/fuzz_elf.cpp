// fuzz_elf: the loader's check of a backend file before dlopen (src/loader/elf_check.cpp,
// kbit::loader::check_elf), on the fuzz input written to an in-memory file. Checks:
//   - no crash, hang or sanitizer report in the check;
//   - a file the check accepts really is what it promises dlopen: an ELF64 little-endian x86-64 (this
//     process's class, byte order and machine) shared object whose program header table and every
//     PT_LOAD / PT_DYNAMIC segment lie inside the file (recomputed here independently), and whose
//     section header table does too;
//   - with KBIT_FUZZ_ELF_DLOPEN=1, an accepted file is also dlopen()ed in a fork()ed child, which must
//     not crash (off by default: the check promises that no truncated file reaches dlopen, not that any
//     crafted file is safe to load; glibc's loader trusts the dynamic section, and a fuzzer finds a
//     DT_RELA pointing anywhere within seconds).
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "elf_check.h"

namespace {

std::string g_path;
int g_fd = -1;
bool g_dlopen = false;

[[noreturn]] void fail(const char* what, const std::string& detail) {
    std::fprintf(stderr, "fuzz_elf: %s%s\n", what, detail.c_str());
    std::fflush(stderr);
    std::abort();
}

// The promises of an accepted file, recomputed from the bytes.
void check_accepted(const uint8_t* data, size_t size) {
    ElfW(Ehdr) h;
    if (size < sizeof h) fail("accepted a file shorter than an ELF header", "");
    std::memcpy(&h, data, sizeof h);
    if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) fail("accepted a file without the ELF magic", "");
    if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB || h.e_machine != EM_X86_64)
        fail("accepted a file of another class, byte order or machine", "");
    if (h.e_type != ET_DYN) fail("accepted a file that is not ET_DYN", "");
    if (h.e_phentsize != sizeof(ElfW(Phdr)) || h.e_phnum == 0) fail("accepted bad program header sizes", "");
    const unsigned __int128 table_end =
        static_cast<unsigned __int128>(h.e_phoff) + static_cast<unsigned __int128>(h.e_phnum) * sizeof(ElfW(Phdr));
    if (table_end > size) fail("accepted program headers beyond the end of the file", "");
    if (h.e_shnum != 0 &&
        static_cast<unsigned __int128>(h.e_shoff) + static_cast<unsigned __int128>(h.e_shnum) * h.e_shentsize > size)
        fail("accepted section headers beyond the end of the file", "");
    for (unsigned i = 0; i < h.e_phnum; ++i) {
        ElfW(Phdr) ph;
        std::memcpy(&ph, data + h.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC) continue;
        if (static_cast<unsigned __int128>(ph.p_offset) + ph.p_filesz > size)
            fail("accepted a segment beyond the end of the file: segment ", std::to_string(i));
    }
}

void try_dlopen() {
    const pid_t pid = fork();
    if (pid < 0) fail("fork failed", "");
    if (pid == 0) {
        void* h = dlopen(g_path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h != nullptr) dlclose(h);
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFSIGNALED(status)) fail("dlopen of an accepted file died of signal ", std::to_string(WTERMSIG(status)));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)  // ASan's report of a crash exits with 1
        fail("dlopen of an accepted file crashed in the child, exit status ", std::to_string(WEXITSTATUS(status)));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // An in-memory file (a regular file to fstat), opened by the check through its /proc path: no
    // disk writes per input, nothing left behind.
    g_fd = memfd_create("kbit_fuzz_elf", MFD_CLOEXEC);
    if (g_fd < 0) fail("memfd_create failed", "");
    g_path = "/proc/self/fd/" + std::to_string(g_fd);
    const char* d = std::getenv("KBIT_FUZZ_ELF_DLOPEN");
    g_dlopen = d != nullptr && std::strcmp(d, "1") == 0;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (ftruncate(g_fd, 0) != 0) fail("ftruncate failed", "");
    size_t done = 0;
    while (done < size) {
        const ssize_t n = pwrite(g_fd, data + done, size - done, static_cast<off_t>(done));
        if (n <= 0) fail("cannot write the temporary file", "");
        done += static_cast<size_t>(n);
    }
    const std::string reason = kbit::loader::check_elf(g_path);
    if (!reason.empty()) return 0;
    check_accepted(data, size);
    if (g_dlopen) try_dlopen();
    return 0;
}
