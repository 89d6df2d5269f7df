"""Shared fixtures of the Python suite. Runs against the build tree (ctest sets KBIT_LIBRARY_DIR and
PYTHONPATH) or an installed package."""
import ctypes
import glob
import json
import os
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
if "kbit" not in sys.modules and not os.environ.get("KBIT_TEST_INSTALLED"):
    sys.path.insert(0, str(ROOT / "python"))


def subprocess_env(**extra):
    """Environment for a child interpreter that imports the same kbit as this one."""
    env = dict(os.environ, **extra)
    if not os.environ.get("KBIT_TEST_INSTALLED"):
        env["PYTHONPATH"] = str(ROOT / "python")
    return env


def child_legs(script, directory):
    """Runs `python script LEG OUT` for LEG "bnb" (bitsandbytes as installed; KBIT_BITSANDBYTES=0 keeps a
    pip-installed kbit's entry point out) and "kbit", and returns {leg: what the child torch.save'd}."""
    import subprocess
    import torch
    out = {}
    for leg in ("bnb", "kbit"):
        path = Path(directory) / f"{leg}.pt"
        r = subprocess.run([sys.executable, str(script), leg, str(path)], capture_output=True, text=True,
                           timeout=600, env=subprocess_env(KBIT_BITSANDBYTES="0" if leg == "bnb" else "1"))
        assert r.returncode == 0, f"{leg} leg failed:\n{r.stdout}\n{r.stderr}"
        out[leg] = torch.load(path)
    return out


def child_main(child):
    """The child side of child_legs, for `python script LEG OUT`: torch.save's child(LEG) (a dict of meta and
    results) to OUT and exits 0."""
    import torch
    torch.save(child(sys.argv[1]), sys.argv[2])
    sys.exit(0)


def misaligned(a):
    """A copy of `a` whose data starts one byte past an aligned address (flags.aligned False)."""
    buf = np.zeros(a.nbytes + 16, np.uint8)
    start = (-buf.ctypes.data) % 16 + 1
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _elf_machine(path):
    """(byte order, e_machine) of an ELF file, or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    return (head[5], head[18:20]) if len(head) == 20 and head[:4] == b"\x7fELF" else None


def _bnb_candidates():
    roots = [sysconfig.get_paths()["purelib"], *glob.glob(str(ROOT / ".venv/lib/python3*/site-packages"))]
    return [p for p in (Path(r) / "bitsandbytes" / "libbitsandbytes_cpu.so" for r in roots) if p.is_file()]


def bnb_library_path():
    """bitsandbytes' CPU library from its PyPI wheel (installed with --no-deps) for this interpreter's
    machine, or None. The source tree's .venv can be another machine's: an x86-64 one seen by an arm64
    Python under qemu (scripts/cross-aarch64-python)."""
    own = _elf_machine("/proc/self/exe")
    for p in _bnb_candidates():
        if own is None or _elf_machine(p) == own:
            return p
    return None


@pytest.fixture(scope="session")
def bnb():
    """ctypes.CDLL of libbitsandbytes_cpu.so, opened as bitsandbytes does (no argtypes); skips when
    the wheel is not installed, or only for another machine."""
    p = bnb_library_path()
    if p is None:
        other = _bnb_candidates()
        if other:
            pytest.skip(f"bitsandbytes' libbitsandbytes_cpu.so is installed only for another machine ({other[0]})")
        pytest.skip("bitsandbytes' libbitsandbytes_cpu.so not installed (pip install --no-deps bitsandbytes)")
    return ctypes.CDLL(str(p))


@pytest.fixture
def rng(request):
    # One seed per test, stable across runs.
    return np.random.default_rng(sum(map(ord, request.node.nodeid)) * 7919)


def load_golden(stem):
    index = json.loads((GOLDEN / f"{stem}.json").read_text())
    blob = (GOLDEN / f"{stem}.bin").read_bytes()
    return index, blob


def golden_array(blob, entry, dtype):
    return np.frombuffer(blob, dtype=dtype, count=entry["bytes"] // np.dtype(dtype).itemsize,
                         offset=entry["offset"]).copy()
