#!/usr/bin/env python3
"""Cost of the Python layer over the C ABI (bench/notes/2026-11-30-python-layer.md): the per-call
overhead of kbit.functional, of a raw ctypes call with argtypes (kbit.load) and without (bitsandbytes'
style), and of cffi, on a tiny tensor; and the share of the Python layer in a large quantize / dequantize.

Usage: KBIT_LIBRARY_DIR=build/lib PYTHONPATH=python .venv/bin/python bench/bench_python.py [--repeat N]
Prints CSV: case,microseconds_per_call (median of N rounds)."""
import argparse
import ctypes as ct
import statistics
import time

import numpy as np

import kbit


def per_call_us(fn, calls, repeat):
    rounds = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    lib = kbit.load("cpu")
    raw = ct.CDLL(lib.path)  # no argtypes, as bitsandbytes
    rows = []
    for n, calls in ((64, 5000), (4096 * 4096, 3)):
        w = np.random.default_rng(0).standard_normal(n).astype(np.float16)
        packed, state = kbit.quantize_4bit(w, quant_type="nf4")
        out = np.empty(n, np.float16)
        absmax = state.absmax
        args_c = (None, packed.ctypes.data, absmax.ctypes.data, out.ctypes.data, 64, n, None)
        args_bnb = (None, ct.c_void_p(packed.ctypes.data), ct.c_void_p(absmax.ctypes.data), ct.c_void_p(out.ctypes.data),
                    ct.c_int32(64), ct.c_int32(n), None)
        cases = {
            "functional dequantize_4bit": lambda: kbit.dequantize_4bit(packed, state, out=out),
            "kbit.load ctypes (argtypes)": lambda: lib.cdequantize_blockwise_fp16_nf4(*args_c),
            "kbit.load checked": lambda: lib.checked.cdequantize_blockwise_fp16_nf4(*args_c),
            "CDLL without argtypes (bitsandbytes style)": lambda: raw.cdequantize_blockwise_fp16_nf4(*args_bnb),
        }
        try:
            import cffi
            ffi = cffi.FFI()
            ffi.cdef(kbit.cdef())
            cl = ffi.dlopen(lib.path)
            cargs = (ffi.NULL, ffi.cast("unsigned char*", packed.ctypes.data), ffi.cast("float*", absmax.ctypes.data),
                     ffi.cast("kbit_half*", out.ctypes.data), 64, n, ffi.NULL)
            cases["cffi ABI mode"] = lambda: cl.cdequantize_blockwise_fp16_nf4(*cargs)
        except ImportError:
            pass
        for name, fn in cases.items():
            rows.append((f"{name} n={n}", per_call_us(fn, calls, args.repeat)))
    print("case,us_per_call")
    for name, us in rows:
        print(f"{name},{us:.2f}")


if __name__ == "__main__":
    main()
