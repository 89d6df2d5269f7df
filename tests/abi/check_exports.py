#!/usr/bin/env python3
"""Checks the dynamic symbol table of a backend (or of the loader libkbit.so) against abi/: for every
list whose version symbol the object exports (the interfaces, and for the loader its own API), every
function of that list must be exported, under the version node of the minor that added it
(KBIT_<LIST>_<major>.<minor>), and nothing else may be exported.
Usage: check_exports.py LIB.so [expected lists...]  (when given, exactly those lists must be present:
core 4bit 8bit optim8 for a backend; plus loader for libkbit.so)."""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import abi_gen  # noqa: E402


def exported(lib):
    """{name: version node or None} of the object's defined dynamic symbols."""
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] not in ("A",):  # 'A' = version node names
            name, _, node = parts[2].partition("@")
            names[name] = node.lstrip("@") or None
    return names


def expected_nodes(lst):
    """{symbol: version node} of one list, as scripts/abi_gen.py writes the version script."""
    tag = lst.upper()
    nodes = {abi_gen.version_symbol(lst): f"KBIT_{tag}_{abi_gen.MAJOR}.0"}
    for fn in abi_gen.parse_def(abi_gen.ABI / f"kbit_{lst}.def"):
        nodes[fn["name"]] = f"KBIT_{tag}_{abi_gen.MAJOR}.{fn['minor']}"
    return nodes


def main(argv):
    lib, expected = argv[0], argv[1:]
    names = exported(lib)
    present = [i for i in abi_gen.ALL_LISTS if abi_gen.version_symbol(i) in names]
    errors = []
    if expected and sorted(present) != sorted(expected):
        errors.append(f"lists exported: {present}, expected: {expected}")
    allowed = set()
    for lst in present:
        nodes = expected_nodes(lst)
        missing = sorted(set(nodes) - set(names))
        if missing:
            errors.append(f"{lst}: missing {len(missing)}: {', '.join(missing[:10])}")
        wrong = sorted(f"{n}@{names[n]} (expected @{nodes[n]})" for n in nodes if n in names and names[n] != nodes[n])
        if wrong:
            errors.append(f"{lst}: wrong version node ({len(wrong)}): {', '.join(wrong[:10])}")
        allowed |= set(nodes)
    extra = sorted(set(names) - allowed)
    if extra:
        errors.append(f"exported but in no implemented list ({len(extra)}): {', '.join(extra[:20])}")
    if errors:
        print(f"{lib}:", *errors, sep="\n  ")
        return 1
    print(f"{lib}: {len(names)} symbols with their version nodes, lists {', '.join(present)}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
