#!/usr/bin/env python3
"""Instructions per element of the CPU kernels, counted under qemu-user, as CSV rows.

Emulation says nothing about time, but it executes exactly the instructions a CPU would, so it can
count them: the same kernels on x86-64 (qemu-x86_64 runs AVX2, not AVX-512) and on AArch64 (NEON,
SVE, SVE2). For each kernel of kbit_insn_count (bench/insn_count.c) and each level, the program runs
twice under `qemu-<arch> -singlestep -d exec,nochain` (one log line per executed instruction) with
`-dfilter` keeping the log to the CPU backend's code (libkbit_cpu.so: the kernels, their thread
driver and argument checks; not the C library, libgomp or the loader), once with 1 call and once with
1 + EXTRA calls; the difference over EXTRA calls' elements (65536 per call) is the kernel's
instructions per element. One thread (OMP_NUM_THREADS=1).

    bench/insn_per_element.py --build build --arch x86_64 >> out.csv
    bench/insn_per_element.py --build build-aarch64 --arch aarch64 >> out.csv

Columns: date,arch,level,qemu_cpu,vector_bits,kernel,element,instructions_per_element. The tables in
RESULTS.md are generated from such a CSV (results_tables.py, kind "insn").
"""
import argparse
import csv
import datetime
import os
import subprocess
import sys

# (level, qemu CPU model, vector bits of the level's kernels on that model; qemu-user's max has 512-bit
# SVE unless told otherwise, and SVE2 hardware so far has 128)
LEVELS = {
    "x86_64": [("ref", "max", 0), ("avx2", "max", 256)],
    "aarch64": [("ref", "neoverse-n1", 0), ("neon", "neoverse-n1", 128), ("sve", "a64fx", 512),
                ("sve2", "max,sve-default-vector-length=16", 128)],
}
EXTRA = 2  # calls beyond the first


def code_range(library, base):
    """The -dfilter range of a library's executable segment, loaded at base."""
    for line in subprocess.run(["readelf", "-lW", library], capture_output=True, text=True, check=True).stdout.split("\n"):
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            return f"0x{base + int(f[2], 16):x}+0x{int(f[5], 16):x}"
    sys.exit(f"insn_per_element: no executable segment in {library}")


def run(qemu, cpu, program, args, env, count=None):
    """Runs the program under qemu; with count (a -dfilter range), returns the instructions it
    executed in that range."""
    cmd = [qemu, "-cpu", cpu]
    if count:
        cmd += ["-singlestep", "-d", "exec,nochain", "-dfilter", count, "-D", "/dev/stderr"]
    proc = subprocess.Popen(cmd + [program] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    executed = 0
    tail = b""
    if count:
        # Each executed instruction is one "Trace ..." line; count them as they stream by.
        while True:
            chunk = proc.stderr.read(1 << 20)
            if not chunk:
                break
            executed += (tail + chunk).count(b"\nTrace ")
            tail = chunk[-8:]
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"insn_per_element: {' '.join(cmd + [program] + args)} exited {proc.returncode}: {err.decode()[-500:]}")
    return executed if count else out.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="a build tree holding bin/kbit_insn_count")
    ap.add_argument("--arch", required=True, choices=sorted(LEVELS))
    ap.add_argument("--kernels", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--levels", default="", help="comma-separated subset (default: all of the arch)")
    a = ap.parse_args()

    program = os.path.join(a.build, "bin", "kbit_insn_count")
    qemu = f"qemu-{a.arch}"
    env = dict(os.environ, OMP_NUM_THREADS="1", KBIT_BACKEND="cpu")
    env.pop("QEMU_LD_PREFIX", None)
    kernels = [line.split(",", 2) for line in run(qemu, "max", program, ["--list"], env).split("\n") if line]
    wanted = set(filter(None, a.kernels.split(",")))
    levels = [lv for lv in LEVELS[a.arch] if not a.levels or lv[0] in a.levels.split(",")]
    today = datetime.date.today().isoformat()
    out = csv.writer(sys.stdout, lineterminator="\n")  # quotes a qemu CPU with properties ("max,sve-...")
    out.writerow(["date", "arch", "level", "qemu_cpu", "vector_bits", "kernel", "element", "instructions_per_element"])
    for level, cpu, bits in levels:
        env["KBIT_CPU_ISA"] = level
        info, library, base = run(qemu, cpu, program, ["--info"], env).split("\n")[:3]
        if f"kernels: {level} " not in info:  # the level must be the one that runs, not a lower one
            sys.exit(f"insn_per_element: {level} is not active on qemu -cpu {cpu}: {info}")
        # qemu-user places the libraries at the same addresses in every run of the same program.
        backend = code_range(library, int(base, 16))
        for name, elements, element in kernels:
            if wanted and name not in wanted:
                continue
            once = run(qemu, cpu, program, [name, "1"], env, backend)
            more = run(qemu, cpu, program, [name, str(1 + EXTRA)], env, backend)
            per = (more - once) / (EXTRA * float(elements))
            out.writerow([today, a.arch, level, cpu, bits, name, element, f"{per:.3f}"])
            sys.stdout.flush()


if __name__ == "__main__":
    main()
