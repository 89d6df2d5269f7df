#!/usr/bin/env python3
"""ctest cli.quantize: `kbit quantize` / `kbit dequantize` on a small synthetic model (numpy, no torch).

  - every output shard equals, byte for byte, the file the Python package writes for the same model
    (kbit.functional.quantize_4bit / int8_vectorwise_quant of the float16 copy, kbit.checkpoint.tensors_4bit
    / tensors_int8 / save), for nf4 and fp4 with and without --double-quant, fp32/fp16/bf16 inputs,
    blocksizes 64 and 128, int8, a single file and a sharded directory;
  - the index (weight_map, total_size), config.json's quantization_config and the copied files;
  - read back by the C API: every layer libkbit_io.so describes in the output (its weight, scales,
    maps, nested offset, blocksize, shape, dtype) equals what the Python package computed; `kbit dequantize` (libkbit_io.so's reader + the CPU backend) gives exactly
    the bytes of kbit.functional.dequantize_4bit (int8: CB * SCB / 127 in float32), and every value is
    within the format's bound of the original weight;
  - failures: a bad input file, an unwritable output, a write failing part way, an existing output
    directory, an already quantized input, unknown options: the documented exit status, a message, and
    no output or temporary file.
Usage: test_quantize.py PATH/TO/kbit PATH/TO/libkbit_io.so"""
import ctypes as C
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

import kbit.checkpoint as ckpt
from kbit.functional import dequantize_4bit, get_4bit_type, int8_vectorwise_quant, quantize_4bit

KBIT = sys.argv[1]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "io"))
from kbit_io_ctypes import SUCCESS, P, Quant, load, raw  # noqa: E402
from check_report import Checks  # noqa: E402

io = load(sys.argv[2])
check = Checks("cli.quantize")


def run(*args):
    p = subprocess.run([KBIT, *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
rng = np.random.default_rng(11)
H, I, V = 64, 96, 50
# module -> shape; which shard it goes to
MODEL = {
    "model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H),
    "model.layers.0.input_layernorm.weight": (H,), "model.layers.0.self_attn.q_proj.weight": (H, H),
    "model.layers.0.self_attn.q_proj.bias": (H,), "model.layers.0.mlp.up_proj.weight": (I, H),
    "model.layers.0.mlp.down_proj.weight": (H, I), "model.layers.1.self_attn.q_proj.weight": (H, H),
    "model.layers.1.mlp.odd.weight": (3, 11), "model.layers.1.mlp.down_proj.weight": (H, I),
    # more than one piece of the command's split (2^18 elements, int8: 261 rows of 1001), the last
    # piece short and ending inside a block
    "model.layers.1.mlp.big.weight": (263, 1001),
    # fused MoE experts (transformers v5, [E, N, K]): 4-bit parameters under their own key; int8 copies them
    "model.layers.0.mlp.experts.gate_up_proj": (4, 48, 64), "model.layers.0.mlp.experts.down_proj": (4, 64, 24),
    "model.layers.1.mlp.experts.router_bias": (4, 3),  # 2-D: not an experts weight, copied
    # the router beside fused experts stays dense by default; a gate without experts beside it is a linear
    "model.layers.0.mlp.gate.weight": (4, H), "model.layers.1.mlp.gate.weight": (4, H),
}
BASE = {k: rng.standard_normal(s).astype(np.float32) * 0.3 for k, s in MODEL.items()}
BASE["model.layers.1.mlp.down_proj.weight"][0, :40] = 0.0  # a zero block
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "model_type": "llama", "rms_norm_eps": 1e-05,
          "torch_dtype": "bfloat16", "vocab_size": V, "name": "caf\u00e9"}
SHARD = lambda k: "model-00001-of-00002.safetensors" if ".layers.1." not in k else "model-00002-of-00002.safetensors"
DEFAULT_SKIP = ("lm_head", "embed", "norm")


def is_experts(name, shape):
    """A fused-experts parameter: 3-D, named *.experts.NAME (NAME not "weight")."""
    parts = name.split(".")
    return len(shape) == 3 and len(parts) >= 2 and parts[-2] == "experts" and parts[-1] != "weight"


def stem(name, shape):
    """The prefix of a quantized tensor's layer: its module, or an experts parameter's own key."""
    return name if is_experts(name, shape) else name[:-len(".weight")]


def quantized(name, shape, skip=(), fmt="nf4"):
    module = stem(name, shape)
    if is_experts(name, shape):
        if fmt == "int8":
            return False
    elif not name.endswith(".weight") or len(shape) != 2:
        return False
    if any(s in module for s in DEFAULT_SKIP):
        return False
    if module.endswith(".gate") and any(is_experts(k, v) and k.startswith(module[:-len("gate")] + "experts.")
                                        for k, v in MODEL.items()):
        return False  # the router of a fused-experts block
    return not any(module == s or f".{s}." in f".{module}." for s in skip)


def make_model(d, dtype, sharded=True):
    d.mkdir(parents=True)
    t = {k: v.astype(DTYPES[dtype]) for k, v in BASE.items()}
    if not sharded:
        ckpt.save(d / "model.safetensors", t)
        return t
    shards = {}
    for k, v in t.items():
        shards.setdefault(SHARD(k), {})[k] = v
    for f, part in shards.items():
        ckpt.save(d / f, part)
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(v.nbytes for v in t.values())}, "weight_map": {k: SHARD(k) for k in t}}))
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "tokenizer.json").write_text('{"version": "1.0"}')
    return t


def python_quantize(t, fmt, blocksize, nested, skip=()):
    """The checkpoint entries the Python package writes for dense tensors t."""
    out = {}
    for k, v in t.items():
        if not quantized(k, v.shape, skip, fmt):
            out[k] = v
            continue
        p = stem(k, v.shape)
        if fmt == "int8":
            cb, scb, _ = int8_vectorwise_quant(v.astype(np.float16))
            out.update(ckpt.tensors_int8(p, cb, scb))
        else:
            packed, state = quantize_4bit(v, blocksize=blocksize, compress_statistics=nested, quant_type=fmt)
            out.update(ckpt.tensors_4bit(p, packed, state, parameter=is_experts(k, v.shape)))
    return out


def owner(k, dense):
    """The dense tensor an output key comes from."""
    return k if k in dense else next(d for d in dense if k.startswith(stem(d, dense[d].shape) + "."))


def no_leftovers(d):
    return [p.name for p in Path(d).iterdir() if ".kbit-" in p.name]


def bound_4bit(orig, absmax_restored, fmt, blocksize, dtype):
    """Largest |orig - dequantized| the format allows per element: half the largest gap of the code
    table times the block's scale, plus one rounding of the output dtype, plus (nested) the error of
    the restored scale itself (|absmax - restored| times the largest |code| = 1)."""
    code = np.sort(get_4bit_type(fmt).astype(np.float64))
    half_gap = np.max(np.diff(code)) / 2
    flat = orig.astype(np.float64).reshape(-1)
    blocks = np.arange(flat.size) // blocksize
    true_absmax = np.maximum.reduceat(np.abs(flat), np.arange(0, flat.size, blocksize))
    a = np.maximum(true_absmax, absmax_restored)[blocks]
    eps = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}[dtype]
    return a * half_gap * (1 + 1e-6) + np.abs(true_absmax - absmax_restored)[blocks] + a * eps + 1e-30


tmp = Path(tempfile.mkdtemp(prefix="kbit-cli-quantize-"))
case = 0
for dtype in ("fp32", "bf16", "fp16"):
    src = tmp / f"dense-{dtype}"
    dense = make_model(src, dtype)
    runs = [("nf4", 64, False), ("nf4", 64, True), ("fp4", 128, False), ("fp4", 64, True), ("int8", 0, False)]
    for fmt, bs, nested in runs:
        case += 1
        out = tmp / f"q{case}"
        args = ["quantize", src, out, f"--{fmt}"] + (["--blocksize", bs] if bs and bs != 64 else []) + \
            (["--double-quant"] if nested else []) + (["--compute-dtype", "fp16"] if fmt != "int8" else [])
        rc, so, se = run(*args)
        label = f"{dtype} {fmt} bs{bs} nested={nested}"
        check(rc == 0, f"{label}: exit 0, got {rc}: {se}")
        if rc != 0:
            continue
        # Not a tty: one plain line per tensor, then the summary.
        lines = se.strip().split("\n")
        check(len(lines) == len(MODEL) + 1 and lines[0].startswith(f"kbit quantize 1/{len(MODEL)} ") and
              lines[-1].startswith(f"kbit quantize: wrote {out}"), f"{label}: progress lines {lines[:2]}")
        expected = python_quantize(dense, fmt, bs or 64, nested)
        shards = {}
        for k, v in expected.items():
            shards.setdefault(SHARD(owner(k, dense)), {})[k] = v
        for f, part in shards.items():
            ckpt.save(tmp / "expected.safetensors", part)
            check((out / f).read_bytes() == (tmp / "expected.safetensors").read_bytes(),
                  f"{label}: {f} equals the Python package's file byte for byte")
        idx = json.loads((out / "model.safetensors.index.json").read_text())
        check(idx["weight_map"] == {k: SHARD(owner(k, dense)) for k in expected}, f"{label}: index weight_map")
        check(idx["metadata"]["total_size"] == sum(v.nbytes for v in expected.values()), f"{label}: total_size")
        check((out / "model.safetensors.index.json").read_text() == json.dumps(idx, indent=2, sort_keys=True) + "\n",
              f"{label}: index written as transformers writes it")
        cfg_text = (out / "config.json").read_text()
        cfg = json.loads(cfg_text)
        check(cfg_text == json.dumps(cfg, indent=2, sort_keys=True) + "\n", f"{label}: config.json format")
        qc = cfg.pop("quantization_config", None)
        check(cfg == CONFIG, f"{label}: the rest of config.json kept")
        four = fmt != "int8"
        # (int8: BitsAndBytesConfig's 4-bit defaults)
        check(qc == {"_load_in_4bit": four, "_load_in_8bit": not four,
                     "bnb_4bit_compute_dtype": "float16" if four else "float32",
                     "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "fp4" if fmt == "int8" else fmt,
                     "bnb_4bit_use_double_quant": nested, "llm_int8_enable_fp32_cpu_offload": False,
                     "llm_int8_has_fp16_weight": False, "llm_int8_skip_modules": None, "llm_int8_threshold": 6.0,
                     "load_in_4bit": four, "load_in_8bit": not four, "quant_method": "bitsandbytes"},
              f"{label}: quantization_config {qc}")
        check((out / "tokenizer.json").read_text() == '{"version": "1.0"}', f"{label}: other files copied")
        check(not no_leftovers(tmp), f"{label}: no temporary files")

        # Every layer as libkbit_io describes it, field by field against the Python package's arrays.
        ck = P()
        check(io.kbit_io_open(str(out).encode(), C.byref(ck)) == SUCCESS, f"{label}: kbit_io_open")
        prefixes = ckpt.quantized_prefixes(expected)
        check(io.kbit_io_quant_count(ck) == len(prefixes["4bit"] + prefixes["int8"]) > 0, f"{label}: layer count")
        for p in prefixes["4bit"] + prefixes["int8"]:
            q = C.POINTER(Quant)()
            if io.kbit_io_quant_find(ck, p.encode(), C.byref(q)) != SUCCESS:
                check(False, f"{label}: {p} described")
                continue
            q = q.contents
            if fmt == "int8":
                cb, scb = ckpt.load_int8(expected, p)
                check(q.format == 2 and raw(q.weight, q.weight_bytes) == cb.tobytes() and
                      raw(q.scb, 4 * cb.shape[0]) == scb.tobytes() and [q.shape[0], q.shape[1]] == list(cb.shape),
                      f"{label}: {p} int8 fields")
                continue
            packed, state = ckpt.load_4bit(expected, p)
            experts = is_experts(p, state.shape)
            ok = (q.parameter == experts and q.experts == (state.shape[0] if experts else 0) and
                  q.format == (0 if fmt == "nf4" else 1) and q.blocksize == state.blocksize and
                  [q.shape[i] for i in range(q.ndim)] == list(state.shape) and
                  q.dtype_name.decode() == state.dtype.name and q.nested == state.nested and
                  raw(q.weight, q.weight_bytes) == packed.tobytes() and
                  raw(q.absmax, q.absmax_bytes) == state.absmax.tobytes() and
                  raw(q.quant_map, 64) == state.code.tobytes())
            if state.nested:
                ok = ok and (raw(q.nested_absmax, 4 * q.nested_blocks) == state.state2.absmax.tobytes() and
                             raw(q.nested_quant_map, 1024) == state.state2.code.tobytes() and
                             np.float32(q.nested_offset).tobytes() == np.float32(state.offset).tobytes() and
                             q.nested_blocksize == state.state2.blocksize)
            check(ok, f"{label}: {p} every field as the Python package computed it")
        io.kbit_io_close(ck)

        # Read back through the C API: dequantize, exact against Python, and within the format's bound.
        back = tmp / f"d{case}"
        rc, so, se = run("dequantize", back.parent / out.name, back, "--quiet")
        check(rc == 0 and se == "", f"{label}: dequantize exit 0 and quiet, got {rc} {se!r}")
        if rc != 0:
            continue
        got = {}
        for f in sorted(back.glob("*.safetensors")):
            got.update(ckpt.load(f))
        check(sorted(got) == sorted(dense), f"{label}: dequantized tensor names")
        check("quantization_config" not in json.loads((back / "config.json").read_text()), f"{label}: config cleaned")
        for k, orig in dense.items():
            if not quantized(k, orig.shape, fmt=fmt):
                check(got[k].dtype == orig.dtype and got[k].tobytes() == orig.tobytes(), f"{label}: {k} copied")
                continue
            p = stem(k, orig.shape)
            if fmt == "int8":
                cb, scb = ckpt.load_int8(expected, p)
                want = ((cb.astype(np.float32) * scb[:, None]) * np.float32(7.874015718698502e-3)).astype(np.float16)
                check(got[k].dtype == np.float16 and got[k].tobytes() == want.tobytes(), f"{label}: {k} int8 exact")
                err = np.abs(got[k].astype(np.float64) - orig.astype(np.float64))
                lim = scb[:, None].astype(np.float64) / 127 / 2 * (1 + 1e-5) + np.abs(orig.astype(np.float64)) * 2.0**-10
                check(np.all(err <= lim), f"{label}: {k} int8 within half a step (max excess {np.max(err - lim)})")
                continue
            packed, state = ckpt.load_4bit(expected, p)
            want = dequantize_4bit(packed, state)
            check(got[k].dtype == orig.dtype and got[k].shape == orig.shape and got[k].tobytes() == want.tobytes(),
                  f"{label}: {k} dequantized exactly as the Python package")
            if state.nested:
                from kbit.functional import dequantize_blockwise
                restored = (dequantize_blockwise(state.absmax, state.state2).astype(np.float64) + float(state.offset))
            else:
                restored = state.absmax.astype(np.float64)
            err = np.abs(got[k].astype(np.float64) - orig.astype(np.float64)).reshape(-1)
            check(np.all(err <= bound_4bit(orig, restored, fmt, state.blocksize, dtype)),
                  f"{label}: {k} within the {fmt} bound")

# -- the index file as IN stands for its directory
rc, so, se = run("quantize", tmp / "dense-fp32" / "model.safetensors.index.json", tmp / "via-index", "--nf4", "--quiet")
check(rc == 0 and (tmp / "via-index" / "model-00002-of-00002.safetensors").read_bytes() ==
      (tmp / "q1" / "model-00002-of-00002.safetensors").read_bytes(), f"IN as the index file; got {rc} {se!r}")

# -- a valid file whose float tensors are not aligned (a 3-byte tensor first): quantized from a copy
import struct  # noqa: E402
odd = {"a.note": np.arange(3, dtype=np.uint8), "a.proj.weight": BASE["model.layers.0.mlp.up_proj.weight"],
       "a.bias": BASE["model.norm.weight"].astype(ml_dtypes.bfloat16)}
header, data = {}, b""
for k in ("a.note", "a.proj.weight", "a.bias"):
    b = odd[k].tobytes()
    header[k] = {"dtype": {"uint8": "U8", "float32": "F32", "bfloat16": "BF16"}[odd[k].dtype.name],
                 "shape": list(odd[k].shape), "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
(tmp / "odd.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + data)
rc, so, se = run("quantize", tmp / "odd.safetensors", tmp / "odd-q.safetensors", "--fp4", "--double-quant", "--quiet")
ckpt.save(tmp / "expected.safetensors", python_quantize(ckpt.load(tmp / "odd.safetensors"), "fp4", 64, True))
check(rc == 0 and (tmp / "odd-q.safetensors").read_bytes() == (tmp / "expected.safetensors").read_bytes(),
      f"misaligned input: same bytes as Python; got {rc} {se!r}")

# -- a single file, --skip, default dtype of dequantize and --dtype
src = tmp / "single"
dense = make_model(src, "bf16", sharded=False)
out = tmp / "single-q.safetensors"
rc, so, se = run("quantize", src / "model.safetensors", out, "--nf4", "--skip", "mlp.down_proj", "--quiet")
check(rc == 0 and se == "" and so == "", f"single file --quiet: exit 0 and silent, got {rc} {se!r}")
expected = python_quantize(dense, "nf4", 64, False, skip=("mlp.down_proj",))
ckpt.save(tmp / "expected.safetensors", expected)
check(out.read_bytes() == (tmp / "expected.safetensors").read_bytes(), "single file with --skip: same bytes as Python")
check("model.layers.0.mlp.down_proj.weight" in expected and "model.layers.0.mlp.down_proj.weight.absmax" not in expected,
      "--skip kept down_proj dense")
# A directory with one model.safetensors (no index): the same file inside a new directory.
rc, so, se = run("quantize", src, tmp / "single-dir", "--nf4", "--skip", "mlp.down_proj", "--quiet")
check(rc == 0 and sorted(p.name for p in (tmp / "single-dir").iterdir()) == ["model.safetensors"] and
      (tmp / "single-dir" / "model.safetensors").read_bytes() == out.read_bytes(), f"directory without index; got {rc} {se!r}")
rc, so, se = run("dequantize", out, tmp / "single-d.safetensors", "--dtype", "fp32", "--quiet")
got = ckpt.load(tmp / "single-d.safetensors") if rc == 0 else {}
check(rc == 0 and got["model.layers.0.self_attn.q_proj.weight"].dtype == np.float32, "--dtype fp32")
rc, so, se = run("inspect", out, "--json")
j = json.loads(so) if rc == 0 else {}
check(rc == 0 and [q["prefix"] for q in j["quantized"]] == sorted(
    stem(k, dense[k].shape) for k in dense if quantized(k, dense[k].shape, ("mlp.down_proj",))),
    "kbit inspect reads the output")
check(rc == 0 and [(q["experts"], q["shape"]) for q in j["quantized"] if q.get("parameter")] ==
      [(4, [4, 64, 24]), (4, [4, 48, 64])], "kbit inspect: the experts parameters with E, N, K")
# A skip pattern matches an experts parameter by its key (a dotted run of it, or a glob).
for pat in ("experts", "*.experts.gate_up_proj", "mlp.experts.gate_up_proj"):
    rc, so, se = run("quantize", src / "model.safetensors", tmp / "skip-x.safetensors", "--fp4", "--skip", pat, "--quiet")
    t = ckpt.load(tmp / "skip-x.safetensors") if rc == 0 else {}
    gate = "model.layers.0.mlp.experts.gate_up_proj"
    check(rc == 0 and t[gate].dtype == ml_dtypes.bfloat16 and gate + ".absmax" not in t and
          (pat == "experts") == ("model.layers.0.mlp.experts.down_proj.absmax" not in t), f"--skip {pat} and experts")

# -- failures: status, message, nothing written
def fails(args, code, message, outp):
    rc, so, se = run(*args)
    parent = Path(outp).parent if Path(outp).parent.is_dir() else tmp
    check(rc == code and message in se and not Path(outp).exists() and not no_leftovers(parent),
          f"{args[:1]} {message!r}: exit {code}, message, no output; got {rc} {se!r}")


garbage = tmp / "garbage.safetensors"
garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
fails(["quantize", garbage, tmp / "o1.safetensors", "--nf4"], 1, "the header is not valid JSON", tmp / "o1.safetensors")
fails(["dequantize", garbage, tmp / "o2.safetensors"], 1, "the header is not valid JSON", tmp / "o2.safetensors")
fails(["quantize", tmp / "missing.safetensors", tmp / "o3.safetensors", "--fp4"], 1, "cannot open", tmp / "o3.safetensors")
fails(["quantize", src / "model.safetensors", garbage / "o4.safetensors", "--nf4"], 1, "cannot create a file beside it",
      garbage / "o4.safetensors")
fails(["quantize", tmp / "dense-fp32", garbage / "o5", "--nf4"], 1, "cannot create a directory beside it", garbage / "o5")
fails(["quantize", out, tmp / "o6.safetensors", "--nf4"], 1, "already holds", tmp / "o6.safetensors")
# A write that fails part way (a file-size limit: pwrite gets EFBIG), in each way of writing: declared
# (--nf4, kbit dequantize), through the scratch file (--double-quant); with OMP_NUM_THREADS=2 the
# failure comes from the thread that writes while the next tensor is computed, with 1 from the only
# thread. Nothing may be left behind.
def limited_fsize():
    import resource
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))


for threads in ("1", "2"):
    for args in (["quantize", src / "model.safetensors", tmp / "o10.safetensors", "--nf4"],
                 ["quantize", src / "model.safetensors", tmp / "o10.safetensors", "--nf4", "--double-quant"],
                 ["dequantize", out, tmp / "o10.safetensors"]):
        p = subprocess.run([KBIT, *map(str, args)], capture_output=True, text=True, preexec_fn=limited_fsize,
                           env=dict(os.environ, OMP_NUM_THREADS=threads))
        check(p.returncode == 1 and "cannot write: File too large" in p.stderr and
              not (tmp / "o10.safetensors").exists() and not no_leftovers(tmp),
              f"{args[0]} {args[3:]}, {threads} threads, a write failing part way: exit 1, message, nothing left; "
              f"got {p.returncode} {p.stderr!r}")
# Killed part way (the same limit with SIGXFSZ's default action, as SIGKILL or the OOM killer would):
# the file being written has no name until it is complete, so nothing is left.
def killed_by_fsize():
    import resource
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))


for args in (["quantize", src / "model.safetensors", tmp / "o11.safetensors", "--nf4"],
             ["quantize", src / "model.safetensors", tmp / "o11.safetensors", "--nf4", "--double-quant"],
             ["dequantize", out, tmp / "o11.safetensors"]):
    p = subprocess.run([KBIT, *map(str, args)], capture_output=True, text=True, preexec_fn=killed_by_fsize)
    check(p.returncode == -signal.SIGXFSZ and not (tmp / "o11.safetensors").exists() and not no_leftovers(tmp),
          f"{args[0]} {args[3:]} killed by a signal part way: nothing left (with /proc mounted); got {p.returncode} {no_leftovers(tmp)}")
(tmp / "exists").mkdir()
rc, so, se = run("quantize", tmp / "dense-fp32", tmp / "exists", "--nf4")
check(rc == 1 and "already exists" in se and not list((tmp / "exists").iterdir()) and not no_leftovers(tmp),
      f"existing output directory: exit 1; got {rc} {se!r}")
for args, msg in ((["--bogus"], "unknown option '--bogus'"), ([], "one of --nf4, --fp4, --int8 is required"),
                  (["--nf4", "--fp4"], "exclude each other"), (["--nf4", "--blocksize", "48"], "--blocksize 48"),
                  (["--int8", "--double-quant"], "are for --nf4"), (["--int8", "--blocksize", "64"], "are for --nf4"),
                  (["--int8", "--compute-dtype", "bf16"], "are for --nf4"), (["--nf4", "--compute-dtype", "int4"], "--compute-dtype int4")):
    fails(["quantize", src / "model.safetensors", tmp / "o7.safetensors", *args], 2, msg, tmp / "o7.safetensors")
fails(["dequantize", out, tmp / "o8.safetensors", "--dtype", "f8"], 2, "--dtype f8", tmp / "o8.safetensors")
fails(["dequantize", out], 2, "IN and OUT are required", tmp / "o9")
for cmd in ("quantize", "dequantize"):
    rc, so, se = run(cmd, "--help")
    check(rc == 0 and so.startswith(f"usage: kbit {cmd} IN OUT"), f"{cmd} --help")
rc, so, se = run("help")
check("  quantize " in so and "  dequantize " in so, "kbit help lists quantize and dequantize")

check.finish(tmp, f"{case} conversions")
