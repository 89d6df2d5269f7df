#!/usr/bin/env python3
"""Checks the dynamic symbol table of a backend against abi/: for every interface whose version
symbol the object exports, every function of that interface must be exported, and nothing else may
be. Usage: check_exports.py LIB.so [expected interfaces...]  (when given, exactly those interfaces
must be present)."""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import abi_gen  # noqa: E402


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] not in ("A",):  # 'A' = version node names
            names.add(parts[2].split("@")[0])
    return names


def main(argv):
    lib, expected = argv[0], argv[1:]
    names = exported(lib)
    present = [i for i in abi_gen.INTERFACES if abi_gen.version_symbol(i) in names]
    errors = []
    if expected and sorted(present) != sorted(expected):
        errors.append(f"interfaces exported: {present}, expected: {expected}")
    allowed = set()
    for iface in present:
        syms = set(abi_gen.symbols(iface))
        missing = sorted(syms - names)
        if missing:
            errors.append(f"{iface}: missing {len(missing)}: {', '.join(missing[:10])}")
        allowed |= syms
    extra = sorted(names - allowed)
    if extra:
        errors.append(f"exported but in no implemented interface ({len(extra)}): {', '.join(extra[:20])}")
    if errors:
        print(f"{lib}:", *errors, sep="\n  ")
        return 1
    print(f"{lib}: {len(names)} symbols, interfaces {', '.join(present)}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
