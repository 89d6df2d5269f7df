#!/usr/bin/env python3
"""Writes a file that is only an ELF header of a shared object for another machine (for the loader
tests when no cross compiler is available): make_elf_header.py OUT E_MACHINE {32|64}."""
import struct
import sys


def main(out, machine, bits):
    elf_class = 2 if bits == 64 else 1
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0]) + bytes(8)  # little-endian, version 1, SysV
    if bits == 64:
        # e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags, e_ehsize, e_phentsize,
        # e_phnum, e_shentsize, e_shnum, e_shstrndx
        rest = struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)
    else:
        rest = struct.pack("<HHIIIIIHHHHHH", 3, machine, 1, 0, 0, 0, 0, 52, 32, 0, 40, 0, 0)
    with open(out, "wb") as f:
        f.write(ident + rest)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
