#!/usr/bin/env python3
"""Roofline charts of kbit_bench results: for every row of a CSV (kbit_bench's output or
bench/best_of.py's), the kernel's GB/s as a bar and its limit (the roofline of the same run) as a
mark above it, kbit and bitsandbytes side by side (and, where the bench has one, a kernel moving
the same traffic with no work), one PNG per suite.

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -r bench/requirements.txt
    .venv-bench/bin/python bench/plot.py results.csv --out bench/plots --title "AMD EPYC (Zen 4), AVX-512"

A suite is the kernel family: 4-bit (quantize/dequantize/gemv/gemm), 8-bit blockwise, optimizers.
"""
import argparse
import csv
import os
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SUITES = OrderedDict([
    ("4bit", ("quantize_nf4", "quantize_fp4", "dequantize_nf4", "dequantize_fp4", "gemv_nf4", "gemm_nf4")),
    ("8bit", ("quantize_blockwise_8bit", "dequantize_blockwise_8bit")),
    ("optim8", ("adam32", "adam8", "ademamix8", "momentum8", "rmsprop8", "lion8", "adagrad8")),
])


def suite_of(kernel):
    for name, prefixes in SUITES.items():
        if kernel.startswith(prefixes):
            return name
    return None


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = next(r for r in rows if r and r[0] == "kernel")
    out = []
    for r in rows:
        if r and r[0] != "kernel" and len(r) >= len(header):
            out.append(dict(zip(header, r)))
    return out


def plot_suite(name, rows, out_dir, title):
    labels = [f"{r['kernel']} {r['dtype']} {r['shape']} t{r['threads']}" for r in rows]
    gbs = [float(r["gbs"]) for r in rows]
    limit = [float(r["limit_gbs"]) for r in rows]
    # Green: kbit; orange: bitsandbytes; grey: the same traffic with no work (what memory alone allows).
    colours = ["#d95f02" if "bitsandbytes" in r["note"] else "#999999" if r["note"].startswith("no work")
               else "#1b9e77" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.32 * len(rows) + 2), 5.5))
    xs = range(len(rows))
    ax.bar(xs, gbs, color=colours)
    ax.scatter(xs, limit, marker="_", s=240, color="black", zorder=3, label="limit (roofline of the same run)")
    for x, g, lim in zip(xs, gbs, limit):
        ax.text(x, g, f"{100 * g / lim:.0f}%", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=75, ha="right", fontsize=6)
    ax.set_ylabel("GB/s of the kernel's own traffic")
    ax.set_title(f"{name}: kbit (green), bitsandbytes (orange) and no work (grey) against their limits — {title}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path = os.path.join(out_dir, f"roofline_{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--out", default="bench/plots")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    rows = [r for path in args.csv for r in read_rows(path)]
    os.makedirs(args.out, exist_ok=True)
    for name in SUITES:
        mine = [r for r in rows if suite_of(r["kernel"]) == name]
        if mine:
            print(plot_suite(name, mine, args.out, args.title))


if __name__ == "__main__":
    main()
