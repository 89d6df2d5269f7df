#!/usr/bin/env python3
"""Records golden vectors of blockwise 8-bit dequantization from bitsandbytes' CPU library.

bitsandbytes' cdequantize_blockwise_cpu_{fp32,bf16,fp16}(code, A, absmax, out, blocksize, n) computes
out[i] = RN_T(code[A[i]] * absmax[i / blocksize]) exactly (docs/behaviour.md §6), so its outputs are
golden vectors for every kbit backend's cdequantize_blockwise_*. Its quantizer is approximate (a
65536-bin lookup table) and is not recorded here; quantizers are compared with kbit's reference.

Writes tests/golden/8bit_dequant.bin (little-endian arrays, concatenated) and tests/golden/8bit_index.json
(one entry per case with byte offsets). Run from the repository root:

    .venv/bin/python scripts/golden/gen_8bit.py [--lib path/to/libbitsandbytes_cpu.so]

fp16 rounding: the 0.50.2 x86-64 wheel converts with vcvtps2ph (round to nearest even) in
dequantizeBlockwise8bitCpu<fp16_t>, not with the portable ties-away-from-zero fallback that
bitsandbytes' source also has. The "fp16-ties" case puts many products exactly halfway between two fp16 values
(normal and subnormal) and the script checks them against round-to-nearest-even, so a library that
rounded ties away from zero would be reported here instead of being recorded.
"""

import argparse
import ctypes
import hashlib
import os
import sys

import ml_dtypes
import numpy as np

from golden_blob import GOLDEN_DIR, Blob, bnb_cpu_library

BLOCKSIZES = [32, 64, 128, 256, 512, 1024, 2048, 4096]
DTYPES = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16}


def dynamic_map(signed):
    """create_dynamic_map(signed, 7, 8) with linspace rounded twice (torch's DEFAULT CPU kernels; bitsandbytes under
    torch 2.15 on AVX2 rounds once, docs/behaviour.md §1.6). Only an input here: recorded with its outputs."""
    data = []
    for d in range(7):
        F = (2 ** d + 1) if signed else (2 ** (d + 1) + 1)
        h = np.float32((np.float32(1.0) - np.float32(0.1)) / np.float32(F - 1))
        b = [np.float32(0.1) + h * np.float32(i) if i < F // 2 else np.float32(1.0) - h * np.float32(F - 1 - i)
             for i in range(F)]
        scale = np.float32(10.0 ** (d - 6))
        for i in range(F - 1):
            mean = np.float32((np.float32(b[i]) + np.float32(b[i + 1])) / np.float32(2.0))
            data.append(np.float32(scale * mean))
            if signed:
                data.append(np.float32(-(scale * mean)))
    data += [np.float32(0.0), np.float32(1.0)]
    return np.sort(np.array(data, dtype=np.float32))


def linear_map():
    """create_linear_map(signed=True, total_bits=8, add_zero=True): 255 linspace values plus one 0.0."""
    F = 255
    h = np.float32(np.float32(2.0) / np.float32(F - 1))
    v = [np.float32(-1.0) + h * np.float32(i) if i < F // 2 else np.float32(1.0) - h * np.float32(F - 1 - i)
         for i in range(F)]
    v.insert(127, np.float32(0.0))
    return np.array(v, dtype=np.float32)


def tie_map():
    """Entries whose products with absmax 1.0 lie exactly halfway between fp16 (and bf16) neighbours."""
    k = np.arange(128, dtype=np.float32)
    normal = (np.float32(1.0) + (np.float32(2.0) * k + np.float32(1.0)) * np.float32(2.0 ** -11))  # fp16 ties in [1, 2)
    tiny = (np.float32(2.0) * k[:64] + np.float32(1.0)) * np.float32(2.0 ** -25)  # fp16 subnormal ties
    vals = np.concatenate([-normal[:64], -tiny[:32], tiny[:32], normal[:64], normal[64:128]])
    return np.sort(vals.astype(np.float32))[:256]


def absmax_values(blocks, rng):
    a = np.abs(rng.standard_normal(blocks).astype(np.float32)) * np.float32(3.0)
    specials = [np.float32(0.0), np.float32(1.0), np.float32(1e-40), np.float32(6.0e4), np.float32(0.5)]
    for i in range(min(blocks, len(specials))):
        a[i] = specials[i]
    return a


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib", default=bnb_cpu_library())
    parser.add_argument("--out", default=GOLDEN_DIR)
    args = parser.parse_args()
    if not args.lib:
        sys.exit("gen_8bit.py: bitsandbytes' libbitsandbytes_cpu.so not found (pass --lib)")
    lib = ctypes.CDLL(args.lib)
    fns = {}
    for name in DTYPES:
        fn = getattr(lib, "cdequantize_blockwise_cpu_" + name)
        fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_longlong, ctypes.c_longlong]
        fn.restype = None
        fns[name] = fn

    rng = np.random.default_rng(20260821)
    blob = Blob()

    def put(arr):
        return blob.put(arr)["offset"]

    tables = {"dynamic-signed": dynamic_map(True), "dynamic-unsigned": dynamic_map(False), "linear": linear_map(),
              "fp16-ties": tie_map()}
    cases = []
    for table_name, code in tables.items():
        assert code.shape == (256,) and np.all(np.diff(code) >= 0), table_name
        code_off = put(code)
        for B in BLOCKSIZES if table_name != "fp16-ties" else [256]:
            n = B + B // 2 + 17 if table_name != "fp16-ties" else 256 * 8
            blocks = (n + B - 1) // B
            A = rng.integers(0, 256, n, dtype=np.uint8)
            A[: min(n, 256)] = np.arange(min(n, 256), dtype=np.uint8)  # every code at least once
            absmax = absmax_values(blocks, rng) if table_name != "fp16-ties" else np.ones(blocks, np.float32)
            a_off, m_off = put(A), put(absmax)
            for dtype_name, dtype in DTYPES.items():
                out = np.zeros(n, dtype=dtype)
                fns[dtype_name](code.ctypes.data, A.ctypes.data, absmax.ctypes.data, out.ctypes.data, B, n)
                expected = (code[A] * absmax[np.arange(n) // B]).astype(np.float32).astype(dtype)  # numpy: RN
                mismatch = int(np.count_nonzero(out.view(np.uint8) != expected.view(np.uint8))
                               if dtype_name == "fp32" else
                               np.count_nonzero(out.view(np.uint16) != expected.view(np.uint16)))
                if mismatch:
                    sys.exit(f"gen_8bit.py: {table_name} {dtype_name} blocksize {B}: {mismatch} outputs differ from "
                             f"round-to-nearest-even; record the rounding rule before using this library")
                ties = 0
                if dtype_name == "fp16":
                    prod = (code[A] * absmax[np.arange(n) // B]).astype(np.float32)
                    ties = int(np.count_nonzero(np.abs(prod - expected.astype(np.float32)) ==
                                                np.abs(np.spacing(expected)).astype(np.float32) / 2))
                    if table_name == "fp16-ties" and ties < n // 2:
                        sys.exit("gen_8bit.py: the fp16-ties case lost its ties")
                cases.append({"name": f"{table_name} {dtype_name} blocksize {B}", "table": table_name,
                              "dtype": dtype_name, "blocksize": B, "n": n, "code": code_off, "A": a_off,
                              "absmax": m_off, "out": put(out)})
                if dtype_name == "fp16":
                    cases[-1]["fp16_ties"] = ties

    with open(args.lib, "rb") as f:
        lib_sha = hashlib.sha256(f.read()).hexdigest()
    index = {
        "description": "bitsandbytes cdequantize_blockwise_cpu_{fp32,bf16,fp16} outputs; offsets are bytes into "
                       "8bit_dequant.bin (code: 256 float32, A: n uint8, absmax: ceil(n/blocksize) float32, "
                       "out: n elements of dtype, little-endian)",
        "generator": "scripts/golden/gen_8bit.py",
        "bitsandbytes_library": os.path.basename(args.lib),
        "bitsandbytes_library_sha256": lib_sha,
        "fp16_rounding": "round to nearest even (vcvtps2ph); checked on the fp16-ties case",
        "file": "8bit_dequant.bin",
        "bytes": len(blob.data),
        "cases": cases,
    }
    blob.save(args.out, "8bit_dequant.bin", "8bit_index.json", index)
    print(f"wrote {len(cases)} cases, {len(blob.data)} bytes to {args.out}")


if __name__ == "__main__":
    main()
