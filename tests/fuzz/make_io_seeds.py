#!/usr/bin/env python3
"""Writes the checked-in seed corpus of fuzz_io (tests/fuzz/corpus/fuzz_io/): small safetensors files
in the bitsandbytes layout (docs/behaviour.md §11) with made-up contents (numpy only, no kbit library):
a plain NF4 layer with a bias, the same with its absmax and quant_map at deeper keys (which
QuantState.from_dict accepts), a nested FP4 layer, an LLM.int8 layer, plain tensors with metadata, and an
empty file; the fuzzer mutates headers, JSON fields and sizes from there.
    tests/fuzz/make_io_seeds.py         (rewrites tests/fuzz/corpus/fuzz_io)
"""
import json
import shutil
import struct
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "corpus" / "fuzz_io"
DT = {"f4": "F32", "f2": "F16", "u1": "U8", "i1": "I8", "i8": "I64"}


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name in sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k)):
        b = tensors[name].tobytes()
        header[name] = {"dtype": DT[tensors[name].dtype.str[1:]], "shape": list(tensors[name].shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def qs(fields):
    return np.frombuffer(json.dumps(fields).encode(), dtype=np.uint8).copy()


def four(prefix, quant_type, shape, blocksize, nested):
    n = int(np.prod(shape))
    blocks = -(-n // blocksize)
    w = f"{prefix}.weight"
    t = {w: np.arange((n + 1) // 2, dtype=np.uint8).reshape(-1, 1),
         f"{w}.quant_map": np.linspace(-1, 1, 16, dtype=np.float32)}
    fields = {"quant_type": quant_type, "blocksize": blocksize, "dtype": "float16", "shape": list(shape)}
    if nested:
        t[f"{w}.absmax"] = np.arange(blocks, dtype=np.uint8)
        t[f"{w}.nested_absmax"] = np.ones(-(-blocks // 256), np.float32)
        t[f"{w}.nested_quant_map"] = np.linspace(-1, 1, 256, dtype=np.float32)
        fields.update(nested_blocksize=256, nested_dtype="float32", nested_offset=0.125)
    else:
        t[f"{w}.absmax"] = np.ones(blocks, np.float32)
    t[f"{w}.quant_state.bitsandbytes__{quant_type}"] = qs(fields)
    return t


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    nf4 = four("a", "nf4", (4, 16), 32, False)
    nf4["a.bias"] = np.zeros(4, np.float32)
    deep = {k.replace("a.weight.", "a.weight.deep.") if k in ("a.weight.absmax", "a.weight.quant_map") else k: v
            for k, v in nf4.items()}
    seeds = {
        "nf4": nf4,
        "nf4_deep_keys": deep,
        "fp4_nested": four("b", "fp4", (3, 7), 64, True),
        "int8": {"c.weight": np.arange(12, dtype=np.int8).reshape(3, 4), "c.SCB": np.ones(3, np.float32),
                 "c.weight_format": np.array(0, np.uint8)},
        "plain": {"x": np.arange(3, dtype=np.float16), "y": np.array(7, np.int64), "z": np.zeros((0, 2), np.float32)},
    }
    for name, t in seeds.items():
        (OUT / name).write_bytes(safetensors(t, {"format": "pt"} if name == "plain" else None))
    (OUT / "empty").write_bytes(struct.pack("<Q", 8) + b"{}      ")


if __name__ == "__main__":
    main()
