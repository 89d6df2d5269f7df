#!/usr/bin/env python3
"""Records golden vectors of bitsandbytes' CPU 4-bit dequantizer for the kbit conformance suite.

Opens libbitsandbytes_cpu.so from the bitsandbytes wheel in .venv with ctypes (no torch, no import
of bitsandbytes) and calls cdequantize_blockwise_cpu_{nf4,fp4}_{fp32,bf16,fp16}(A, absmax, out,
blocksize, m, n) on random packed bytes and on scales that exercise every rounding case. Column
counts are never multiples of 16, so every build of the library (with or without its AVX-512 path)
takes the scalar path, whose blocks run over the flattened m*n elements as kbit's do.

Writes tests/golden/bnb_4bit.bin (raw little-endian arrays) and tests/golden/bnb_4bit.json (index).
Usage: .venv/bin/python scripts/golden/gen_4bit.py [--lib PATH]
"""
import argparse
import ctypes

import numpy as np

from golden_blob import Blob, bnb_cpu_library

DTYPES = {"fp32": np.float32, "fp16": np.uint16, "bf16": np.uint16}  # 16-bit outputs kept as raw bits
SHAPES = [(1, 2056), (3, 1000), (1, 1001), (7, 63), (1, 1)]
BLOCKSIZES = [32, 64, 128, 256, 512, 1024, 2048, 4096]
SPECIAL_SCALES = [0.0, -0.0, np.inf, -np.inf, np.nan, 70000.0, 65504.0, 1e-5, 3e-39, 1e-40, 1e30,
                  -2.5, 2.0 ** -14, 2.0 ** -24, 3.4028235e38, 1.0, 0.1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=None)
    args = ap.parse_args()
    path = args.lib or bnb_cpu_library()
    if not path:
        raise SystemExit("libbitsandbytes_cpu.so not found under .venv (pip install bitsandbytes --no-deps)")
    lib = ctypes.CDLL(path)
    rng = np.random.default_rng(20260801)
    blob = Blob()
    cases = []

    for quant in ("nf4", "fp4"):
        for dt, np_t in DTYPES.items():
            fn = getattr(lib, f"cdequantize_blockwise_cpu_{quant}_{dt}")
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                           ctypes.c_longlong, ctypes.c_longlong]
            for bs in BLOCKSIZES:
                for (m, n) in SHAPES:
                    total = m * n
                    blocks = (total + bs - 1) // bs
                    packed = rng.integers(0, 256, size=(total + 1) // 2, dtype=np.uint8)
                    scales = rng.uniform(0.0, 2.0, size=blocks).astype(np.float32)
                    k = min(blocks, len(SPECIAL_SCALES))
                    start = int(rng.integers(0, len(SPECIAL_SCALES)))
                    for i in range(k):
                        scales[i] = np.float32(SPECIAL_SCALES[(start + i) % len(SPECIAL_SCALES)])
                    out = np.zeros(total, dtype=np_t)
                    fn(packed.ctypes.data, scales.ctypes.data, out.ctypes.data, bs, m, n)
                    cases.append({"quant_type": quant, "dtype": dt, "blocksize": bs, "m": m, "n": n,
                                  "packed": blob.put(packed), "absmax": blob.put(scales), "out": blob.put(out)})

    blob.save_cases("bnb_4bit",
                    source="bitsandbytes 0.50.2 libbitsandbytes_cpu.so, cdequantize_blockwise_cpu_<quant>_<dtype>",
                    generator="scripts/golden/gen_4bit.py",
                    layout="offsets/bytes into bnb_4bit.bin; packed uint8, absmax float32, out float32 or raw uint16 "
                           "bits",
                    cases=cases)


if __name__ == "__main__":
    main()
