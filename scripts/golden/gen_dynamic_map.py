#!/usr/bin/env python3
"""Records bitsandbytes' create_dynamic_map tables, as torch computes them, for kbit's tests.

bitsandbytes builds the table from torch.linspace on the CPU, so its last bits depend on how torch
evaluates linspace (docs/behaviour.md §1.6). This records every (signed, max_exponent_bits,
total_bits) that bitsandbytes accepts, plus the ones it rejects, from the torch and bitsandbytes
installed in the running interpreter. Needs torch and bitsandbytes, which kbit itself never needs:
run it from a throwaway environment, e.g.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch bitsandbytes numpy
    /tmp/torchvenv/bin/python scripts/golden/gen_dynamic_map.py

Refuses to record under torch's DEFAULT (non-vectorised) CPU kernels, whose linspace rounds twice:
the golden is the table a bitsandbytes user on an AVX2 or AVX-512 machine gets.
Writes tests/golden/dynamic_map.bin (256 float32 per case) and tests/golden/dynamic_map.json (index).
"""

import bitsandbytes
import bitsandbytes.functional as bnbf
import numpy as np
import torch

from golden_blob import GOLDEN_DIR, Blob, torch_capability


def main():
    capability = torch_capability("gen_dynamic_map.py")
    blob = Blob()
    cases, rejected = [], []
    for signed in (True, False):
        for total_bits in range(2, 9):
            for max_exponent_bits in range(1, total_bits):
                params = {"signed": signed, "max_exponent_bits": max_exponent_bits, "total_bits": total_bits}
                try:
                    table = bnbf.create_dynamic_map(signed, max_exponent_bits, total_bits)
                except AssertionError:  # bitsandbytes' own check that the table has 2^total_bits entries
                    rejected.append(params)
                    continue
                table = table.detach().cpu().numpy()
                assert table.dtype == np.float32 and table.shape == (256,), params
                cases.append({**params, "code": blob.put(table)})
    index = {
        "source": f"bitsandbytes {bitsandbytes.__version__} functional.create_dynamic_map, torch {torch.__version__} "
                  f"(CPU capability {capability})",
        "generator": "scripts/golden/gen_dynamic_map.py",
        "layout": "code: 256 float32 (little-endian) at offset/bytes into dynamic_map.bin",
        "cases": cases,
        "rejected": rejected,
    }
    blob.save(GOLDEN_DIR, "dynamic_map.bin", "dynamic_map.json", index)
    print(f"wrote {len(cases)} tables ({len(rejected)} parameter sets rejected by bitsandbytes) to {GOLDEN_DIR}")


if __name__ == "__main__":
    main()
