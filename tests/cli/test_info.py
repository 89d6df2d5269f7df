#!/usr/bin/env python3
"""ctest cli.info: `kbit info` (text and --json) in the build tree and with the loader test kit's
fake backends on KBIT_BACKEND_PATH; exit statuses of the `kbit` command.
Usage: test_info.py PATH/TO/kbit FAKES_DIR"""
import json
import os
import re
import subprocess
import sys

KBIT, FAKES = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("KBIT_")}
    e.update(env)
    p = subprocess.run([KBIT, *args], capture_output=True, text=True, env=e)
    return p.returncode, p.stdout, p.stderr


# The build tree as is: the CPU backend beside libkbit.so is usable and the default unless a
# higher-scoring backend (a CUDA device) is present.
rc, out, _ = run("info")
check(rc == 0, f"kbit info exits 0, got {rc}")
check(re.search(r"^kbit \d+\.\d+\.\d+$", out, re.M), "first line names the release")
check(re.search(r"^loader: +/\S+/libkbit\.so \(loader API 1\.\d+\)$", out, re.M), "loader line")
check(re.search(r"^interfaces: +core 1\.\d+, 4bit 1\.\d+, 8bit 1\.\d+, optim8 1\.\d+$", out, re.M), "interfaces line")
check(re.search(r"^  KBIT_BACKEND +\(none\)$", out, re.M), "KBIT_BACKEND unset")
check(re.search(r"^  cpu(  \[default\])?\n    file: +/\S+/libkbit_cpu\.so\n    found in: +loader directory\n"
                r"    status: +usable, probe score 10\n", out, re.M), "cpu candidate block")
check(re.search(r"^    info: +.*kernels: (ref|avx2|avx512|avx512vbmi)", out, re.M), "cpu info names its kernels")
check(re.search(r"^default: (cpu|cuda) \(/\S+\), probe score \d+, the highest of \d+ usable candidates?$", out, re.M),
      "default line")

# Fakes first on the search path (JSON).
rc, out, _ = run("info", "--json", KBIT_BACKEND_PATH=FAKES)
info = json.loads(out)
check(rc == 0, "json exit 0")
check(info["search"][0] == {"source": "KBIT_BACKEND_PATH", "entry": FAKES}, "search starts with KBIT_BACKEND_PATH")
check(info["search"][-1]["source"] == "loader directory", "search ends with the loader directory")
by_name = {c["name"]: c for c in info["candidates"]}
good = by_name["good"]
check(good["verdict"] == "usable" and good["score"] == 5 and good["stage"] == "probed", "good is usable, score 5")
check(good["interfaces"]["4bit"] == {"state": "accepted", "version": "1.3", "missing": 0, "newer": 0, "message": ""},
      "good 4bit record")
check(good["info"] == "fake backend good for the loader tests", "good info from kbit_backend_info()")
probe0 = by_name["probe0"]
check(probe0["verdict"] == "rejected" and probe0["score"] == 0, "probe0 rejected with score 0")
check(probe0["reason"] == f"{FAKES}/libkbit_probe0.so: kbit_backend_probe() returned 0: the backend cannot run on "
      "this machine (it says: fake backend probe0 for the loader tests)", "probe0 reason")
check(by_name["notelf"]["stage"] == "found" and by_name["notelf"]["reason"].endswith(": not an ELF file"), "notelf")
check(by_name["major2"]["interfaces"]["4bit"]["state"] == "rejected", "major2 4bit rejected")
check(by_name["missingfn"]["interfaces"]["4bit"]["missing"] == 2, "missingfn counts its missing functions")
usable = [c for c in info["candidates"] if c["verdict"] == "usable"]
best = max(c["score"] for c in usable)
check(info["default"] == next(c["name"] for c in usable if c["score"] == best), "default = first of the highest score")
check(sum(c["default"] for c in info["candidates"]) == 1, "exactly one candidate marked default")

# --isolate (each candidate validated in a child process) reports the same records.
rc, out, _ = run("info", "--json", "--isolate", KBIT_BACKEND_PATH=FAKES)
check(rc == 0 and json.loads(out) == info, "--isolate gives the same report")

# Text mode shows reasons and per-interface messages of the same candidates.
rc, out, _ = run("info", KBIT_BACKEND_PATH=FAKES)
check(f"    reason:      {FAKES}/libkbit_probe0.so: kbit_backend_probe() returned 0" in out, "text reason")
check("    4bit:        2 functions of 4bit 1.3 missing (now stubs): cdequantize_blockwise_fp32_nf4, "
      "kbit_dequantize_4bit\n" in out, "text interface message")
check(f"  KBIT_BACKEND_PATH   {FAKES}\n" in out, "text search entry")

# KBIT_BACKEND that cannot be used: no default, exit 1.
rc, out, _ = run("info", KBIT_BACKEND="probe0", KBIT_BACKEND_PATH=FAKES)
check(rc == 1, f"no default -> exit 1, got {rc}")
check(out.rstrip().endswith(f"no default backend: KBIT_BACKEND=probe0: {FAKES}/libkbit_probe0.so: "
                            "kbit_backend_probe() returned 0: the backend cannot run on this machine (it says: fake backend probe0 for the loader tests)"), "summary")

# The command itself.
rc, out, _ = run("--version")
check(rc == 0 and re.fullmatch(r"kbit \d+\.\d+\.\d+ \(loader API 1\.\d+\)\n", out), "--version")
rc, out, _ = run("help")
check(rc == 0 and re.search(r"^  info +show the loader", out, re.M), "help lists info")
rc, _, err = run("frobnicate")
check(rc == 2 and err.startswith("kbit: unknown command 'frobnicate'"), "unknown command -> 2")
rc, _, err = run("info", "--bogus")
check(rc == 2 and err == "usage: kbit info [--json] [--isolate[=SECONDS]]\n", "bad option -> 2")
rc, _, err = run("info", "--isolate=0")
check(rc == 2, "--isolate=0 -> 2")
rc, _, _ = run()
check(rc == 2, "no command -> 2")

if failures:
    print("FAILED:", *failures, sep="\n  ")
    sys.exit(1)
print("kbit info: all checks passed")
