"""Unchanged bitsandbytes callers: libkbit.so opened with ctypes.CDLL and NO argtypes, called with
exactly the conventions of bitsandbytes' Python backends (ctypes, as its Python code calls its library): c_void_p pointers from
.ctypes.data, c_int32 sizes, c_float, c_bool, a NULL stream. Results are checked against independent
numpy references (reference.py) and against the functional API."""
import ctypes as ct

import numpy as np
import pytest

import kbit
import reference as ref

BNB_4BIT_QUANT = "cquantize_blockwise_{dt}_{q}"


@pytest.fixture(scope="module")
def lib():
    # As bitsandbytes' cextension does: a plain CDLL, restype set only for the pointer results.
    cdll = ct.CDLL(str(kbit.library_dir() / "libkbit.so"))
    cdll.get_context.restype = ct.c_void_p
    cdll.cget_managed_ptr.restype = ct.c_void_p
    return cdll


def get_ptr(a):
    return None if a is None else ct.c_void_p(a.ctypes.data)


STREAM = ct.c_void_p(None)


def test_no_argtypes_are_set(lib):
    assert lib.cquantize_blockwise_fp32_nf4.argtypes is None
    assert lib.cquantize_blockwise_fp32_nf4.restype is ct.c_int  # ctypes' default: the kbit_status


@pytest.mark.parametrize("dt", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("blocksize", [64, 4096])
def test_4bit_quantize_dequantize_bnb_style(lib, rng, dt, q, blocksize):
    n = 3 * 4096 + 101
    A = ref.to_dtype(rng.standard_normal(n) * 0.05, dt)
    blocks = -(-n // blocksize)
    absmax = np.zeros(blocks, np.float32)
    out = np.zeros((n + 1) // 2, np.uint8)
    status = getattr(lib, f"cquantize_blockwise_{dt}_{q}")(None, get_ptr(A), get_ptr(absmax), get_ptr(out),
                                                           ct.c_int32(blocksize), ct.c_int32(n))
    assert status == 0
    exp_packed, exp_absmax = ref.quantize_4bit(A, blocksize, q)
    assert np.array_equal(absmax, exp_absmax) and np.array_equal(out, exp_packed)
    deq = np.zeros(n, ref.DTYPES[dt])
    getattr(lib, f"cdequantize_blockwise_{dt}_{q}")(None, get_ptr(out), get_ptr(absmax), get_ptr(deq),
                                                     ct.c_int(blocksize), ct.c_int(n), STREAM)
    exp = ref.dequantize_4bit(out, absmax, blocksize, n, q, ref.DTYPES[dt])
    assert np.array_equal(deq.view(np.uint8), exp.view(np.uint8))
    packed, state = kbit.quantize_4bit(A, blocksize=blocksize, quant_type=q)
    assert np.array_equal(packed.reshape(-1), out)
    assert np.array_equal(kbit.dequantize_4bit(packed, state).view(np.uint8), deq.view(np.uint8))


@pytest.mark.parametrize("dt", ["fp32", "fp16", "bf16"])
def test_4bit_gemv_bnb_style(lib, rng, dt):
    N, K, blocksize = 96, 512, 64
    W = ref.to_dtype(rng.standard_normal((N, K)) * 0.05, dt)
    packed, state = kbit.quantize_4bit(W, blocksize=blocksize, quant_type="nf4")
    A = ref.to_dtype(rng.standard_normal((1, K)), dt)
    out = np.zeros((1, N), ref.DTYPES[dt])
    code = state.code
    status = getattr(lib, f"cgemm_4bit_inference_naive_{dt}")(
        ct.c_int32(N), ct.c_int32(1), ct.c_int32(K), get_ptr(A), get_ptr(packed), get_ptr(state.absmax),
        get_ptr(code), get_ptr(out), ct.c_int32(N), ct.c_int32((K + 1) // 2), ct.c_int32(N),
        ct.c_int32(blocksize), STREAM)
    assert status == 0
    Wd = kbit.dequantize_4bit(packed, state).astype(np.float64)
    exact = A.astype(np.float64) @ Wd.T
    # fp32 accumulation of K products (each exact or rounded once in the input dtype) + one output rounding.
    eps = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}[dt]
    bound = (K * 2.0**-24 + 2 * eps) * (np.abs(A.astype(np.float64)) @ np.abs(Wd).T) + eps * np.abs(exact)
    assert (np.abs(out.astype(np.float64) - exact) <= bound).all()
    assert np.array_equal(kbit.gemv_4bit(A, packed.T, state=state).view(np.uint8), out.view(np.uint8))


@pytest.mark.parametrize("dt", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("blocksize", [256, 4096])
def test_8bit_blockwise_bnb_style(lib, rng, dt, blocksize):
    n = 2 * blocksize + 77
    A = ref.to_dtype(rng.standard_normal(n) * 3, dt)
    code = kbit.create_dynamic_map(signed=True)
    absmax = np.zeros(-(-n // blocksize), np.float32)
    out = np.zeros(n, np.uint8)
    assert getattr(lib, f"cquantize_blockwise_{dt}")(get_ptr(code), get_ptr(A), get_ptr(absmax), get_ptr(out),
                                                     ct.c_int32(blocksize), ct.c_int(n)) == 0
    exp_q, exp_absmax = ref.quantize_blockwise(A, code, blocksize)
    assert np.array_equal(absmax, exp_absmax) and np.array_equal(out, exp_q)
    deq = np.zeros(n, ref.DTYPES[dt])
    assert getattr(lib, f"cdequantize_blockwise_{dt}")(get_ptr(code), get_ptr(out), get_ptr(absmax), get_ptr(deq),
                                                       ct.c_int(blocksize), ct.c_int(n), STREAM) == 0
    exp = ref.dequantize_blockwise(out, code, absmax, blocksize, ref.DTYPES[dt])
    assert np.array_equal(deq.view(np.uint8), exp.view(np.uint8))
    q, state = kbit.quantize_blockwise(A, blocksize=blocksize)
    assert np.array_equal(q, out)
    assert np.array_equal(kbit.dequantize_blockwise(q, state).view(np.uint8), deq.view(np.uint8))


def test_llm_int8_bnb_style(lib, rng):
    T, K, O = 5, 96, 48
    X = (rng.standard_normal((T, K)) * 2).astype(np.float16)
    W = (rng.standard_normal((O, K)) * 0.1).astype(np.float16)
    CA, SCA = np.zeros((T, K), np.int8), np.zeros(T, np.float32)
    CB, SCB = np.zeros((O, K), np.int8), np.zeros(O, np.float32)
    for a, out, stats, rows in ((X, CA, SCA, T), (W, CB, SCB, O)):
        assert lib.cint8_vector_quant(get_ptr(a), get_ptr(out), get_ptr(stats), ct.c_float(0.0), ct.c_int32(rows),
                                      ct.c_int32(K), STREAM) == 0
        exp_q, exp_s = ref.int8_vector_quant(a)
        assert np.array_equal(out, exp_q) and np.array_equal(stats, exp_s)
    context = ct.c_void_p(lib.get_context())
    acc = np.zeros((T, O), np.int32)
    # bitsandbytes' int8_linear_matmul: m = K, n = tokens, k = out features, A = weights, B = activations.
    assert lib.cigemmlt_32(context, ct.c_int32(K), ct.c_int32(T), ct.c_int32(O), get_ptr(CB), get_ptr(CA), get_ptr(acc),
                           None, ct.c_int32(K), ct.c_int32(K), ct.c_int32(O), STREAM) == 0
    assert np.array_equal(acc, CA.astype(np.int64) @ CB.astype(np.int64).T)
    assert np.array_equal(kbit.int8_linear_matmul(CA, CB), acc)
    Y = np.zeros((T, O), np.float16)
    assert lib.cdequant_mm_int32_fp16(get_ptr(acc), get_ptr(SCA), get_ptr(SCB), get_ptr(Y), None, ct.c_int32(T),
                                      ct.c_int32(O), STREAM) == 0
    # No bias: fmaf(x, c, 0) is one rounding of x * c, exact in float64 before the fp32 rounding.
    x = (acc.astype(np.float32) * SCA[:, None]).astype(np.float32) * SCB[None, :]
    exp = (x.astype(np.float64) * np.float64(np.float32(6.200012e-05))).astype(np.float32).astype(np.float16)
    assert np.array_equal(Y.view(np.uint16), exp.view(np.uint16))
    assert np.array_equal(kbit.int8_mm_dequant(acc, SCA, SCB).view(np.uint16), Y.view(np.uint16))
    assert lib.kbit_context_destroy(context) == 0


def test_status_is_visible_to_bnb_style_callers(lib):
    a = np.ones(64, np.float32)
    assert lib.cquantize_blockwise_fp32_nf4(None, get_ptr(a), get_ptr(a), get_ptr(a), ct.c_int32(100), ct.c_int32(64)) == 1
    lib.kbit_last_error_message.restype = ct.c_char_p
    assert lib.kbit_last_error_message() == b"cquantize_blockwise_fp32_nf4: blocksize 100 is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096"


# ---- optimizers: bitsandbytes' optimizer_update_32bit / optimizer_update_8bit_blockwise calls ----------

def call_32bit(lib, fn, g, p, state1, state2, beta1, beta2, beta3, alpha, eps, weight_decay, step, lr):
    return getattr(lib, fn)(get_ptr(g), get_ptr(p), get_ptr(state1), get_ptr(state2), None, ct.c_float(0.0),
                            ct.c_float(0.0), ct.c_float(beta1), ct.c_float(beta2), ct.c_float(beta3),
                            ct.c_float(alpha), ct.c_float(eps), ct.c_float(weight_decay), ct.c_int32(step),
                            ct.c_float(lr), ct.c_float(1.0), ct.c_bool(False), ct.c_int32(g.size))


def call_8bit(lib, fn, p, g, state1, state2, beta1, beta2, beta3, alpha, eps, step, lr, qmap1, qmap2, absmax1,
              absmax2, weight_decay):
    return getattr(lib, fn)(get_ptr(p), get_ptr(g), get_ptr(state1), get_ptr(state2), ct.c_float(beta1),
                            ct.c_float(beta2), ct.c_float(beta3), ct.c_float(alpha), ct.c_float(eps), ct.c_int32(step),
                            ct.c_float(lr), get_ptr(qmap1), get_ptr(qmap2), get_ptr(absmax1), get_ptr(absmax2),
                            ct.c_float(weight_decay), ct.c_float(1.0), ct.c_bool(False), ct.c_int32(g.size))


@pytest.mark.parametrize("fn,cls,kw,betas,eps", [
    ("cadam32bit_grad_fp32", kbit.optim.Adam32bit, dict(lr=1e-3, weight_decay=0.01), (0.9, 0.999), 1e-8),
    ("cmomentum32bit_grad_32", kbit.optim.SGD32bit, dict(lr=1e-2, momentum=0.9), (0.9, 0.0), 0.0),
    ("clion32bit_grad_fp32", kbit.optim.Lion32bit, dict(lr=1e-4), (0.9, 0.99), 0.0),
])
def test_32bit_optimizer_bnb_style(lib, rng, fn, cls, kw, betas, eps):
    n = 3000
    p = rng.standard_normal(n).astype(np.float32)
    p_cls = p.copy()
    state1, state2 = np.zeros(n, np.float32), np.zeros(n, np.float32) if fn.startswith("cadam") else None
    opt = cls([p_cls], **kw)
    for step in range(1, 4):
        g = rng.standard_normal(n).astype(np.float32)
        assert call_32bit(lib, fn, g, p, state1, state2, betas[0], betas[1], 0.0, 0.0, eps,
                          kw.get("weight_decay", 0.0), step, kw["lr"]) == 0
        opt.step([g])
    assert np.array_equal(p, p_cls) and np.array_equal(state1, opt.state[0]["state1"])


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
def test_8bit_adam_bnb_style(lib, rng, dt):
    n = 4096 + 256 * 3 + 11
    p = ref.to_dtype(rng.standard_normal(n), dt)
    p_cls = p.copy()
    blocks = -(-n // 256)
    state1, state2 = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    absmax1, absmax2 = np.zeros(blocks, np.float32), np.zeros(blocks, np.float32)
    qmap1, qmap2 = kbit.create_dynamic_map(True), kbit.create_dynamic_map(False)
    opt = kbit.optim.Adam8bit([p_cls], lr=1e-3)
    p0, p32 = p.astype(np.float32), p.astype(np.float32)
    opt32 = kbit.optim.Adam32bit([p32], lr=1e-3)
    for step in range(1, 4):
        g = ref.to_dtype(rng.standard_normal(n), dt)
        opt32.step([g.astype(np.float32)])
        assert call_8bit(lib, f"cadam_8bit_blockwise_grad_{dt}", p, g, state1, state2, 0.9, 0.999, 0.0, 0.0, 1e-8,
                         step, 1e-3, qmap1, qmap2, absmax1, absmax2, 0.0) == 0
        opt.step([g])
    st = opt.state[0]
    assert np.array_equal(p.view(np.uint8), p_cls.view(np.uint8))
    assert np.array_equal(state1, st["state1"]) and np.array_equal(state2, st["state2"])
    assert np.array_equal(absmax1, st["absmax1"]) and np.array_equal(absmax2, st["absmax2"])
    # And the parameters follow a 32-bit Adam on fp32 copies (8-bit state error, 16-bit rounding).
    moved = np.abs(p32 - p0).mean()
    tol = 0.05 * moved + (0 if dt == "fp32" else 2.0**-8 * np.abs(p0).mean())
    assert np.abs(p.astype(np.float32) - p32).mean() <= tol
