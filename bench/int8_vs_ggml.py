#!/usr/bin/env python3
"""Error of kbit's int8 precision class (kbit_gemm_4bit_precision, behaviour.md §3.6) beside a numpy model of
ggml's IQ4_NL x Q8_0 arithmetic on the same random weights and activations.

For each format it reports two errors of y = x W^T, as RMS over all outputs relative to the RMS of the exact
product, and the largest error relative to that RMS:
  kernel: against the fp64 product of x with that format's own dequantized weights (the matmul's arithmetic);
  total:  against the fp64 product of x with the original fp32 weights (quantization of the weights included).
For the int8 class a third line splits its kernel error: against the weights its integer core really
multiplies, L/127 * absmax (the activation rounding alone, without the rounding of the levels to int8).

The ggml side is a model written for this comparison, not ggml's code: IQ4_NL blocks of 32 with an fp16 scale
and the non-linear table {-127, ..., 113}; the scale is chosen by a best-scale search like ggml's
(candidates (t - 127) / max for t in -7..7, then the weighted least-squares scale of the chosen indices, weights
x^2, keeping the one with the largest sumqx^2 / sumq2), or by absmax (d = max / -127); activations as Q8_0
(blocks of 32, d = amax / 127 in fp32 for the rounding, stored as fp16, q = round half away from zero of
x / d); per block sumi = sum q8 * table, y += fp16(d_w) * fp16(d_x) * sumi in fp32, blocks in order.

Usage: PYTHONPATH=python KBIT_LIBRARY_DIR=build/lib python3 bench/int8_vs_ggml.py [--rows M] [--out N] [--seed S]
"""
import argparse

import numpy as np

import kbit

F32, F16 = np.float32, np.float16
NF4_INT8 = np.array([-127, -88, -67, -50, -36, -23, -12, 0, 10, 20, 31, 43, 56, 71, 92, 127], np.int64)
FP4_INT8 = np.array([0, 1, 85, 127, 42, 64, 21, 32, 0, -1, -85, -127, -42, -64, -21, -32], np.int64)
IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int64)


def nibbles(packed, n):
    b = np.asarray(packed).reshape(-1).view(np.uint8)
    out = np.empty(2 * b.size, np.int64)
    out[0::2], out[1::2] = b >> 4, b & 15
    return out[:n]


def iq4nl_quantize(w, search=True):
    """(indices [N, K], fp16 scales [N, K/32]) of IQ4_NL blocks of 32."""
    N, K = w.shape
    b = w.reshape(N, K // 32, 32).astype(F32)
    idx_of = lambda y: np.abs(y[..., None] - IQ4NL).argmin(axis=-1)  # nearest table entry
    amax_at = np.abs(b).argmax(axis=2)
    mx = np.take_along_axis(b, amax_at[..., None], axis=2)[..., 0]  # signed value of the largest magnitude
    safe = np.where(mx == 0, 1, mx)
    d = (mx / IQ4NL[0]).astype(F32)
    L = idx_of(b * np.where(mx == 0, 0, IQ4NL[0] / safe)[..., None])
    if search:
        wt = b * b
        q = IQ4NL[L].astype(F32)
        best = np.where((wt * q * q).sum(2) > 0, (wt * b * q).sum(2) ** 2 / np.maximum((wt * q * q).sum(2), 1e-30), 0)
        best_d = np.where((wt * q * q).sum(2) > 0, (wt * b * q).sum(2) / np.maximum((wt * q * q).sum(2), 1e-30), d)
        best_L = L
        for t in range(-7, 8):
            inv = (t + IQ4NL[0]) / safe
            Lt = idx_of(b * inv[..., None])
            q = IQ4NL[Lt].astype(F32)
            sq2, sqx = (wt * q * q).sum(2), (wt * b * q).sum(2)
            score = np.where(sq2 > 0, sqx * sqx / np.maximum(sq2, 1e-30), 0)
            better = score > best
            best = np.where(better, score, best)
            best_d = np.where(better, sqx / np.maximum(sq2, 1e-30), best_d)
            best_L = np.where(better[..., None], Lt, best_L)
        d, L = best_d.astype(F32), best_L
        # the indices for the final scale, as ggml recomputes them
        inv = np.where(d == 0, 0, 1 / np.where(d == 0, 1, d))
        L = idx_of(b * inv[..., None])
    return L.reshape(N, K), d.astype(F16)


def q8_0(x):
    """(int8 values [M, K], fp16 scales [M, K/32]) of Q8_0 blocks of 32."""
    M, K = x.shape
    b = x.reshape(M, K // 32, 32).astype(F32)
    d = (np.abs(b).max(axis=2) / F32(127)).astype(F32)
    inv = np.where(d == 0, F32(0), (F32(1) / np.where(d == 0, F32(1), d)).astype(F32))
    v = (b * inv[..., None]).astype(F32)
    q = (np.sign(v) * np.floor(np.abs(v) + F32(0.5))).astype(np.int64)  # roundf: half away from zero
    return q.reshape(M, K), d.astype(F16)


def iq4nl_q8_0_matmul(x, L, dw):
    """y [M, N] of IQ4_NL weights x Q8_0 activations, fp32 accumulation over blocks in order."""
    q, dx = q8_0(x)
    M, K = q.shape
    N = L.shape[0]
    vals = IQ4NL[L].reshape(N, K // 32, 32)
    qb = q.reshape(M, K // 32, 32)
    y = np.zeros((M, N), F32)
    for c in range(K // 32):
        sumi = (qb[:, c, :] @ vals[:, c, :].T).astype(F32)
        scale = (dw[:, c].astype(F32)[None, :] * dx[:, c].astype(F32)[:, None]).astype(F32)
        y = (y + (scale * sumi).astype(F32)).astype(F32)
    return y


def errors(y, x, w_deq, w_orig):
    """(kernel RMS, kernel max, total RMS, total max), relative to the RMS of the exact product."""
    x64 = x.astype(np.float64)
    own, orig = x64 @ w_deq.astype(np.float64).T, x64 @ w_orig.astype(np.float64).T
    scale = np.sqrt(np.mean(orig ** 2))
    ek, et = y.astype(np.float64) - own, y.astype(np.float64) - orig
    return (np.sqrt(np.mean(ek ** 2)) / scale, np.abs(ek).max() / scale,
            np.sqrt(np.mean(et ** 2)) / scale, np.abs(et).max() / scale)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16, help="activation rows M (default 16)")
    ap.add_argument("--out", type=int, default=512, help="output features N (default 512)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    K = 4096
    rng = np.random.default_rng(args.seed)
    w = (rng.standard_normal((args.out, K)) * 0.02).astype(F32)
    x = rng.standard_normal((args.rows, K)).astype(F32)

    rows = []
    for quant_type, bs in (("nf4", 64), ("nf4", 32), ("fp4", 64)):
        packed, state = kbit.quantize_4bit(w, blocksize=bs, quant_type=quant_type)
        w_deq = kbit.dequantize_4bit(packed, state).astype(F32)
        for precision in ("exact", "int8"):
            y = kbit.functional.gemm_4bit(x, packed, state, precision=precision)
            rows.append((f"kbit {quant_type.upper()} bs {bs}, {precision}", *errors(y, x, w_deq, w)))
        # The int8 class's kernel error without its level rounding: against the weights L/127 * absmax.
        levels = (FP4_INT8 if quant_type == "fp4" else NF4_INT8)[nibbles(packed, w.size)].reshape(w.shape)
        w_int8 = (levels / 127.0 * np.repeat(np.asarray(state.absmax, np.float64), bs).reshape(w.shape))
        rows.append((f"  int8 vs its int8-level weights L/127 * absmax", *errors(y, x, w_int8, w)[:2], np.nan, np.nan))
    for search in (True, False):
        L, dw = iq4nl_quantize(w, search)
        w_deq = (IQ4NL[L].reshape(args.out, K // 32, 32) * dw.astype(F32)[..., None]).astype(F32).reshape(args.out, K)
        y = iq4nl_q8_0_matmul(x, L, dw)
        rows.append((f"ggml IQ4_NL ({'scale search' if search else 'absmax'}) x Q8_0", *errors(y, x, w_deq, w)))
        y_f = (x.astype(np.float64) @ w_deq.astype(np.float64).T).astype(F32)  # the same weights, no Q8_0
        rows.append((f"  same IQ4_NL weights, fp64 activations", *errors(y_f, x, w_deq, w)))

    print(f"K = {K}, M = {args.rows}, N = {args.out}, Gaussian weights (sigma 0.02) and activations (sigma 1), "
          f"seed {args.seed}")
    print(f"{'format, arithmetic':46s} {'kernel RMS':>11s} {'kernel max':>11s} {'total RMS':>11s} {'total max':>11s}")
    cell = lambda v: f"{'-':>11s}" if np.isnan(v) else f"{v:11.3e}"
    for name, *values in rows:
        print(f"{name:46s} " + " ".join(cell(v) for v in values))


if __name__ == "__main__":
    main()
