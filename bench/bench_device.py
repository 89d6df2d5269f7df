#!/usr/bin/env python3
"""Kernels of any kbit backend on its own device memory (kbit.DeviceArray), beside kbit's CPU backend
on host memory, for backends that the C++ benchmarks (bench/harness.cpp: host memory, CPU backend)
cannot drive, such as the OpenCL backend (docs/vendor-backend.md). Each kernel's traffic (bytes read
plus bytes written) per second is reported as a share of the same backend's device-to-device copy
(kbit_memcpy) moving as many bytes, measured in the same process: the limit the backend's memory
allows its kernels. The CPU backend's rows on host memory give times only (its kernels against the
machine's limit: bench/RESULTS.md).

Usage: KBIT_LIBRARY_DIR=build/lib PYTHONPATH=python .venv/bin/python bench/bench_device.py \
           --backend build-opencl/vendor/libkbit_opencl.so [--compare cpu] [--rounds 5] [--quick]
Prints CSV: backend,kernel,dtype,shape,ms,GBps,copy_GBps,pct_of_copy (median of the rounds)."""
import argparse
import os
import ctypes as ct
import statistics
import time

import ml_dtypes
import numpy as np

import kbit
from kbit import DeviceArray

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
NF4_CODE = 2  # bitsandbytes' quant_type of NF4 in cgemm_4bit


class Memory:
    """Arrays on one backend: DeviceArrays, or numpy arrays for the CPU backend (its memory is the host's)."""

    def __init__(self, lib, host):
        self.lib, self.host = lib, host
        self.keep = []

    def put(self, arr):
        d = arr if self.host else DeviceArray.from_numpy(self.lib, arr)
        self.keep.append(d)
        return d

    def empty(self, shape, dtype):
        return self.put(np.zeros(shape, dtype=dtype))

    def ptr(self, a):
        return ct.c_void_p(a.ctypes.data if self.host else a.ptr)

    def sync(self):
        self.lib.checked.kbit_stream_synchronize(None)


def median_ms(mem, call, rounds):
    call()
    mem.sync()  # the first call builds the backend's kernels (OpenCL: once per process)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        call()
        mem.sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def copy_gbps(mem, nbytes, rounds):
    """The backend's device-to-device copy of nbytes, as read + write bytes per second."""
    src, dst = mem.empty(nbytes, np.uint8), mem.empty(nbytes, np.uint8)
    ms = median_ms(mem, lambda: mem.lib.checked.kbit_memcpy(mem.ptr(dst), mem.ptr(src), nbytes, 3), rounds)
    mem.keep = [a for a in mem.keep if a is not src and a is not dst]
    return 2 * nbytes / ms / 1e6


def cases(mem, quick):
    """(kernel, dtype, shape, call, bytes moved)."""
    n = 1 << (22 if quick else 24)
    bs = 64
    rng = np.random.default_rng(0)
    lib = mem.lib
    out = []
    for dt_name, dt in DTYPES.items():
        x = mem.put(rng.standard_normal(n).astype(np.float32).astype(dt))
        absmax = mem.empty(n // bs, np.float32)
        packed = mem.empty(n // 2, np.uint8)
        deq = mem.empty(n, dt)
        size = np.dtype(dt).itemsize
        q = getattr(lib.checked, f"cquantize_blockwise_{dt_name}_nf4")
        d = getattr(lib.checked, f"cdequantize_blockwise_{dt_name}_nf4")
        out.append(("quantize_4bit_nf4", dt_name, f"n={n}",
                    lambda q=q, x=x, a=absmax, p=packed: q(None, mem.ptr(x), mem.ptr(a), mem.ptr(p), bs, n),
                    n * size + n // 2 + 4 * (n // bs)))
        out.append(("dequantize_4bit_nf4", dt_name, f"n={n}",
                    lambda d=d, a=absmax, p=packed, y=deq: d(None, mem.ptr(p), mem.ptr(a), mem.ptr(y), bs, n, None),
                    n // 2 + 4 * (n // bs) + n * size))
    rows, k = (1024, 4096) if quick else (4096, 14336)
    table = np.array(kbit.functional.get_4bit_type("nf4") if hasattr(kbit.functional, "get_4bit_type") else [], np.float32)
    if table.size == 16:
        for dt_name, dt in DTYPES.items():
            a = mem.put(rng.standard_normal(k).astype(np.float32).astype(dt))
            w = mem.put(rng.integers(0, 256, rows * k // 2, dtype=np.uint8))
            scales = mem.put(rng.random(rows * k // bs).astype(np.float32))
            lut = mem.put(table)
            y = mem.empty(rows, dt)
            g = getattr(lib.checked, f"cgemm_4bit_inference_naive_{dt_name}")
            out.append(("gemv_4bit_nf4", dt_name, f"N={rows} K={k}",
                        lambda g=g, a=a, w=w, s=scales, t=lut, y=y: g(rows, 1, k, mem.ptr(a), mem.ptr(w), mem.ptr(s),
                                                                     mem.ptr(t), mem.ptr(y), k, k // 2, rows, bs, None),
                        rows * k // 2 + 4 * rows * k // bs + k * np.dtype(dt).itemsize))
    return out


def run(spec, host, rounds, quick):
    lib = kbit.load(os.path.abspath(spec) if "/" in spec else spec)
    mem = Memory(lib, host)
    for kernel, dt, shape, call, nbytes in cases(mem, quick):
        ms = median_ms(mem, call, rounds)
        gbps = nbytes / ms / 1e6
        if host:
            # numpy's one-thread copy is no limit for the CPU backend's threads: its kernels against the
            # machine's limit are bench/harness.cpp's job (bench/RESULTS.md); here only its times.
            print(f"{lib.name},{kernel},{dt},{shape},{ms:.3f},{gbps:.2f},,", flush=True)
            continue
        limit = copy_gbps(mem, nbytes // 2, rounds)  # a copy with the kernel's traffic (read + write)
        print(f"{lib.name},{kernel},{dt},{shape},{ms:.3f},{gbps:.2f},{limit:.2f},{100 * gbps / limit:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="opencl", help="backend name or .so path (its device memory)")
    ap.add_argument("--compare", default="cpu", help="backend run on host memory beside it ('' for none)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print("backend,kernel,dtype,shape,ms,GBps,copy_GBps,pct_of_copy")
    run(args.backend, False, args.rounds, args.quick)
    if args.compare:
        run(args.compare, True, args.rounds, args.quick)


if __name__ == "__main__":
    main()
