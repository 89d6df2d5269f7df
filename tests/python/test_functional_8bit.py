"""quantize_blockwise / dequantize_blockwise on numpy: the exact nearest-code quantizer, nested scales,
custom codes, and dequantization byte-identical with bitsandbytes' CPU library."""
import ctypes as ct
import json

import numpy as np
import pytest

import kbit
import reference as ref
from conftest import GOLDEN, golden_array

DTS = ["fp32", "fp16", "bf16"]


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])
def test_quantize_blockwise_is_the_nearest_code(rng, dt, blocksize):
    # 8192 and 16384: 8bit 1.1 (the CPU backend); the array holds several such blocks.
    A = ref.to_dtype(rng.standard_normal((17, 301 * (1 + blocksize // 2048))) * 4, dt)
    A.reshape(-1)[:blocksize] = 0  # a zero block
    q, state = kbit.quantize_blockwise(A, blocksize=blocksize)
    assert q.shape == A.shape and q.dtype == np.uint8
    code = kbit.create_dynamic_map(signed=True)
    exp_q, exp_absmax = ref.quantize_blockwise(A, code, blocksize)
    assert np.array_equal(q, exp_q) and np.array_equal(state.absmax, exp_absmax)
    assert state.dtype == ref.DTYPES[dt] and state.blocksize == blocksize and np.array_equal(state.code, code)
    out = kbit.dequantize_blockwise(q, state)
    assert out.shape == A.shape and out.dtype == ref.DTYPES[dt]
    exp = ref.dequantize_blockwise(q, code, exp_absmax, blocksize, ref.DTYPES[dt])
    assert np.array_equal(out.view(np.uint8), exp.view(np.uint8))


def test_ties_go_to_the_even_code():
    code = kbit.create_dynamic_map(signed=True)
    mid = np.float32((code[200] + code[201]) * np.float32(0.5))
    A = np.array([mid, 1.0] + [0.0] * 62, np.float32)  # absmax 1: y = A exactly
    q, _ = kbit.quantize_blockwise(A, blocksize=64)
    assert q[0] == 200 and q[1] == 255


@pytest.mark.parametrize("blocksize", [256, 4096])
def test_nested_scales(rng, blocksize):
    A = rng.standard_normal(200_000).astype(np.float32)
    q, state = kbit.quantize_blockwise(A, blocksize=blocksize, nested=True)
    plain_q, plain = kbit.quantize_blockwise(A, blocksize=blocksize)
    assert np.array_equal(q, plain_q)
    assert state.nested and state.absmax.dtype == np.uint8 and state.state2.blocksize == blocksize
    centred = (plain.absmax - state.offset).astype(np.float32)
    exp_codes, exp_nested = ref.quantize_blockwise(centred, state.code, blocksize)
    assert np.array_equal(state.absmax, exp_codes) and np.array_equal(state.state2.absmax, exp_nested)
    blocks = plain.absmax.size
    restored = (state.code[state.absmax] * np.repeat(exp_nested, blocksize)[:blocks]).astype(np.float32) + state.offset
    exp = ref.dequantize_blockwise(q, state.code, restored.astype(np.float32), blocksize, np.float32)
    assert np.array_equal(kbit.dequantize_blockwise(q, state), exp)


def test_custom_code_and_explicit_absmax(rng):
    code = np.sort(rng.uniform(-1, 1, 256).astype(np.float32))
    code[0], code[-1] = -1, 1
    A = rng.standard_normal(1000).astype(np.float32)
    q, state = kbit.quantize_blockwise(A, code=code, blocksize=128)
    exp_q, exp_absmax = ref.quantize_blockwise(A, code, 128)
    assert np.array_equal(q, exp_q)
    out = kbit.dequantize_blockwise(q, absmax=state.absmax, code=code, blocksize=128)
    assert out.dtype == np.float32
    assert np.array_equal(out, ref.dequantize_blockwise(q, code, exp_absmax, 128, np.float32))
    _, nested = kbit.quantize_blockwise(A, code=code, blocksize=128, nested=True)
    assert np.array_equal(nested.code, code)  # the data's code; the scales are nested with the default map
    assert np.array_equal(nested.state2.code, kbit.create_dynamic_map(signed=True))
    out16 = np.empty(1000, np.float16)
    assert kbit.dequantize_blockwise(q, state, out=out16) is out16
    assert np.array_equal(out16, ref.dequantize_blockwise(q, code, exp_absmax, 128, np.float16))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [64, 4096, 16384])
def test_dequantize_blockwise_byte_identical_to_bitsandbytes(bnb, rng, dt, blocksize):
    A = ref.to_dtype(rng.standard_normal(3 * blocksize + 5) * 2, dt)
    q, state = kbit.quantize_blockwise(A, blocksize=blocksize)
    out = np.zeros(A.size, ref.DTYPES[dt])
    getattr(bnb, f"cdequantize_blockwise_cpu_{dt}")(
        ct.c_void_p(state.code.ctypes.data), ct.c_void_p(q.ctypes.data), ct.c_void_p(state.absmax.ctypes.data),
        ct.c_void_p(out.ctypes.data), ct.c_longlong(blocksize), ct.c_longlong(A.size))
    assert np.array_equal(kbit.dequantize_blockwise(q, state).view(np.uint8), out.view(np.uint8))


def test_dequantize_blockwise_equals_the_recorded_bitsandbytes_golden_vectors():
    index = json.loads((GOLDEN / "8bit_index.json").read_text())
    blob = (GOLDEN / index["file"]).read_bytes()
    for c in index["cases"]:
        n, bs = c["n"], c["blocksize"]
        dtype = ref.DTYPES[c["dtype"]]
        code = golden_array(blob, {"offset": c["code"], "bytes": 1024}, np.float32)
        A = golden_array(blob, {"offset": c["A"], "bytes": n}, np.uint8)
        absmax = golden_array(blob, {"offset": c["absmax"], "bytes": 4 * (-(-n // bs))}, np.float32)
        expected = golden_array(blob, {"offset": c["out"], "bytes": n * dtype.itemsize}, np.uint8)
        out = kbit.dequantize_blockwise(A, absmax=absmax, code=code, blocksize=bs, out=np.empty(n, dtype))
        assert np.array_equal(out.view(np.uint8), expected), c["name"]
    assert len(index["cases"]) == 75
