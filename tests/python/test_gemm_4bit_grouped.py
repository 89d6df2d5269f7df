"""kbit.gemm_4bit_grouped (kbit_gemm_4bit_grouped, the mixture-of-experts GEMM) on numpy: byte for byte the
loop of gemm_4bit over each expert's rows (kbit.checkpoint.expert_4bit slices) followed by the fp32
combine, within the fp32 summation bound of an fp64 reference, and its errors."""
import ml_dtypes
import numpy as np
import pytest

import kbit
from kbit.checkpoint import expert_4bit

DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
UNIT = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def problem(rng, E, N, K, T, top_k, dt, q, nested, per_choice, blocksize=64):
    w = (rng.standard_normal((E, N, K)) * 0.05).astype(np.float32)
    packed, state = kbit.quantize_4bit(w, blocksize=blocksize, quant_type=q, compress_statistics=nested)
    ids = np.empty((T, top_k), np.int32)
    ids[:, 0] = 0  # expert 0 chosen by every token; expert E - 1 by none
    ids[:, 1:] = rng.integers(0, E - 1, size=(T, top_k - 1))
    shape = (T, top_k, K) if per_choice else (T, K)
    A = rng.standard_normal(shape).astype(np.float32).astype(DTYPES[dt])
    combine = rng.standard_normal((T, top_k)).astype(np.float32)
    return packed, state, ids, A, combine


def looped(A, packed, state, ids, combine):
    T, top_k = ids.shape
    E, N, K = state.shape
    y = np.zeros((T, top_k, N), A.dtype)
    for e in range(E):
        t, j = np.nonzero(ids == e)  # (t, j) order
        if not len(t):
            continue
        x = A[t] if A.ndim == 2 else A[t, j]
        wp, ws = expert_4bit(packed, state, e)
        y[t, j] = kbit.functional.gemm_4bit(np.ascontiguousarray(x), wp, ws)
    if combine is None:
        return y
    s = np.zeros((T, N), np.float32)
    for j in range(top_k):  # products and sums each rounded to fp32, j in order
        s = (s + (combine[:, j:j + 1] * y[:, j].astype(np.float32)).astype(np.float32)).astype(np.float32)
    return s.astype(A.dtype)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("per_choice", [False, True])
@pytest.mark.parametrize("with_combine", [False, True])
@pytest.mark.parametrize("T", [1, 20])
def test_equals_the_looped_gemm_4bit_byte_for_byte(rng, dt, q, nested, per_choice, with_combine, T):
    # 32 x 512 = 16384 elements per expert: whole nested groups (256 blocks of 64), so every expert has a slice
    packed, state, ids, A, combine = problem(rng, 5, 32, 512, T, 3, dt, q, nested, per_choice)
    comb = combine if with_combine else None
    got = kbit.gemm_4bit_grouped(A, packed, state, ids, combine=comb)
    exp = looped(A, packed, state, ids, comb)
    assert got.shape == exp.shape and got.dtype == exp.dtype
    assert got.tobytes() == exp.tobytes()


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("K", [40, 302])  # 7 * 40 and 7 * 302 elements per expert: experts start inside blocks
def test_within_the_fp32_bound_of_fp64(rng, dt, K):
    E, N, T, top_k = 4, 7, 6, 2
    packed, state, ids, A, _ = problem(rng, E, N, K, T, top_k, dt, "nf4", False, True, blocksize=32)
    got = kbit.gemm_4bit_grouped(A, packed, state, ids).astype(np.float64)
    W = kbit.dequantize_4bit(packed, state).astype(np.float64)  # fp32(lut * absmax): within 2^-24 of exact
    a = A.astype(np.float64)
    for t in range(T):
        for j in range(top_k):
            prods = a[t, j][None, :] * W[ids[t, j]]
            exact = prods.sum(axis=1)
            S = np.abs(prods).sum(axis=1)
            g = (K + 6) * 2.0 ** -24
            err = g * S * (1 + 1e-6) + 1e-37
            assert np.all(np.abs(got[t, j] - exact) <= err + UNIT[dt] * (np.abs(exact) + err) + 1e-30)


def test_errors(rng):
    packed, state, ids, A, combine = problem(rng, 3, 8, 64, 2, 2, "fp32", "nf4", False, False)
    bad = np.array([[0, 1], [2, 7]], np.int32)
    with pytest.raises(kbit.KbitError, match=r"kbit_gemm_4bit_grouped: ids\[3\] \(token 1, slot 1\) is 7, "
                                             r"must be in \[0, 3\)"):
        kbit.gemm_4bit_grouped(A, packed, state, bad)
    with pytest.raises(ValueError, match=r"A must have shape \(2, 64\) or \(2, 2, 64\)"):
        kbit.gemm_4bit_grouped(np.ascontiguousarray(A[:, :32]), packed, state, ids)
    with pytest.raises(ValueError, match="must be 3-D"):
        p2, s2 = kbit.quantize_4bit(np.zeros((8, 64), np.float32))
        kbit.gemm_4bit_grouped(A, p2, s2, ids)
    with pytest.raises(ValueError, match=r"ids must be 2-D"):
        kbit.gemm_4bit_grouped(A, packed, state, ids.reshape(-1))
    empty = kbit.gemm_4bit_grouped(np.zeros((0, 64), np.float32), packed, state, np.zeros((0, 2), np.int32))
    assert empty.shape == (0, 2, 8)
