#!/usr/bin/env python3
"""ctest cli.quantize_without_proc: `kbit quantize` where /proc is not mounted (a bare chroot or
container), so the file being written cannot be an unnamed O_TMPFILE file (libkbit_io links one in
through /proc/self/fd) and is the named PATH.kbit-tmp-XXXXXX instead:

  - the output is byte for byte the one written with /proc, and nothing else is left;
  - a write failing part way exits 1 and removes the named temporary file;
  - a run killed part way leaves exactly that named file (where /proc exists it leaves nothing:
    cli.quantize), which shows the named path was the one taken.

/proc is hidden by mounting a tmpfs over it in a private mount namespace (unshare); where this
process may not create one the test reports skipped (exit 77).
Usage: test_without_proc.py PATH/TO/kbit"""
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "io"))
import kbit.checkpoint as ckpt  # noqa: E402
from check_report import Checks  # noqa: E402

KBIT = sys.argv[1]
HIDE_PROC = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
             'mount -t tmpfs kbit-no-proc /proc && exec "$@"', "sh"]

try:
    probe = subprocess.run([*HIDE_PROC, "test", "!", "-e", "/proc/self"], capture_output=True, text=True)
except FileNotFoundError:
    probe = None
if probe is None or probe.returncode != 0:
    print("cli.quantize_without_proc: skipped (cannot hide /proc in a mount namespace here: "
          f"{'no unshare' if probe is None else probe.stderr.strip() or probe.returncode})")
    sys.exit(77)

check = Checks("cli.quantize_without_proc")
tmp = Path(tempfile.mkdtemp(prefix="kbit-cli-noproc-"))
rng = np.random.default_rng(5)
src = tmp / "model.safetensors"
ckpt.save(src, {"model.layers.0.mlp.up_proj.weight": rng.standard_normal((512, 128)).astype(np.float32),
                "model.layers.0.mlp.down_proj.weight": rng.standard_normal((128, 512)).astype(np.float32),
                "model.norm.weight": np.ones(128, np.float32)})


def leftovers():
    return sorted(p.name for p in tmp.iterdir() if ".kbit-" in p.name)


def kbit(out, *extra, hide_proc=True, preexec_fn=None):
    cmd = [KBIT, "quantize", str(src), str(out), "--nf4", "--quiet", *extra]
    return subprocess.run([*HIDE_PROC, *cmd] if hide_proc else cmd, capture_output=True, text=True,
                          preexec_fn=preexec_fn)


def fsize_limit(ignore_sigxfsz):
    def set_limit():
        if ignore_sigxfsz:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    return set_limit


for extra in ([], ["--double-quant"]):
    label = " ".join(["--nf4", *extra])
    with_proc = kbit(tmp / "with.safetensors", *extra, hide_proc=False)
    without = kbit(tmp / "without.safetensors", *extra)
    check(with_proc.returncode == 0 and without.returncode == 0, f"{label}: both runs succeed; got "
          f"{with_proc.returncode} {with_proc.stderr!r}, {without.returncode} {without.stderr!r}")
    check(without.returncode == 0 and
          (tmp / "with.safetensors").read_bytes() == (tmp / "without.safetensors").read_bytes(),
          f"{label}: the same bytes without /proc")
    check(not leftovers(), f"{label}: nothing else left; got {leftovers()}")

    failed = kbit(tmp / "failed.safetensors", *extra, preexec_fn=fsize_limit(True))
    check(failed.returncode == 1 and "cannot write: File too large" in failed.stderr and
          not (tmp / "failed.safetensors").exists() and not leftovers(),
          f"{label}: a write failing part way: exit 1, message, nothing left; got {failed.returncode} "
          f"{failed.stderr!r} {leftovers()}")

    killed = kbit(tmp / "killed.safetensors", *extra, preexec_fn=fsize_limit(False))
    left = leftovers()
    check(killed.returncode == -signal.SIGXFSZ and not (tmp / "killed.safetensors").exists() and
          len(left) == 1 and left[0].startswith("killed.safetensors.kbit-tmp-"),
          f"{label}: killed part way, the named temporary file is what is left; got {killed.returncode} {left}")
    for name in left:
        os.unlink(tmp / name)

check.finish(tmp, "named temporary files without /proc")
