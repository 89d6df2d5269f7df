#!/usr/bin/env python3
"""ctest examples.moe_layer: examples/moe_layer.c on tiny Qwen3-MoE-like blocks (numpy + safetensors, no torch).

A block as transformers v5 writes it (E = 8 experts, hidden H = 64, intermediate I = 32):
`model.layers.0.mlp.gate.weight` [E, H], `...mlp.experts.gate_up_proj` [E, 2I, H] (gate rows first),
`...mlp.experts.down_proj` [E, H, I]; quantized with `kbit quantize`, dequantized with `kbit dequantize
--dtype fp32` for the reference, which is computed in float64 from those weights and the example's
input (rebuilt here bit for bit from its hash, input_value()).

Cases: NF4 with a dense bfloat16 router (transformers' layout), FP4 nested with blocksize 32, top_k 3
and a float16 router (the grouped GEMM's nested path, experts without a per-expert slice), and NF4 with
a 4-bit router (from float32), no renormalization and 64 tokens (several tokens per expert). The router
values are bfloat16 values that float16 holds exactly too, so each dtype stores the same router.

Routing: the router's top_k is compared first, token by token (the example prints its choices). The
inputs are chosen so that no choice is within rounding of another: every gap between the top_k-th and
the next logit is at least 100 times the fp32 error bound of the logits.

Bound (u = 2^-24, gamma(m) = m u / (1 - m u)), first order, per stage, from the reference values:
  router   e_l[e]  = gamma(H) * sum_k |Wr[e,k] x[k]| + u |l[e] - max l|      (fp32 dot; the max subtracted)
  weights  d_c     = 2 max_e e_l[e] + (E + top_k + 8) u                      (relative, each combine weight:
           the logit errors enter as exp(2 d), each exp (2 u: < 1 ulp), division and sum once each)
  GEMM     e(z)    = gamma(m + 5) S + u (|z| + gamma(m + 5) S)               (docs/behaviour.md §3.3 with
           m = K terms, S = sum |a w|, plus u S for the reference's weights being fp32-rounded)
  gate_up  e_g, e_u = e(z) over K = H
  act      e_h     = 1.1 e_g (|up| + e_u) + |silu(g)| e_u + 6 u (|silu(g)| + 1.1 e_g)(|up| + e_u)
           (|silu'| <= 1.1; exp, add, divide, multiply each once)
  down     e_y     = sum_i |Wd| e_h + e(z) with S = sum_i |Wd| (|h| + e_h), K = I
  combine  |out - ref| <= sum_j [c_j e_y + d_c c_j (|y| + e_y)] + gamma(top_k + 1) sum_j c_j (1 + d_c)(|y| + e_y)
The bound is also checked to reject plausible mistakes: gate and up swapped, the weights not
renormalized (or renormalized when they should not be), and the k-th choice replaced by the next.

Also: a checkpoint without an MoE block, a wrong prefix, an unquantized block, mismatched shapes, a
truncated and a garbage file, an unwritable --out and usage errors give the documented exit status
and a message, never a signal.

Usage: test_moe_layer.py PATH/TO/kbit PATH/TO/kbit_moe_layer
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "io"))
from check_report import Checks  # noqa: E402

KBIT, EXAMPLE = sys.argv[1], sys.argv[2]
check = Checks("examples.moe_layer")
E, H, I = 8, 64, 32
PREFIX = "model.layers.0.mlp"
U = 2.0 ** -24


def gamma(m):
    return m * U / (1 - m * U)


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def input_value(t, k):
    """examples/moe_layer.c's input_value(), in uint32 arithmetic."""
    h = (t * 0x9E3779B1 + k * 0x85EBCA77 + 0x165667B1) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & 0xFFFFFFFF
    h ^= h >> 12
    return ((h % 2048) - 1024) / 1024.0


def inputs(tokens):
    return np.array([[input_value(t, k) for k in range(H)] for t in range(tokens)], dtype=np.float64)


def logit_errors(router, x):
    logits = x @ router.T
    return logits, gamma(H) * (np.abs(x)[:, None, :] * np.abs(router)[None, :, :]).sum(-1) + \
        U * np.abs(logits - logits.max(1, keepdims=True))


def margin_ok(router, x, top_k):
    """Every top_k-th logit is ahead of the next by at least 100 times the logits' error bound."""
    logits, err = logit_errors(router, x)
    s = np.sort(logits, axis=1)[:, ::-1]
    return bool(np.all(s[:, top_k - 1] - s[:, top_k] > 100 * 2 * err.max(1)))


def write_block(seed, tokens_topk):
    """A block whose router separates its choices well for every (tokens, top_k) given."""
    for s in range(seed, seed + 100):
        rng = np.random.default_rng(s)
        router = (rng.standard_normal((E, H)) * 0.4).astype(ml_dtypes.bfloat16).astype(np.float32)
        router[np.abs(router) < 2.0 ** -14] = 0.0  # float16 subnormals would lose bits
        if all(margin_ok(router.astype(np.float64), inputs(t), k) for t, k in tokens_topk):
            break
    else:
        raise SystemExit("no router with well separated choices in 100 seeds")
    tensors = {
        "model.embed_tokens.weight": rng.standard_normal((16, H)).astype(np.float32),
        "model.layers.0.post_attention_layernorm.weight": np.ones(H, np.float32),
        f"{PREFIX}.gate.weight": router,
        f"{PREFIX}.experts.gate_up_proj": (rng.standard_normal((E, 2 * I, H)) * 0.125).astype(np.float32),
        f"{PREFIX}.experts.down_proj": (rng.standard_normal((E, H, I)) * 0.18).astype(np.float32),
    }
    return tensors


def silu(v):
    return v / (1.0 + np.exp(-v))


def reference(w, x, top_k, norm, mistake=None):
    """The block in float64 from the dequantized weights w; also each output's error bound. `mistake`
    computes it wrong on purpose (to show that the bound would catch it)."""
    router = w[f"{PREFIX}.gate.weight"].astype(np.float64)
    gu_w = w[f"{PREFIX}.experts.gate_up_proj"].astype(np.float64)
    d_w = w[f"{PREFIX}.experts.down_proj"].astype(np.float64)
    logits, e_l = logit_errors(router, x)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    order = np.argsort(-logits, axis=1, kind="stable")
    ids = order[:, :top_k].copy()
    if mistake == "next_choice":
        ids[:, -1] = order[:, top_k]
    c = np.take_along_axis(p, ids, 1)
    if norm != (mistake == "norm"):
        c = c / c.sum(1, keepdims=True)
    d_c = 2 * e_l.max(1) + (E + top_k + 8) * U
    out = np.zeros((len(x), H))
    bound = np.zeros((len(x), H))

    def gemm(wm, a, ea):  # wm [N, K] times a [K] (with error ea [K] in a): value and error bound
        z = wm @ a
        s = np.abs(wm) @ (np.abs(a) + ea)
        e = np.abs(wm) @ ea + gamma(wm.shape[1] + 5) * s
        return z, e + U * (np.abs(z) + e)

    for t in range(len(x)):
        for j in range(top_k):
            e = ids[t, j]
            z, ez = gemm(gu_w[e], x[t], np.zeros(H))
            g, up, e_g, e_u = z[:I], z[I:], ez[:I], ez[I:]
            if mistake == "swap":
                g, up = up, g
            h = silu(g) * up
            e_h = 1.1 * e_g * (np.abs(up) + e_u) + np.abs(silu(g)) * e_u + \
                6 * U * (np.abs(silu(g)) + 1.1 * e_g) * (np.abs(up) + e_u)
            y, e_y = gemm(d_w[e], h, e_h)
            out[t] += c[t, j] * y
            bound[t] += c[t, j] * e_y + d_c[t] * c[t, j] * (np.abs(y) + e_y) + \
                gamma(top_k + 1) * c[t, j] * (1 + d_c[t]) * (np.abs(y) + e_y)
    return out, bound, ids, c


def parse_choices(stdout):
    """{token: [(expert, weight), ...]} from the example's lines `  token t: expert e (w) ...`."""
    got = {}
    for m in re.finditer(r"^  token (\d+):((?: expert \d+ \([0-9.]+\))+)$", stdout, re.M):
        got[int(m.group(1))] = [(int(e), float(v)) for e, v in re.findall(r"expert (\d+) \(([0-9.]+)\)", m.group(2))]
    return got


tmp = Path(tempfile.mkdtemp(prefix="kbit-moe-layer-"))
CASES = [  # name, router dtype in the input, quantize options, top_k, tokens, renormalize
    ("nf4", "BF16", ["--nf4"], 2, 5, True),  # the router stays dense by default, as transformers v5 keeps it
    ("fp4-nested-bs32", "F16", ["--fp4", "--double-quant", "--blocksize", "32", "--skip", "mlp.gate"], 3, 5, True),
    ("nf4-4bit-router", "F32", ["--nf4", "--no-default-skip"], 2, 64, False),
]
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}
block = write_block(1, [(5, 2), (5, 3), (64, 2)])
for rdt, dt in DTYPES.items():
    save_file({**block, f"{PREFIX}.gate.weight": block[f"{PREFIX}.gate.weight"].astype(dt)},
              str(tmp / f"dense-{rdt}.safetensors"), metadata={"format": "pt"})
dense = tmp / "dense-F32.safetensors"
worst = 0.0
shown = ""
for name, rdt, opts, top_k, tokens, norm in CASES:
    q, deq, y_path = tmp / f"{name}.safetensors", tmp / f"{name}.deq.safetensors", tmp / f"{name}.out"
    rc, out, err = run(KBIT, "quantize", tmp / f"dense-{rdt}.safetensors", q, *opts, "--quiet")
    check(rc == 0, f"{name}: kbit quantize: {rc} {err}")
    rc, out, err = run(KBIT, "dequantize", q, deq, "--dtype", "fp32", "--quiet")
    check(rc == 0, f"{name}: kbit dequantize: {rc} {err}")
    args = [EXAMPLE, q, PREFIX, top_k, "--tokens", tokens, "--out", y_path] + ([] if norm else ["--no-norm-topk-prob"])
    rc, out, err = run(*args)
    check(rc == 0, f"{name}: the example exited {rc}: {err}")
    if rc != 0:
        continue
    if name == "nf4":
        shown = out
    w = load_file(str(deq))
    router_is_4bit = f"{PREFIX}.gate.weight.absmax" in load_file(str(q))
    check(router_is_4bit == ("--no-default-skip" in opts), f"{name}: the router is 4-bit exactly with --no-default-skip")
    check(f"router {'nf4' if router_is_4bit else rdt}\n" in out, f"{name}: the summary names the router: {out}")
    x = inputs(tokens)
    check(margin_ok(w[f"{PREFIX}.gate.weight"].astype(np.float64), x, top_k),
          f"{name}: the routing choices are not well separated (choose other inputs)")
    ref, bound, ids, c = reference(w, x, top_k, norm)
    # The routing first: the same experts for every token, and their weights to the 4 decimals printed.
    choices = parse_choices(out)
    check(sorted(choices) == list(range(min(tokens, 8))), f"{name}: the example printed the choices of tokens "
          f"{sorted(choices)}")
    for t, chosen in choices.items():
        check(sorted(e for e, _ in chosen) == sorted(ids[t]), f"{name}: token {t} chose {chosen}, the reference "
              f"{list(ids[t])}")
        for e, v in chosen:
            if e in ids[t]:
                check(abs(v - c[t, list(ids[t]).index(e)]) <= 0.5e-4 + 1e-6, f"{name}: token {t} expert {e} weight {v}")
    loads = re.search(r"^tokens per expert: ([0-9 ]+)$", out, re.M)
    check(loads and [int(v) for v in loads.group(1).split()] == list(np.bincount(ids.ravel(), minlength=E)),
          f"{name}: tokens per expert")
    # Then the output, element by element, within the bound.
    y = np.fromfile(y_path, dtype=np.float32)
    check(y.size == tokens * H, f"{name}: the output holds {y.size} floats, not {tokens * H}")
    if y.size != tokens * H:
        continue
    y = y.reshape(tokens, H).astype(np.float64)
    ratio = np.abs(y - ref) / bound
    worst = max(worst, float(ratio.max()))
    print(f"{name}: max |out - ref| is {ratio.max():.3g} of its bound (largest bound {bound.max():.3g}, max |ref| "
          f"{np.abs(ref).max():.3g})")
    check(np.all(ratio <= 1.0), f"{name}: |out - ref| exceeds the bound: {ratio.max():.3g} of it at "
          f"{np.unravel_index(ratio.argmax(), ratio.shape)}")
    check(np.abs(ref).max() > 0.05, f"{name}: the output is not trivially small ({np.abs(ref).max():.3g})")
    # The comparison discriminates: each plausible mistake lands outside the bound somewhere.
    for mistake in ("swap", "norm", "next_choice"):
        wrong, _, _, _ = reference(w, x, top_k, norm, mistake)
        check(np.any(np.abs(y - wrong) > bound), f"{name}: the bound does not reject the mistake '{mistake}'")

# Failures: exit status 1 (2 for usage) with a message, never a crash.
q = tmp / "nf4.safetensors"


def fails(args, status, pattern, what):
    rc, out, err = run(EXAMPLE, *args)
    check(rc == status and re.search(pattern, err), f"{what}: exit {rc} (want {status}), stderr {err!r}")


dense_only = tmp / "dense-model.safetensors"
save_file({"model.layers.0.mlp.down_proj.weight": np.ones((64, 64), np.float32)}, str(tmp / "d.safetensors"))
rc, _, err = run(KBIT, "quantize", tmp / "d.safetensors", dense_only, "--nf4", "--quiet")
check(rc == 0, f"quantizing the dense model: {err}")
fails([dense_only, PREFIX, 2], 1, r"no MoE layer here.*\n.*no 4-bit fused experts", "a checkpoint without MoE layers")
fails([q, "model.layers.1.mlp", 2], 1, r"model.layers.1.mlp: no MoE layer here.*\n.*MoE layers in this checkpoint: "
      r"model.layers.0.mlp\n", "a prefix without an MoE layer")
fails([dense, PREFIX, 2], 1, r"experts.gate_up_proj: ", "unquantized experts")
bad = load_file(str(dense))
bad[f"{PREFIX}.experts.down_proj"] = bad[f"{PREFIX}.experts.down_proj"][:, :, :16].copy()
save_file(bad, str(tmp / "bad-shapes.safetensors"))
rc, _, err = run(KBIT, "quantize", tmp / "bad-shapes.safetensors", tmp / "bad-shapes.q.safetensors", "--nf4",
                 "--skip", "mlp.gate", "--quiet")
check(rc == 0, f"quantizing the mismatched block: {err}")
fails([tmp / "bad-shapes.q.safetensors", PREFIX, 2], 1, r"shapes disagree", "gate_up and down of different I")
data = q.read_bytes()
(tmp / "truncated.safetensors").write_bytes(data[: len(data) - 100])
fails([tmp / "truncated.safetensors", PREFIX, 2], 1, r"kbit_io_open: .*truncated.safetensors", "a truncated file")
(tmp / "garbage.safetensors").write_bytes(bytes(np.random.default_rng(5).integers(0, 256, 4096, dtype=np.uint8)))
fails([tmp / "garbage.safetensors", PREFIX, 2], 1, r"kbit_io_open: ", "a garbage file")
fails([tmp / "missing.safetensors", PREFIX, 2], 1, r"kbit_io_open: ", "a missing file")
fails([q, PREFIX, 2, "--out", tmp / "no-such-dir" / "y.bin"], 1, r"cannot write the output", "an unwritable --out")
fails([q, PREFIX, 9], 2, r"TOP_K 9 is more than the 8 experts", "TOP_K above E")
for args in ([], [q, PREFIX], [q, PREFIX, 0], [q, PREFIX, "2x"], [q, PREFIX, 2, "--tokens", 0], [q, PREFIX, 2, "--bad"]):
    fails(args, 2, r"^usage: kbit_moe_layer", f"usage error {args}")

print(shown, end="")
check.finish(tmp, f"{len(CASES)} blocks, worst |out - ref| {worst:.3g} of the bound")
