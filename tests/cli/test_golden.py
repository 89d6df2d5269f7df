#!/usr/bin/env python3
"""ctest cli.golden: `kbit quantize` against checkpoints that transformers 5 + bitsandbytes 0.50 wrote on the
CPU (tests/golden/checkpoints, recorded once by scripts/golden/gen_checkpoints.py; no torch here). For
each case the dense input is quantized with the matching flags and both files are read with libkbit_io:

  - same tensor names, dtypes and shapes; the plain tensors (embeddings, norms, lm_head) the same bytes;
    config.json's quantization_config the same object;
  - NF4 without nesting and LLM.int8: the whole file the same bytes;
  - every layer's fields (format, blocksize, shape, dtype, nesting) equal; the 4-bit codes equal, for FP4
    up to the sign of zero (kbit stores a small negative weight as code 1000, -0.0, as bitsandbytes' CUDA
    kernel does; bitsandbytes' CPU path picks 0000) and, for bfloat16 FP4, except ties (the scaled weight
    within a bfloat16 rounding of two adjacent codes' midpoint: bitsandbytes' CPU path divides in
    bfloat16); the block absmax equal; nested: the absmax codes equal, the offset and nested_quant_map
    within 2 ulp (torch's float32 mean; its linspace in the signed dynamic map), nested_absmax within the
    offset's difference + 2 ulp (docs/cli.md);
  - LLM.int8: SCB equal, each code within one step (here they are all equal: the file check above).
Usage: test_golden.py PATH/TO/kbit PATH/TO/libkbit_io.so GOLDEN_DIR"""
import ctypes as C
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "io"))
from kbit_io_ctypes import SUCCESS, P, Quant, Tensor, load, raw  # noqa: E402
from check_report import Checks  # noqa: E402

KBIT, GOLDEN = sys.argv[1], Path(sys.argv[3])
io = load(sys.argv[2])
check = Checks("cli.golden")


def ulps(a, b):
    a, b = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    return np.max(np.abs(a - b)) if a.size else 0


def open_ck(path):
    ck = P()
    assert io.kbit_io_open(str(path).encode(), C.byref(ck)) == SUCCESS, io.kbit_io_last_error_message()
    tensors = {}
    for i in range(io.kbit_io_tensor_count(ck)):
        t = C.POINTER(Tensor)()
        io.kbit_io_tensor_at(ck, i, C.byref(t))
        t = t.contents
        tensors[t.name.decode()] = (t.dtype, [t.shape[d] for d in range(t.ndim)], raw(t.data, t.nbytes))
    layers = {}
    for i in range(io.kbit_io_quant_count(ck)):
        q = C.POINTER(Quant)()
        assert io.kbit_io_quant_describe(ck, i, C.byref(q)) == SUCCESS, io.kbit_io_last_error_message()
        layers[q.contents.prefix.decode()] = q.contents
    return ck, tensors, layers


def nibbles(b):
    a = np.frombuffer(b, np.uint8)
    return np.stack([a >> 4, a & 15], axis=1).reshape(-1)


_dense = {}


def dense_weights(dt):
    if dt not in _dense:
        import ml_dtypes  # noqa: F401  (bfloat16 for safetensors.numpy)
        from safetensors.numpy import load_file
        _dense[dt] = load_file(str(GOLDEN / f"dense-{dt}" / "model.safetensors"))
    return _dense[dt]


ties = [0]
if not (GOLDEN / "versions.json").exists():
    print(f"cli.golden: SKIPPED ({GOLDEN} has no recorded checkpoints)")
    sys.exit(0)
tmp = Path(tempfile.mkdtemp(prefix="kbit-cli-golden-"))
cases = sorted(d.name for d in GOLDEN.iterdir() if d.is_dir() and not d.name.startswith("dense-"))
for case in cases:
    fmt, nest, dt = case.split("-") if case.count("-") == 2 else (case.split("-")[0], "plain", case.split("-")[1])
    flags = [f"--{fmt}"] + (["--double-quant"] if nest == "dq" else [])
    golden_cfg = json.loads((GOLDEN / case / "config.json").read_text())["quantization_config"]
    if fmt != "int8":
        flags += ["--compute-dtype", golden_cfg["bnb_4bit_compute_dtype"]]
    out = tmp / case
    p = subprocess.run([KBIT, "quantize", GOLDEN / f"dense-{dt}", out, *flags, "--quiet"], capture_output=True, text=True)
    check(p.returncode == 0, f"{case}: kbit quantize exit 0, got {p.returncode}: {p.stderr}")
    if p.returncode:
        continue
    check(json.loads((out / "config.json").read_text())["quantization_config"] == golden_cfg,
          f"{case}: quantization_config")
    if (fmt == "nf4" and nest == "plain") or fmt == "int8":
        check((out / "model.safetensors").read_bytes() == (GOLDEN / case / "model.safetensors").read_bytes(),
              f"{case}: the same file as transformers + bitsandbytes, byte for byte")
    ck_a, ta, la = open_ck(out)
    ck_g, tg, lg = open_ck(GOLDEN / case)
    check(sorted(ta) == sorted(tg), f"{case}: tensor names")
    check(all(ta[k][:2] == tg[k][:2] for k in tg if k in ta), f"{case}: dtypes and shapes")
    check(sorted(la) == sorted(lg) and len(lg) == 7, f"{case}: the 7 linear layers are the quantized ones")
    layer_keys = {k for k in tg if any(k.startswith(p_ + ".") for p_ in lg)}
    for k in tg:
        if k not in layer_keys:
            check(ta.get(k, (0, 0, b""))[2] == tg[k][2], f"{case}: plain tensor {k} bytes")
    for prefix, g in lg.items():
        a = la.get(prefix)
        if a is None:
            continue
        where = f"{case}: {prefix}"
        check((a.format, a.blocksize, a.ndim, a.numel, a.dtype, a.nested, a.nested_blocksize) ==
              (g.format, g.blocksize, g.ndim, g.numel, g.dtype, g.nested, g.nested_blocksize), f"{where}: fields")
        wa, wg = raw(a.weight, a.weight_bytes), raw(g.weight, g.weight_bytes)
        if fmt == "int8":
            ca, cg = np.frombuffer(wa, np.int8).astype(int), np.frombuffer(wg, np.int8).astype(int)
            check(raw(a.scb, 4 * a.shape[0]) == raw(g.scb, 4 * g.shape[0]), f"{where}: SCB")
            check(np.max(np.abs(ca - cg)) <= 1, f"{where}: int8 codes within one step")
            continue
        na, ng = nibbles(wa), nibbles(wg)
        code = np.frombuffer(raw(g.quant_map, 64), np.float32).astype(np.float64)
        if fmt == "fp4":  # codes 0000 and 1000 are +0.0 and -0.0
            na, ng = np.where(na == 8, 0, na), np.where(ng == 8, 0, ng)
        if fmt == "nf4" or dt == "fp32":
            check(np.array_equal(na, ng), f"{where}: 4-bit codes ({int(np.sum(na != ng))} differ)")
        else:
            # bitsandbytes' CPU path divides a bfloat16 weight by its absmax in bfloat16: a weight whose
            # scaled value lies within a bfloat16 rounding (2^-8 relative) of the midpoint of two adjacent
            # codes may get the other one. Any other difference fails.
            dense = dense_weights(dt)[prefix + ".weight"].astype(np.float64).reshape(-1)
            nb = -(-dense.size // a.blocksize)  # the block absmax, from the dense weight
            scale = np.abs(np.pad(dense, (0, nb * a.blocksize - dense.size))).reshape(nb, -1).max(axis=1)
            order = np.argsort(code)
            rank = np.empty(16, int)
            rank[order] = np.arange(16)
            bad = []
            for i in np.nonzero(na != ng)[0]:
                sv = dense[i] / scale[i // a.blocksize]
                mid = (code[na[i]] + code[ng[i]]) / 2
                if abs(rank[na[i]] - rank[ng[i]]) != 1 or abs(sv - mid) > 2.0**-8 * abs(sv):
                    bad.append(int(i))
            check(not bad, f"{where}: 4-bit codes differ beyond a bfloat16 tie at {bad[:5]}")
            ties[0] += int(np.sum(na != ng))
        check(raw(a.quant_map, 64) == raw(g.quant_map, 64), f"{where}: quant_map")
        if not g.nested:
            check(raw(a.absmax, a.absmax_bytes) == raw(g.absmax, g.absmax_bytes), f"{where}: absmax")
            continue
        check(raw(a.absmax, a.absmax_bytes) == raw(g.absmax, g.absmax_bytes), f"{where}: nested absmax codes")
        fa = lambda x, n: np.frombuffer(raw(x, 4 * n), np.float32)  # noqa: E731
        check(ulps(np.float32(a.nested_offset), np.float32(g.nested_offset)) <= 2, f"{where}: offset within 2 ulp")
        # nested_absmax is the largest |absmax - offset| of its blocks: it inherits the offset's difference.
        da = fa(a.nested_absmax, a.nested_blocks).astype(np.float64)
        dg = fa(g.nested_absmax, g.nested_blocks).astype(np.float64)
        lim = abs(float(a.nested_offset) - float(g.nested_offset)) + 2 * np.spacing(np.maximum(np.abs(da), np.abs(dg)))
        check(np.all(np.abs(da - dg) <= lim), f"{where}: nested_absmax within the offset's difference + 2 ulp")
        check(ulps(fa(a.nested_quant_map, 256), fa(g.nested_quant_map, 256)) <= 2,
              f"{where}: nested_quant_map within 2 ulp")
    io.kbit_io_close(ck_a)
    io.kbit_io_close(ck_g)

check(len(cases) == 10, f"10 recorded cases, found {cases}")
check.finish(tmp, f"{len(cases)} cases; {ties[0]} FP4 bfloat16 ties coded differently")
