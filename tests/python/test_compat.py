"""The bitsandbytes names kbit added for issue 40 (numpy only): gemm_4bit, quantize_nf4 / quantize_fp4,
int8_vectorwise_quant on float32 and bfloat16, int8_vectorwise_dequant, int8_double_quant, and the
optimizers LAMB8bit, LARS8bit, PytorchLARS and GlobalOptimManager, each against an independent
reference. Their comparison with bitsandbytes itself: test_bnb_names.py (needs torch)."""
import ml_dtypes
import numpy as np
import pytest

import kbit
from kbit import functional as F
from kbit import optim

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]


# ---- gemm_4bit ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "nested"])
def test_gemm_4bit_against_the_dequantized_weight(rng, dtype, nested):
    N, K, M = 48, 256, 5
    W = rng.standard_normal((N, K)).astype(np.float32).astype(dtype)
    packed, state = F.quantize_nf4(W, blocksize=64, compress_statistics=nested)
    Wd = F.dequantize_4bit(packed, state).astype(np.float64)
    A = rng.standard_normal((M, 1, K)).astype(np.float32).astype(dtype)
    bias = rng.standard_normal(N).astype(np.float32).astype(dtype)
    out = F.gemm_4bit(A, packed, state, bias=bias)
    assert out.dtype == dtype and out.shape == (M, 1, N)
    a = A.astype(np.float64).reshape(M, K)
    exact = a @ Wd.T + bias.astype(np.float64)
    # fp32 accumulation of K products (K * 2^-24 of the sum of magnitudes), the dequantized weight in the
    # activations' dtype (half an ulp of each product) and one rounding of the result to that dtype
    mag = np.abs(a) @ np.abs(Wd).T + np.abs(bias.astype(np.float64))
    half_ulp = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float16): 2.0 ** -11, BF16: 2.0 ** -8}[dtype]
    bound = K * 2.0 ** -24 * mag + half_ulp * (mag + np.abs(exact))
    assert np.all(np.abs(out.reshape(M, N).astype(np.float64) - exact) <= bound)


def test_gemm_4bit_rows_equal_gemv_4bit(rng):
    W = rng.standard_normal((32, 128)).astype(np.float32)
    packed, state = F.quantize_fp4(W, blocksize=32)
    A = rng.standard_normal((3, 128)).astype(np.float32)
    rows = F.gemm_4bit(A, packed, state)
    for i in range(3):
        one = F.gemv_4bit(A[i:i + 1].copy(), packed, state=state)
        assert np.allclose(rows[i], one[0], rtol=1e-6, atol=1e-6)


def test_gemm_4bit_bad_input(rng):
    W = rng.standard_normal((16, 64)).astype(np.float32)
    packed, state = F.quantize_nf4(W)
    with pytest.raises(ValueError, match=r"gemm_4bit: A must have shape \(\.\.\., 64\), not \(2, 32\)"):
        F.gemm_4bit(np.zeros((2, 32), np.float32), packed, state)
    with pytest.raises(ValueError, match="gemm_4bit: state cannot be None"):
        F.gemm_4bit(np.zeros((2, 64), np.float32), packed, None)
    with pytest.raises(ValueError, match="gemm_4bit: B holds 256 bytes, a packed"):
        F.gemm_4bit(np.zeros((2, 64), np.float32), packed[:256], state)
    with pytest.raises(TypeError, match="gemm_4bit: bias must have dtype float32, not float16"):
        F.gemm_4bit(np.zeros((2, 64), np.float32), packed, state, bias=np.zeros(16, np.float16))


def test_quantize_nf4_fp4_are_quantize_4bit(rng):
    A = rng.standard_normal(1000).astype(np.float32)
    for fn, qt in ((F.quantize_nf4, "nf4"), (F.quantize_fp4, "fp4")):
        p1, s1 = fn(A, blocksize=128)
        p2, s2 = F.quantize_4bit(A, blocksize=128, quant_type=qt)
        assert np.array_equal(p1, p2) and np.array_equal(s1.absmax, s2.absmax) and s1.quant_type == qt


# ---- LLM.int8 on every float dtype ------------------------------------------------------------------

def _rows_reference(A64, threshold, dtype):
    """float64 reference of the row quantization: outliers |a| >= threshold (rounded to the dtype) out
    of the absmax, codes round(a * 127 / absmax) with outlier columns 0 for more than one row."""
    mask = np.abs(A64) >= float(np.asarray(threshold, dtype)) if threshold else np.zeros(A64.shape, bool)
    kept = np.where(mask, 0.0, A64)
    amax = np.abs(kept).max(axis=1)
    exact = kept * 127.0 / amax[:, None]
    cols = np.flatnonzero(mask.any(axis=0))
    return exact, amax, cols


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("threshold", [0.0, 2.5])
def test_int8_vectorwise_quant_every_dtype(rng, dtype, threshold):
    A = (rng.standard_normal((12, 40)) * 1.2).astype(np.float32).astype(dtype)
    A[3, 4] = 2.5
    out, stats, cols = F.int8_vectorwise_quant(A, threshold)
    exact, amax, want_cols = _rows_reference(A.astype(np.float64), threshold, dtype)
    assert out.dtype == np.int8 and stats.dtype == np.float32 and np.array_equal(stats, amax.astype(np.float32))
    if threshold:
        assert np.array_equal(cols, want_cols) and 4 in cols
        exact[:, want_cols] = 0.0
    else:
        assert cols is None
    # fp32 evaluation of a * (1 / absmax * 127): within 2^-20 of the exact quotient, so the rounding can
    # differ only where the exact value is that close to a half-integer
    near_tie = np.abs(np.abs(exact - np.floor(exact)) - 0.5) < 2.0 ** -16
    assert np.all(np.abs(out - np.rint(exact)) <= near_tie)
    assert np.array_equal(out[~near_tie], np.rint(exact)[~near_tie].astype(np.int8))


def test_int8_vectorwise_quant_zero_row_and_bad_input():
    A = np.zeros((2, 8), np.float32)
    A[1] = 1.0
    out, stats, _ = F.int8_vectorwise_quant(A)
    assert np.array_equal(out[0], np.zeros(8, np.int8)) and np.array_equal(out[1], np.full(8, 127, np.int8))
    with pytest.raises(TypeError, match="int8_vectorwise_quant: A must have dtype float16, float32, bfloat16, "
                                        "not int8"):
        F.int8_vectorwise_quant(np.zeros((2, 8), np.int8))
    with pytest.raises(ValueError, match="int8_vectorwise_quant: threshold must be >= 0, not -1.0"):
        F.int8_vectorwise_quant(A, -1.0)


def test_int8_vectorwise_dequant(rng):
    A = rng.integers(-127, 128, (6, 10)).astype(np.int8)
    stats = (rng.random(6) * 4).astype(np.float32)
    out = F.int8_vectorwise_dequant(A, stats)
    exact = A.astype(np.float64) * stats[:, None].astype(np.float64) / 127.0
    assert out.dtype == np.float32 and out.shape == (6, 10)
    # two fp32 roundings and the fp32 reciprocal of 127: 3 * 2^-24 relative
    assert np.all(np.abs(out - exact) <= 3 * 2.0 ** -24 * np.abs(exact))
    with pytest.raises(ValueError, match="int8_vectorwise_dequant: stats has 5 elements, expected 6"):
        F.int8_vectorwise_dequant(A, stats[:5])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_int8_double_quant(rng, dtype):
    A = np.clip(rng.standard_normal((9, 20)) * 2, -5.5, 5.5).astype(np.float32).astype(dtype)
    A[0, 3] = 7.0
    qr, qc, rs, cs, cols = F.int8_double_quant(A, threshold=6.0)
    r_out, r_stats, r_cols = F.int8_vectorwise_quant(A, 6.0)
    assert np.array_equal(qr, r_out) and np.array_equal(rs, r_stats) and np.array_equal(cols, r_cols)
    assert list(cols) == [3]
    kept = np.where(np.abs(A.astype(np.float64)) >= 6.0, 0.0, A.astype(np.float64))
    assert np.array_equal(cs, np.abs(kept).max(axis=0).astype(np.float32))
    # a * 127 rounded to the dtype first, then an fp32 division: within the dtype's half ulp of a * 127
    exact = kept * 127.0 / np.abs(kept).max(axis=0)[None, :]
    slack = np.abs(exact) * float(np.finfo(np.float32).eps if dtype == np.float32 else
                                  (2.0 ** -11 if dtype == np.float16 else 2.0 ** -8)) + 1e-6
    assert np.all(np.abs(qc - exact) <= 0.5 + slack)
    assert qc[0, 3] == 0 and np.all(qr[:, 3] == 0)  # the outlier itself; its whole column in the rows' codes
    for name in ("col_stats", "row_stats", "out_col", "out_row"):
        with pytest.raises(ValueError, match=f"int8_double_quant: {name} must be None; pre-allocated {name} is not"):
            F.int8_double_quant(A, **{name: np.zeros(1)})


# ---- optimizers -------------------------------------------------------------------------------------

@pytest.fixture
def manager():
    mng = optim.GlobalOptimManager.get_instance()
    mng.initialize()
    yield mng
    mng.initialize()


def _run(cls, params, grads, **kw):
    params = [p.copy() for p in params]
    opt = cls(params, **kw)
    for g in grads:
        opt.step(g)
    return params, opt


def test_lamb8bit_and_lars8bit_clip_only_32bit_state(rng):
    big, small = rng.standard_normal(5000).astype(np.float32) * 0.1, rng.standard_normal(100).astype(np.float32)
    grads = [[rng.standard_normal(5000).astype(np.float32), rng.standard_normal(100).astype(np.float32)]
             for _ in range(3)]
    for cls8, plain8, clipped, kw in ((optim.LAMB8bit, optim.Adam8bit, optim.LAMB, {}),
                                      (optim.LARS8bit, optim.SGD8bit, optim.LARS, dict(lr=0.01, momentum=0.9))):
        (b8, s8), opt = _run(cls8, [big, small], grads, **kw)
        assert opt.state[0]["bits"] == 8 and opt.state[1]["bits"] == 32
        (b_plain, _), _ = _run(plain8, [big, small], grads, **kw)
        assert np.array_equal(b8, b_plain)  # the 8-bit step has no update-norm clipping
        (s_clipped,), _ = _run(clipped, [small], [[g[1]] for g in grads], **kw)
        assert np.array_equal(s8, s_clipped)  # the 32-bit one does
        (_, s_unclipped), _ = _run(plain8, [big, small], grads, **kw)
        assert not np.array_equal(s8, s_unclipped)  # and clipping was active


def test_pytorch_lars_against_a_float64_reference(rng):
    p0 = rng.standard_normal(300).astype(np.float32)
    grads = [rng.standard_normal(300).astype(np.float32) for _ in range(4)]
    lr, mom, damp, wd, max_unorm = 0.1, 0.9, 0.1, 1e-2, 0.02
    (p,), opt = _run(optim.PytorchLARS, [p0], [[g] for g in grads], lr=lr, momentum=mom, dampening=damp,
                     weight_decay=wd, max_unorm=max_unorm)
    ref, buf, scales = p0.astype(np.float64), None, []
    for g in grads:
        d = g + wd * ref
        buf = d.copy() if buf is None else buf * mom + d * (1 - damp)
        unorm, pnorm = np.linalg.norm(buf), np.linalg.norm(ref)
        scale = max_unorm * pnorm / unorm if unorm > max_unorm * pnorm else 1.0
        scales.append(scale)
        ref = ref - lr * scale * buf
    assert min(scales) < 1.0  # clipping was active
    # fp32 arithmetic: a few roundings per step of terms up to |p|
    assert np.max(np.abs(p - ref)) <= 4 * 8 * 2.0 ** -24 * np.max(np.abs(ref))
    assert np.allclose(opt.state[0]["momentum_buffer"], buf, rtol=1e-5, atol=1e-6)


def test_pytorch_lars_errors():
    p = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.PytorchLARS([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        optim.PytorchLARS([p], momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(NotImplementedError, match="momentum 0 is not supported"):
        optim.PytorchLARS([p])
    with pytest.raises(TypeError, match="needs float32 parameters, not float16"):
        optim.PytorchLARS([np.ones(4, np.float16)], momentum=0.9).step([np.ones(4, np.float16)])


def test_global_optim_manager_keeps_one_parameter_32bit(manager, rng):
    emb, w = rng.standard_normal(8192).astype(np.float32), rng.standard_normal(8192).astype(np.float32)
    manager.register_parameters([emb, w])
    manager.override_config(emb, "optim_bits", 32)
    opt = optim.Adam8bit([emb, w], lr=1e-3)
    g = [rng.standard_normal(8192).astype(np.float32) for _ in range(2)]
    ref = [emb.copy()]
    opt.step(g)
    assert opt.state[0]["bits"] == 32 and opt.state[0]["state1"].dtype == np.float32
    assert opt.state[1]["bits"] == 8 and opt.state[1]["state1"].dtype == np.uint8
    optim.Adam32bit(ref, lr=1e-3).step([g[0]])
    assert np.array_equal(emb, ref[0])  # the same step as a 32-bit Adam


def test_global_optim_manager_lr_by_index_and_by_module(manager, rng):
    a, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    manager.override_config([a], key_value_dict={"lr": 0.5})
    manager.register_parameters([{"params": [a]}, {"params": [b]}])
    assert manager.index2config == {(0, 0): {"lr": 0.5}}

    class Module:
        weight = b
    manager.register_module_override(Module, "weight", {"lr": 0.25})
    g = np.ones(64, np.float32)
    pa, pb = a.copy(), b.copy()
    opt = optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.01, momentum=0.9)
    opt.step([g, g])
    assert np.allclose(a, pa - 0.5 * g) and np.allclose(b, pb - 0.25 * g)
    manager.override_config(a, "optim_bits", 16)
    with pytest.raises(ValueError, match=r"GlobalOptimManager override of parameter 0: optim_bits must be 8 or 32"):
        opt.step([g, g])
    with pytest.raises(RuntimeError, match=r"Call get_instance\(\) instead"):
        optim.GlobalOptimManager()
