#!/usr/bin/env python3
"""`kbit quantize` of a 1 GiB bf16 checkpoint beside bitsandbytes' own CPU quantization of the same
tensors, and as a share of the machine's bandwidth for the conversion's traffic.

    bench/bench_convert.py --kbit build/bin/kbit --bench build/bin/kbit_bench \\
        [--bnb-python /path/to/venv-with-torch-and-bitsandbytes/bin/python] [--gib 1] [--runs 3]

The checkpoint is synthetic (layers of 4096x4096 bf16 weights, normal values) and written once to a
temporary directory; `kbit quantize --nf4` runs on it `--runs` times with the input in the page cache
(best time kept). The limit: the conversion reads every input byte and writes every output byte, so
its time is at least read / read_rate + written / write_rate, with the rates of kbit_bench's probes
at the same thread count (the best of three runs, just after). bitsandbytes: `bitsandbytes.functional.quantize_4bit`
(nf4, blocksize 64) on each CPU tensor in turn, the same tensors loaded by torch, no file output.
Prints one CSV line per measurement, with the user and system CPU seconds of kbit's best run (where
the time goes: the kernels and OpenMP's waits, the kernel's page-cache copies).
"""
import argparse
import csv
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import kbit.checkpoint as ckpt  # noqa: E402

ROWS = COLS = 4096
BNB_SCRIPT = r"""
import sys, time, torch
from safetensors.torch import load_file
import bitsandbytes.functional as F
tensors = [t for name, t in load_file(sys.argv[1]).items() if name.endswith(".weight")]
best = float("inf")
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    for t in tensors:
        F.quantize_4bit(t, blocksize=64, quant_type="nf4")
    best = min(best, time.perf_counter() - t0)
print(best)
"""


def probes(bench, threads, runs=3):
    """read and write GB/s of kbit_bench's probes, from a short row with a read and a write stream: the
    highest of `runs` runs of it, because one run on a shared host can come out well below what the
    memory does (a low probe makes a low limit, and the conversion's share of it look high)."""
    best_read = best_write = 0.0
    for _ in range(runs):
        out = subprocess.run([bench, "--suite", "4bit", "--filter", "dequantize_nf4 bf16 64M", "--threads",
                              str(threads), "--rounds", "3"], check=True, capture_output=True, text=True).stdout
        rows = [r for r in csv.DictReader(io.StringIO(out)) if r.get("kernel") == "dequantize_nf4" and not r["note"]]
        if not rows:
            sys.exit(f"bench_convert: no probe row in kbit_bench output:\n{out}")
        best_read = max(best_read, float(rows[0]["read_gbs"]))
        best_write = max(best_write, float(rows[0]["write_gbs"]))
    return best_read, best_write


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kbit", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--bnb-python")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    layers = max(1, round(args.gib * 2**30 / (ROWS * COLS * 2)))
    tmp = Path(tempfile.mkdtemp(prefix="kbit-convert-"))
    try:
        src, dst = tmp / "in.safetensors", tmp / "out.safetensors"
        rng = np.random.default_rng(1)
        tensors = {f"model.layers.{i}.mlp.proj.weight":
                   (rng.standard_normal((ROWS, COLS), dtype=np.float32) * 0.02).astype(ml_dtypes.bfloat16)
                   for i in range(layers)}
        ckpt.save(str(src), tensors, {"format": "pt"})
        del tensors
        read = src.stat().st_size
        print("what,threads,seconds,gib_in,read_gb,write_gb,gbs,limit_seconds,pct_of_limit,ratio_to_bitsandbytes,"
              "user_s,sys_s")
        bnb = None
        if args.bnb_python:
            r = subprocess.run([args.bnb_python, "-c", BNB_SCRIPT, str(src), str(args.runs)], capture_output=True,
                               text=True)
            if r.returncode == 0:
                bnb = float(r.stdout.strip().splitlines()[-1])
                print(f"bitsandbytes quantize_4bit,{os.cpu_count()},{bnb:.3f},{read / 2**30:.2f},,,,,,,,")
            else:
                print(f"note: bitsandbytes not measured: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        for threads in (1, 2):
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            best, cpu = float("inf"), (0.0, 0.0)
            for _ in range(args.runs):
                if dst.exists():
                    dst.unlink()
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run([args.kbit, "quantize", str(src), str(dst), "--nf4", "--quiet"], check=True, env=env)
                t = time.perf_counter() - t0
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                if t < best:  # the CPU time of the best run: user (kernels, OpenMP waits), system (page cache)
                    best, cpu = t, (r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime)
            written = dst.stat().st_size
            read_gbs, write_gbs = probes(args.bench, threads)
            limit = read / (read_gbs * 1e9) + written / (write_gbs * 1e9)
            ratio = f"{bnb / best:.1f}" if bnb else ""
            print(f"kbit quantize --nf4,{threads},{best:.3f},{read / 2**30:.2f},{read / 1e9:.3f},{written / 1e9:.3f},"
                  f"{(read + written) / best / 1e9:.2f},{limit:.3f},{100 * limit / best:.1f},{ratio},"
                  f"{cpu[0]:.3f},{cpu[1]:.3f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
