#!/usr/bin/env python3
"""Records bitsandbytes' quantization-table builders for kbit's tests: create_linear_map,
create_normal_map, create_fp8_map and get_4bit_type, each for every argument combination kbit's
tests check, as bitsandbytes 0.50.2 computes them under the torch (and scipy, for the normal map) of
the running interpreter. Needs torch, scipy and bitsandbytes, which kbit never needs: run it from
the throwaway environment of scripts/test-bitsandbytes, e.g.

    build/bnb-suite/venv/bin/python scripts/golden/gen_tables.py

Calls that bitsandbytes refuses are recorded with the exception's type, so kbit's tests check that
kbit refuses them too. Like gen_dynamic_map.py it refuses torch's DEFAULT (non-vectorised) CPU
kernels, whose linspace rounds differently. Writes tests/golden/tables.bin (float32 arrays) and
tests/golden/tables.json (index).
"""
import bitsandbytes
import bitsandbytes.functional as bnbf
import numpy as np
import scipy
import torch

from golden_blob import Blob, torch_capability

NORMAL_OFFSETS = (0.9677083, 0.99, 0.8, 0.6)


def calls():
    """(function name, keyword arguments) of every recorded call."""
    for signed in (True, False):
        for total_bits in range(1, 9):
            for add_zero in (True, False):
                yield "create_linear_map", {"signed": signed, "total_bits": total_bits, "add_zero": add_zero}
    for offset in NORMAL_OFFSETS:
        for use_extra_value in (True, False):
            yield "create_normal_map", {"offset": offset, "use_extra_value": use_extra_value}
    for signed in (True, False):
        for total_bits in range(2, 9):
            for exponent_bits in range(1, total_bits + 1):
                precision_bits = total_bits - int(signed) - exponent_bits
                if precision_bits >= 0:
                    yield "create_fp8_map", {"signed": signed, "exponent_bits": exponent_bits,
                                             "precision_bits": precision_bits, "total_bits": total_bits}
    for typename in ("nf4", "fp4", "int4", "af4"):
        yield "get_4bit_type", {"typename": typename, "device": "cpu"}
    yield "get_4bit_type", {"typename": "af4", "device": "cpu", "blocksize": 128}
    yield "get_4bit_type", {"typename": "nf3", "device": "cpu"}


def main():
    capability = torch_capability("gen_tables.py")
    blob = Blob()
    cases = []
    for name, kwargs in calls():
        case = {"function": name, "kwargs": kwargs}
        try:
            table = getattr(bnbf, name)(**kwargs)
        except Exception as e:  # noqa: BLE001 - the refusal is what is recorded
            case["error"] = type(e).__name__
        else:
            case["values"] = blob.put(table.to(torch.float32).contiguous().numpy().astype("<f4"))
        cases.append(case)
    source = (f"bitsandbytes {bitsandbytes.__version__} functional, torch {torch.__version__} (CPU capability "
              f"{capability}), scipy {scipy.__version__}, numpy {np.__version__}")
    blob.save_cases("tables", source, "scripts/golden/gen_tables.py",
                    "values: float32 (little-endian) at offset/bytes into tables.bin (256 for the maps, 16 for "
                    "get_4bit_type); error: the exception type bitsandbytes raised", cases)


if __name__ == "__main__":
    main()
