#!/usr/bin/env python3
"""Runs a kbit_bench command several times and keeps, for each row (kernel, dtype, shape, threads,
note), the run with the highest % of the triad probe, adding the range over the runs. On the shared
VM a run's ratios drop whenever another guest takes the host's cores mid-row; the best run is the
least disturbed one, and the range shows how much the others lost.

    bench/best_of.py 3 build/bin/kbit_bench --suite 8bit --threads 1,2 --rounds 5 > best.csv
"""
import csv
import io
import subprocess
import sys


def main():
    runs, cmd = int(sys.argv[1]), sys.argv[2:]
    best, spread, order, header = {}, {}, [], None
    for _ in range(runs):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        for row in csv.reader(io.StringIO(out)):
            if not row or row[0] in ("kernel",) or len(row) < 12:
                header = header or (row if row and row[0] == "kernel" else None)
                continue
            key = (row[0], row[1], row[2], row[3], row[11])
            triad = float(row[10])
            if key not in best:
                order.append(key)
            if key not in best or triad > float(best[key][10]):
                best[key] = row
            lo, hi = spread.get(key, (triad, triad))
            spread[key] = (min(lo, triad), max(hi, triad))
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow((header or []) + ["pct_of_triad_min", "pct_of_triad_max"])
    for key in order:
        w.writerow(best[key] + [f"{spread[key][0]:.1f}", f"{spread[key][1]:.1f}"])


if __name__ == "__main__":
    main()
