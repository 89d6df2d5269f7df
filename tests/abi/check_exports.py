#!/usr/bin/env python3
"""Checks the dynamic symbol table of a backend (or of the loader libkbit.so) against the ABI lists: for
every list whose version symbol the object exports (the interfaces, and for the loader its own API),
every function of that list up to the minor the object claims (its kbit_<list>_interface_version(), read
by loading the object; every function when it cannot be loaded) must be exported, under the version node of
the minor that added it (KBIT_<LIST>_<major>.<minor>), and nothing else may be exported: a backend at an
older minor (CUDA and OpenCL at 4bit 1.1) must not export the functions of the newer ones.
Usage: check_exports.py [--abi-dir DIR] LIB.so [expected lists...]  (when given, exactly those lists
must be present: core 4bit 8bit optim8 for a backend; plus loader for libkbit.so).

The same file runs in two places. In the source tree (tests/abi/, ctest abi.exports.*) it reads the
repository's abi/ with python/kbit/_abidef.py. `cmake --install` puts it in <datadir>/kbit/tools/ beside
a copy of _abidef.py, with the link <bindir>/kbit-check-exports to it; it then reads the installed lists
<datadir>/kbit/abi/ (its own ../abi), so a vendor needs no source tree. --abi-dir names another
directory of lists (abi/interfaces.def and the kbit_<list>.def files)."""
import argparse
import ctypes
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if (_HERE / "_abidef.py").is_file():  # installed: <datadir>/kbit/tools, the lists in <datadir>/kbit/abi
    _DEFAULT_ABI_DIR = _HERE.parent / "abi"
else:  # the source tree's tests/abi
    _DEFAULT_ABI_DIR = _HERE.parents[1] / "abi"
    sys.path.insert(0, str(_HERE.parents[1] / "python" / "kbit"))
import _abidef  # noqa: E402


def lists(abi_dir):
    """Every list of the directory: the backend interfaces in registry order, then the others
    (the loader's API, the checkpoint library's, bitsandbytes' CPU names) by name."""
    interfaces = [name for name, _, _ in _abidef.parse_interfaces(abi_dir / "interfaces.def")]
    others = sorted(p.stem[len("kbit_"):] for p in abi_dir.glob("kbit_*.def"))
    return interfaces + [name for name in others if name not in interfaces]


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


def claimed_minor(lib, lst):
    """The minor of `lst` that the object reports, or None when it cannot be loaded or has no such symbol."""
    try:
        version = getattr(ctypes.CDLL(str(Path(lib).resolve()), mode=ctypes.RTLD_LOCAL), _abidef.version_symbol(lst))
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_uint32
    value = version()
    return value & 0xFFFF if value >> 16 == _abidef.MAJOR else None


def expected_nodes(abi_dir, lst, minor=None):
    """{symbol: version node} of one list up to `minor` (None: all), as scripts/abi_gen.py writes the
    version script."""
    tag = lst.upper()
    nodes = {_abidef.version_symbol(lst): f"KBIT_{tag}_{_abidef.MAJOR}.0"}
    for fn in _abidef.parse_def(abi_dir / f"kbit_{lst}.def"):
        if minor is None or fn["minor"] <= minor:
            nodes[fn["name"]] = f"KBIT_{tag}_{_abidef.MAJOR}.{fn['minor']}"
    return nodes


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\nUsage:")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--abi-dir", type=Path, default=_DEFAULT_ABI_DIR,
                        help=f"the directory of the lists (default: {_DEFAULT_ABI_DIR})")
    parser.add_argument("lib", help="the shared object to check")
    parser.add_argument("expected", nargs="*", help="the lists it must implement, exactly")
    args = parser.parse_args(argv)
    abi_dir = args.abi_dir
    if not (abi_dir / "interfaces.def").is_file():
        print(f"{parser.prog}: no ABI lists in {abi_dir} (interfaces.def missing); see --abi-dir", file=sys.stderr)
        return 2
    known = lists(abi_dir)
    unknown = [e for e in args.expected if e not in known]
    if unknown:
        print(f"{parser.prog}: no such list: {', '.join(unknown)} (lists: {' '.join(known)})", file=sys.stderr)
        return 2
    lib = args.lib
    try:
        names = exported(lib)
    except FileNotFoundError:
        print(f"{parser.prog}: needs nm (binutils) on PATH", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"{parser.prog}: nm -D {lib} failed: {e.stderr.strip()}", file=sys.stderr)
        return 2
    present = [i for i in known if _abidef.version_symbol(i) in names]
    interfaces = [name for name, _, _ in _abidef.parse_interfaces(abi_dir / "interfaces.def")]
    errors = []
    if args.expected and sorted(present) != sorted(args.expected):
        errors.append(f"lists exported: {present}, expected: {args.expected}")
    allowed = set()
    for lst in present:
        nodes = expected_nodes(abi_dir, lst, claimed_minor(lib, lst) if lst in interfaces else None)
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
