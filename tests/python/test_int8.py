"""LLM.int8 on numpy: int8_vectorwise_quant (outliers), int8_linear_matmul, int8_mm_dequant and the
whole layer (docs/behaviour.md §7)."""
import numpy as np
import pytest

import kbit
import reference as ref


def test_vectorwise_quant_without_threshold(rng):
    A = (rng.standard_normal((2, 3, 70)) * 3).astype(np.float16)
    A[0, 1] = 0  # a zero row gives zeros
    out, stats, outliers = kbit.int8_vectorwise_quant(A)
    exp_q, exp_s = ref.int8_vector_quant(A.reshape(6, 70))
    assert out.shape == A.shape and out.dtype == np.int8 and outliers is None
    assert np.array_equal(out.reshape(6, 70), exp_q) and np.array_equal(stats, exp_s) and stats.shape == (6,)


def test_vectorwise_quant_with_outliers(rng):
    A = (rng.standard_normal((8, 64))).astype(np.float16)
    A[3, 5], A[6, 40], A[0, 41] = 7.0, -6.0, 5.99  # |a| >= 6 makes columns 5 and 40 outliers
    out, stats, cols = kbit.int8_vectorwise_quant(A, threshold=6.0)
    assert cols.dtype == np.int64 and list(cols) == [5, 40]
    assert (out[:, [5, 40]] == 0).all()  # computed in fp16 instead
    inliers = np.where(np.abs(A) < np.float16(6.0), A, np.float16(0))
    exp_q, exp_s = ref.int8_vector_quant(inliers)
    exp_q[:, [5, 40]] = 0
    assert np.array_equal(out, exp_q) and np.array_equal(stats, exp_s)
    one_row, _, cols1 = kbit.int8_vectorwise_quant(A[3:4].copy(), threshold=6.0)
    assert list(cols1) == [5] and one_row[0, 5] == 0  # a single row keeps its columns (outliers quantize to 0)


@pytest.mark.parametrize("shape", [(1, 64), (7, 96), (2, 3, 48)])
def test_int8_linear_matmul_is_exact(rng, shape):
    K = shape[-1]
    A = rng.integers(-127, 128, size=shape, dtype=np.int8)
    B = rng.integers(-127, 128, size=(33, K), dtype=np.int8)
    out = kbit.int8_linear_matmul(A, B)
    assert out.shape == shape[:-1] + (33,) and out.dtype == np.int32
    assert np.array_equal(out, A.astype(np.int64) @ B.astype(np.int64).T)


def test_mm_dequant_with_bias(rng):
    acc = rng.integers(-20000, 20000, size=(4, 24), dtype=np.int32)
    row = rng.uniform(0.5, 6, 4).astype(np.float32)
    col = rng.uniform(0.01, 0.2, 24).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float16)
    out = kbit.int8_mm_dequant(acc, row, col, bias=bias)
    x = (acc.astype(np.float32) * row[:, None]).astype(np.float32) * col[None, :]
    exact = x.astype(np.float64) * np.float64(np.float32(6.200012e-05)) + bias.astype(np.float64)
    # fmaf rounds once to fp32, then once to fp16.
    assert (np.abs(out.astype(np.float64) - exact) <= np.abs(exact) * (2.0**-11 + 2.0**-24) + 2.0**-24).all()
    no_bias = kbit.int8_mm_dequant(acc, row, col)
    assert np.array_equal(no_bias, (x.astype(np.float64) * np.float64(np.float32(6.200012e-05))).astype(np.float32)
                          .astype(np.float16))


def test_llm_int8_layer_against_float64(rng):
    T, K, O = 6, 256, 64
    X = rng.standard_normal((T, K)).astype(np.float16)
    X[:, 17] *= 12  # an outlier feature
    W = (rng.standard_normal((O, K)) * 0.05).astype(np.float16)
    CB, SCB, _ = kbit.int8_vectorwise_quant(W)  # weights once, threshold 0
    CA, SCA, cols = kbit.int8_vectorwise_quant(X, threshold=6.0)
    assert 17 in cols
    Y = kbit.int8_mm_dequant(kbit.int8_linear_matmul(CA, CB), SCA, SCB)
    kbit.int8_outlier_matmul(X, CB, SCB, cols, Y)
    exact = X.astype(np.float64) @ W.astype(np.float64).T
    # Row-wise int8 of both operands: each element off by at most half a step of its row scale.
    err = 0.5 * (np.abs(X.astype(np.float64)).sum(1)[:, None] * (SCB / 127.0)[None, :]
                 + (SCA / 127.0)[:, None] * np.abs(W.astype(np.float64)).sum(1)[None, :])
    assert (np.abs(Y.astype(np.float64) - exact) <= err + 2.0**-10 * np.abs(exact) + 1e-3).all()
