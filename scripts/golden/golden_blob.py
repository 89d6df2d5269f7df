"""Shared by the golden-vector generators: where things are (repository root, bitsandbytes' CPU library
in .venv) and the format the conformance suite reads (tests/conformance/golden.h): arrays appended
to one binary blob, and a JSON index whose cases give their byte offsets."""
import glob
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")


def bnb_cpu_library():
    """libbitsandbytes_cpu.so of the bitsandbytes wheel in .venv (installed with --no-deps), or None."""
    hits = glob.glob(os.path.join(ROOT, ".venv/lib/python3*/site-packages/bitsandbytes/libbitsandbytes_cpu.so"))
    return hits[0] if hits else None


def torch_capability(script):
    """torch's CPU kernel set, after refusing its DEFAULT (non-vectorised) kernels, whose linspace rounds
    differently: goldens are what a bitsandbytes user on an AVX2 or AVX-512 machine gets."""
    import sys
    import torch
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        sys.exit(f"{script}: torch runs its {capability} CPU kernels; record on an AVX2 or AVX-512 machine "
                 "without ATEN_CPU_CAPABILITY=default")
    return capability


class Blob:
    """Arrays written one after another, little-endian, as raw bytes."""

    def __init__(self):
        self.data = bytearray()

    def put(self, arr):
        """Appends arr; returns {"offset", "bytes"}, the way an index names it."""
        offset = len(self.data)
        self.data.extend(np.ascontiguousarray(arr).tobytes())
        return {"offset": offset, "bytes": int(arr.nbytes)}

    def save(self, directory, bin_name, index_name, index):
        """Writes the blob and its JSON index."""
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, bin_name), "wb") as f:
            f.write(bytes(self.data))
        with open(os.path.join(directory, index_name), "w") as f:
            json.dump(index, f, indent=1)
            f.write("\n")

    def save_cases(self, stem, source, generator, layout, cases):
        """Writes <stem>.bin and its index <stem>.json to GOLDEN_DIR, the index {"source", "generator",
        "layout", "cases"}, and prints how many cases and bytes."""
        index = {"source": source, "generator": generator, "layout": layout, "cases": cases}
        self.save(GOLDEN_DIR, stem + ".bin", stem + ".json", index)
        print(f"{len(cases)} cases, {len(self.data)} bytes")
