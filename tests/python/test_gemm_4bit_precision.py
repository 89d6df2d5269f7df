"""kbit.gemv_4bit / kbit.gemm_4bit with precision="exact" | "int8" | "bf16" (kbit_gemm_4bit_precision, 4bit 1.2,
behaviour.md §3.6; "bf16" 4bit 1.3, §3.7): "exact" is the default and the bitsandbytes arithmetic, "int8" and
"bf16" equal, byte for byte, numpy models of the classes written from the documentation (fp32 steps in the
documented order), stay within the documented bounds of the fp64 product, and bad choices raise with their
messages."""
import os

import ml_dtypes
import numpy as np
import pytest

import kbit

DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
UNIT = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
F32 = np.float32
NF4_LEVELS = np.array([-127, -88, -67, -50, -36, -23, -12, 0, 10, 20, 31, 43, 56, 71, 92, 127], np.int64)
FP4_LEVELS = np.array([0, 1, 85, 127, 42, 64, 21, 32, 0, -1, -85, -127, -42, -64, -21, -32], np.int64)


def nibbles(packed, n):
    b = np.asarray(packed).reshape(-1).view(np.uint8)
    out = np.empty(2 * b.size, np.int64)
    out[0::2], out[1::2] = b >> 4, b & 15
    return out[:n]


def block_scales(state, blocks):
    """fp32 scale of every block as cgemm_4bit restores it (nested: code[q] * absmax2, then + offset)."""
    if not state.nested:
        return np.asarray(state.absmax, F32)[:blocks]
    codes = np.asarray(state.absmax).astype(np.int64)[:blocks]
    scaled = (np.asarray(state.state2.code, F32)[codes] * np.asarray(state.state2.absmax, F32)[np.arange(blocks) >> 8])
    return (scaled.astype(F32) + F32(state.offset)).astype(F32)


def int8_model(A, packed, state, bias=None):
    """The int8 class, written from behaviour.md §3.6 in numpy fp32."""
    N, K = state.shape
    x = np.asarray(A).astype(F32).reshape(-1, K)
    M = x.shape[0]
    chunks = x.reshape(M, K // 32, 32)
    amax = np.abs(chunks).max(axis=2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = (F32(127) / amax).astype(F32)
        p = (chunks * inv[:, :, None]).astype(F32)
    p[np.isnan(p)] = 0
    q = np.rint(np.clip(p, -127, 127)).astype(np.int64)  # rint: ties to even
    e = ((amax / F32(127)).astype(F32) / F32(127)).astype(F32)
    levels = (FP4_LEVELS if state.quant_type == "fp4" else NF4_LEVELS)[nibbles(packed, N * K)].reshape(N, K // 32, 32)
    s = block_scales(state, -(-N * K // state.blocksize))
    beta = (np.arange(N)[:, None] * K + 32 * np.arange(K // 32)[None, :]) // state.blocksize  # [N, chunks]
    total = np.zeros((M, N), F32)
    for c in range(K // 32):
        isum = q[:, c, :] @ levels[:, c, :].T  # exact integers
        se = (s[beta[:, c]][None, :] * e[:, c:c + 1]).astype(F32)
        total = (total + (se * isum.astype(F32)).astype(F32)).astype(F32)
    if bias is not None:
        total = (total + np.asarray(bias).astype(F32)[None, :]).astype(F32)
    return total.astype(np.asarray(A).dtype).reshape(np.asarray(A).shape[:-1] + (N,))


def bf16_round(x):
    """fp32 -> bf16 (round to nearest even) -> fp32, a subnormal result read as zero (DAZ)."""
    u = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    h = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    h = np.where((h & 0x7F80) == 0, h & 0x8000, h)
    return (h << 16).astype(np.uint32).view(F32)


def bf16_model(A, packed, state, bias=None):
    """The bf16 class, written from behaviour.md §3.7 in numpy: 16 fp32 lanes per output, group g of 32 elements
    adds a[2j+1]*w[2j+1] then a[2j]*w[2j] to lane j (each product exact, so one fp64 sum rounded to fp32 is the
    fused multiply-add for these data), subnormal lanes flushed; the lanes summed 8+8, 4+4, 2+2, 1+1."""
    N, K = state.shape
    x = np.asarray(A).astype(F32).reshape(-1, K)
    M, kp = x.shape[0], -(-K // 32) * 32
    lut = np.asarray(kbit.functional.get_4bit_type(state.quant_type), F32)
    s = block_scales(state, -(-N * K // state.blocksize))
    g = np.arange(N)[:, None] * K + np.arange(K)[None, :]
    w = np.zeros((N, kp), F32)
    w[:, :K] = bf16_round((lut[nibbles(packed, N * K)].reshape(N, K) * s[g // state.blocksize]).astype(F32))
    a = np.zeros((M, kp), F32)
    a[:, :K] = bf16_round(x)
    lanes = np.zeros((M, N, 16), F32)
    for g0 in range(0, kp, 32):
        for odd in (1, 0):
            prod = a[:, None, g0 + odd:g0 + 32:2].astype(np.float64) * w[None, :, g0 + odd:g0 + 32:2]
            lanes = (lanes.astype(np.float64) + prod).astype(F32)
            lanes[np.abs(lanes) < 2.0 ** -126] *= 0  # FTZ, keeping the sign of zero
    t = (lanes[..., :8] + lanes[..., 8:]).astype(F32)
    t = (t[..., :4] + t[..., 4:]).astype(F32)
    t = (t[..., :2] + t[..., 2:]).astype(F32)
    total = (t[..., 0] + t[..., 1]).astype(F32)
    if bias is not None:
        total = (total + np.asarray(bias).astype(F32)[None, :]).astype(F32)
    return total.astype(np.asarray(A).dtype).reshape(np.asarray(A).shape[:-1] + (N,))


def problem(rng, M, N, K, dt, q, nested, blocksize=64):
    w = (rng.standard_normal((N, K)) * 0.05).astype(F32)
    packed, state = kbit.quantize_4bit(w, blocksize=blocksize, quant_type=q, compress_statistics=nested)
    A = rng.standard_normal((M, K)).astype(F32)
    A[:, 5] *= 20  # an outlier column: chunks of very different scales
    return packed, state, A.astype(DTYPES[dt])


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("M", [1, 3, 17])
def test_int8_equals_the_documented_model_byte_for_byte(rng, dt, q, nested, M):
    packed, state, A = problem(rng, M, 37, 512, dt, q, nested)
    bias = rng.standard_normal(37).astype(DTYPES[dt])
    got = kbit.functional.gemm_4bit(A, packed, state, bias=bias, precision="int8")
    assert got.dtype == A.dtype and got.shape == (M, 37)
    assert got.tobytes() == int8_model(A, packed, state, bias).tobytes()


@pytest.mark.parametrize("dt", list(DTYPES))
def test_int8_within_its_bound_of_fp64(rng, dt):
    packed, state, A = problem(rng, 4, 29, 1024, dt, "nf4", False, blocksize=128)
    got = kbit.functional.gemm_4bit(A, packed, state, precision="int8").astype(np.float64)
    N, K = state.shape
    lv = np.asarray(kbit.functional.get_4bit_type("nf4"), np.float64)[nibbles(packed, N * K)].reshape(N, K)
    lam = np.abs(NF4_LEVELS[nibbles(packed, N * K)].reshape(N, K) / 127.0 - lv)
    s = np.repeat(np.asarray(state.absmax, np.float64), 128)[:N * K].reshape(N, K)
    x = A.astype(np.float64)
    d = np.repeat(np.abs(x).reshape(4, K // 32, 32).max(axis=2) / 127, 32, axis=1)  # [M, K]
    u = 2.0 ** -24
    exact = x @ (lv * s).T
    e_q = (d * (0.5 + 512 * u)) @ (s * (np.abs(lv) + lam)).T + np.abs(x) @ (s * lam).T
    gamma = (K / 32 + 4) * u / (1 - (K / 32 + 4) * u)
    e = e_q + gamma * ((np.abs(x) + d) @ (s * (np.abs(lv) + lam)).T) + 1e-37
    assert np.all(np.abs(got - exact) <= e + UNIT[dt] * (np.abs(exact) + e) + 1e-30)
    # and much closer than the bound on average: the rounding errors are not all of one sign
    assert np.mean(np.abs(got - exact)) < 0.25 * np.mean(e)


@pytest.mark.parametrize("dt", list(DTYPES))
def test_exact_is_the_default_and_gemv_takes_the_int8_class(rng, dt):
    packed, state, A = problem(rng, 1, 40, 256, dt, "nf4", True)
    default = kbit.functional.gemm_4bit(A, packed, state)
    assert kbit.functional.gemm_4bit(A, packed, state, precision="exact").tobytes() == default.tobytes()
    row = A[0]
    assert kbit.gemv_4bit(row, packed, state=state).tobytes() == \
        kbit.gemv_4bit(row, packed, state=state, precision="exact").tobytes()
    int8 = kbit.gemv_4bit(row, packed, state=state, precision="int8")
    assert int8.shape == (40,) and int8.tobytes() == int8_model(A, packed, state).reshape(40).tobytes()
    assert int8.tobytes() != kbit.gemv_4bit(row, packed, state=state).tobytes()  # another arithmetic


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("M,K", [(1, 512), (3, 70), (17, 256)])
def test_bf16_equals_the_documented_model_byte_for_byte(rng, dt, q, nested, M, K):
    packed, state, A = problem(rng, M, 37, K, dt, q, nested)
    bias = rng.standard_normal(37).astype(DTYPES[dt])
    got = kbit.functional.gemm_4bit(A, packed, state, bias=bias, precision="bf16")
    assert got.dtype == A.dtype and got.shape == (M, 37)
    assert got.tobytes() == bf16_model(A, packed, state, bias).tobytes()


@pytest.mark.parametrize("dt", list(DTYPES))
def test_bf16_within_its_bound_of_fp64_and_gemv_takes_it(rng, dt):
    packed, state, A = problem(rng, 4, 29, 1024, dt, "nf4", False, blocksize=128)
    got = kbit.functional.gemm_4bit(A, packed, state, precision="bf16").astype(np.float64)
    N, K = state.shape
    w = kbit.dequantize_4bit(packed, state).astype(np.float64)  # the fp32 weights
    x = A.astype(np.float64)
    exact, S = x @ w.T, np.abs(x) @ np.abs(w).T
    u, ub = 2.0 ** -24, 2.0 ** -8
    gamma = (K / 16 + 5) * u / (1 - (K / 16 + 5) * u)
    e = (2 * ub + ub * ub) * S + gamma * (1 + ub) ** 2 * S + 2.0 ** -125 * (K + np.abs(x).sum(1)[:, None] + np.abs(w).sum(1)[None, :])
    assert np.all(np.abs(got - exact) <= e + UNIT[dt] * (np.abs(exact) + e) + 1e-30)
    row = kbit.gemv_4bit(A[0], packed, state=state, precision="bf16")
    assert row.shape == (29,) and row.tobytes() == bf16_model(A[:1], packed, state).reshape(29).tobytes()


def test_bad_precision_and_k_raise_with_their_messages(rng):
    packed, state, A = problem(rng, 2, 8, 64, "fp32", "nf4", False)
    with pytest.raises(ValueError, match="gemm_4bit: precision 'fp8' is not one of exact, bf16, int8"):
        kbit.functional.gemm_4bit(A, packed, state, precision="fp8")
    with pytest.raises(ValueError, match="gemv_4bit: precision 2 is not one of exact, bf16, int8"):
        kbit.gemv_4bit(A[0], packed, state=state, precision=2)
    w = rng.standard_normal((8, 48)).astype(F32)
    p48, s48 = kbit.quantize_4bit(w, blocksize=64, quant_type="nf4")
    kbit.functional.gemm_4bit(A[:, :48].copy(), p48, s48)  # the exact class takes K = 48
    with pytest.raises(kbit.KbitError) as e:
        kbit.functional.gemm_4bit(A[:, :48].copy(), p48, s48, precision="int8")
    assert e.value.message == "kbit_gemm_4bit_precision: K is 48, must be a multiple of 32 for KBIT_PRECISION_INT8"


def test_a_backend_at_4bit_1_1_has_the_loaders_stub_for_every_class():
    fakes = os.environ.get("KBIT_TEST_FAKES")
    if not fakes:
        pytest.skip("KBIT_TEST_FAKES (the loader test kit's fake backends) not set: run through ctest")
    path = os.path.join(fakes, "libkbit_minor11.so")
    lib = kbit.load(path)
    assert lib.versions["4bit"] == (1, 1)
    with pytest.raises(kbit.KbitError) as e:
        lib.checked.kbit_gemm_4bit_precision(2, 0, None, None, None, None, None, None, None, None, 1, 1, 32, 64, 2, None)
    assert e.value.status_name == "KBIT_STATUS_NOT_IMPLEMENTED"
    assert e.value.message == (f"kbit_gemm_4bit_precision: not implemented by backend minor11 ({path}), whose 4bit "
                               "interface is 1.1 (kbit_gemm_4bit_precision is 4bit 1.2)")
    with pytest.raises(kbit.KbitError) as e:
        lib.checked.kbit_gemm_4bit_precision(1, 0, None, None, None, None, None, None, None, None, 1, 1, 32, 64, 2, None)
    assert e.value.status_name == "KBIT_STATUS_NOT_IMPLEMENTED"
