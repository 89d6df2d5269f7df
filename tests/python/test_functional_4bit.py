"""quantize_4bit / dequantize_4bit / gemv_4bit on numpy: bitsandbytes defaults, every dtype, format and
blocksize, nested statistics, and byte-identical dequantization with bitsandbytes' own CPU library."""
import ctypes as ct

import ml_dtypes
import numpy as np
import pytest

import kbit
import reference as ref

DTS = ["fp32", "fp16", "bf16"]


def test_defaults_are_bitsandbytes():
    w = np.linspace(-1, 1, 256, dtype=np.float32)
    packed, state = kbit.quantize_4bit(w)
    assert state.quant_type == "fp4" and state.blocksize == 64 and not state.nested
    assert packed.shape == (128, 1) and packed.dtype == np.uint8
    assert state.shape == (256,) and state.dtype == np.float32
    assert state.absmax.shape == (4,) and state.absmax.dtype == np.float32
    assert np.array_equal(state.code, ref.FP4_MAP)
    q, s8 = kbit.quantize_blockwise(np.ones(5000, np.float32))
    assert s8.blocksize == 4096 and s8.absmax.shape == (2,)


def test_quant_maps_are_the_spec_tables():
    assert np.array_equal(kbit.get_4bit_type("nf4").view(np.uint32), ref.NF4.view(np.uint32))
    assert np.array_equal(kbit.get_4bit_type("fp4").view(np.uint32), ref.FP4_MAP.view(np.uint32))
    assert kbit.get_4bit_type("fp4").view(np.uint32)[8] == 0  # +0.0, as bitsandbytes' quant_map


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("blocksize", [32, 64, 128, 256, 512, 1024, 2048, 4096])
def test_quantize_4bit_matches_the_spec_reference(rng, dt, q, blocksize):
    w = ref.to_dtype(rng.standard_normal((33, 129)) * 0.02, dt)  # odd element count, partial last block
    w.reshape(-1)[5] = 0
    packed, state = kbit.quantize_4bit(w, blocksize=blocksize, quant_type=q)
    exp_packed, exp_absmax = ref.quantize_4bit(w, blocksize, q)
    assert np.array_equal(packed.reshape(-1), exp_packed) and np.array_equal(state.absmax, exp_absmax)
    assert state.shape == (33, 129) and state.dtype == ref.DTYPES[dt] and state.blocksize == blocksize
    out = kbit.dequantize_4bit(packed, state)
    assert out.shape == (33, 129) and out.dtype == ref.DTYPES[dt]
    exp = ref.dequantize_4bit(exp_packed, exp_absmax, blocksize, w.size, q, ref.DTYPES[dt]).reshape(33, 129)
    assert np.array_equal(out.view(np.uint8), exp.view(np.uint8))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("q", ["nf4", "fp4"])
def test_compress_statistics_nests_the_scales(rng, dt, q):
    w = ref.to_dtype(rng.standard_normal((64, 1000)) * 0.05, dt)
    packed, state = kbit.quantize_4bit(w, blocksize=64, quant_type=q, compress_statistics=True)
    plain_packed, plain = kbit.quantize_4bit(w, blocksize=64, quant_type=q)
    assert np.array_equal(packed, plain_packed)  # same nibbles; only the scales are stored differently
    blocks = plain.absmax.size
    assert state.nested and state.absmax.dtype == np.uint8 and state.absmax.shape == (blocks,)
    s2 = state.state2
    assert s2.blocksize == 256 and s2.dtype == np.float32 and s2.absmax.shape == (-(-blocks // 256),)
    assert np.array_equal(s2.code, kbit.create_dynamic_map(signed=True))
    # §2.5: offset = mean, codes = nearest 8-bit code of (absmax - offset) / nested absmax.
    centred = (plain.absmax - state.offset).astype(np.float32)
    exp_codes, exp_nested = ref.quantize_blockwise(centred, s2.code, 256)
    assert abs(float(state.offset) - plain.absmax.astype(np.float64).mean()) <= 2e-7 * float(state.offset)
    assert np.array_equal(state.absmax, exp_codes) and np.array_equal(s2.absmax, exp_nested)
    restored = (s2.code[state.absmax] * np.repeat(s2.absmax, 256)[:blocks]).astype(np.float32) + state.offset
    exp = ref.dequantize_4bit(packed, restored.astype(np.float32), 64, w.size, q, ref.DTYPES[dt]).reshape(w.shape)
    assert np.array_equal(kbit.dequantize_4bit(packed, state).view(np.uint8), exp.view(np.uint8))


def test_dequantize_without_state_uses_absmax_and_out(rng):
    w = rng.standard_normal(512).astype(np.float32)
    packed, state = kbit.quantize_4bit(w, blocksize=128, quant_type="nf4")
    out = np.empty(512, ml_dtypes.bfloat16)
    r = kbit.dequantize_4bit(packed, absmax=state.absmax, out=out, blocksize=128, quant_type="nf4")
    assert r is out
    exp = ref.dequantize_4bit(packed, state.absmax, 128, 512, "nf4", ml_dtypes.bfloat16)
    assert np.array_equal(out.view(np.uint16), exp.view(np.uint16))


def test_preallocated_outputs_are_filled(rng):
    w = rng.standard_normal(300).astype(np.float16)
    absmax = np.empty(5, np.float32)
    out = np.empty((150, 1), np.uint8)
    packed, state = kbit.quantize_4bit(w, absmax=absmax, out=out, quant_type="nf4")
    assert packed is out and state.absmax is absmax
    exp_packed, exp_absmax = ref.quantize_4bit(w, 64, "nf4")
    assert np.array_equal(out.reshape(-1), exp_packed) and np.array_equal(absmax, exp_absmax)


def test_quant_storage_views_the_packed_bytes(rng):
    w = rng.standard_normal((16, 64)).astype(np.float32)
    packed, state = kbit.quantize_4bit(w, quant_type="nf4", quant_storage=np.float32)
    assert packed.dtype == np.float32 and packed.shape == (128, 1)
    u8, _ = kbit.quantize_4bit(w, quant_type="nf4")
    assert np.array_equal(packed.view(np.uint8), u8.reshape(128, 4))
    assert np.array_equal(kbit.dequantize_4bit(packed, state), kbit.dequantize_4bit(u8, state))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "nested"])
def test_gemv_4bit_against_float64(rng, dt, q, nested):
    N, K = 200, 1024
    W = ref.to_dtype(rng.standard_normal((N, K)) * 0.05, dt)
    packed, state = kbit.quantize_4bit(W, blocksize=128, quant_type=q, compress_statistics=nested)
    A = ref.to_dtype(rng.standard_normal((1, 1, K)), dt)
    out = kbit.gemv_4bit(A, packed.T, state=state)
    assert out.shape == (1, 1, N) and out.dtype == ref.DTYPES[dt]
    Wd = kbit.dequantize_4bit(packed, state).astype(np.float64)  # = the weight the kernel uses
    a = A.reshape(K).astype(np.float64)
    exact = Wd @ a
    eps = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}[dt]
    # Each product rounded at most once in the input dtype (16-bit kernels), fp32 sums, one output rounding.
    bound = (K * 2.0**-24 + 2 * eps) * (np.abs(Wd) @ np.abs(a)) + eps * np.abs(exact)
    assert (np.abs(out.reshape(N).astype(np.float64) - exact) <= bound).all()


# ---- bitsandbytes' own CPU library -------------------------------------------------------------

@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("blocksize", [64, 256, 4096])
def test_dequantize_4bit_byte_identical_to_bitsandbytes(bnb, rng, dt, q, blocksize):
    m, n = 7, 1000  # n % 16 != 0: bitsandbytes takes its scalar path over the flat m * n elements
    w = ref.to_dtype(rng.standard_normal((m, n)) * 0.1, dt)
    packed, state = kbit.quantize_4bit(w, blocksize=blocksize, quant_type=q)
    out = np.zeros((m, n), ref.DTYPES[dt])
    fn = getattr(bnb, f"cdequantize_blockwise_cpu_{q}_{dt}")
    fn(ct.c_void_p(packed.ctypes.data), ct.c_void_p(state.absmax.ctypes.data), ct.c_void_p(out.ctypes.data),
       ct.c_longlong(blocksize), ct.c_longlong(m), ct.c_longlong(n))
    mine = kbit.dequantize_4bit(packed, state)
    assert np.array_equal(mine.view(np.uint8), out.view(np.uint8))


@pytest.mark.parametrize("dt", DTS)
def test_dequantize_nested_4bit_matches_bitsandbytes_composition(bnb, rng, dt):
    # bitsandbytes restores nested scales with its 8-bit dequantizer then adds the offset (§2.5).
    w = ref.to_dtype(rng.standard_normal((32, 1000)) * 0.1, dt)
    packed, state = kbit.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)
    blocks = state.absmax.size
    s2 = state.state2
    absmax = np.zeros(blocks, np.float32)
    bnb.cdequantize_blockwise_cpu_fp32(ct.c_void_p(s2.code.ctypes.data), ct.c_void_p(state.absmax.ctypes.data),
                                       ct.c_void_p(s2.absmax.ctypes.data), ct.c_void_p(absmax.ctypes.data),
                                       ct.c_longlong(256), ct.c_longlong(blocks))
    absmax = (absmax + state.offset).astype(np.float32)
    out = np.zeros(w.shape, ref.DTYPES[dt])
    getattr(bnb, f"cdequantize_blockwise_cpu_nf4_{dt}")(ct.c_void_p(packed.ctypes.data), ct.c_void_p(absmax.ctypes.data),
                                                       ct.c_void_p(out.ctypes.data), ct.c_longlong(64),
                                                       ct.c_longlong(32), ct.c_longlong(1000))
    assert np.array_equal(kbit.dequantize_4bit(packed, state).view(np.uint8), out.view(np.uint8))


def test_dequantize_4bit_equals_the_recorded_bitsandbytes_golden_vectors():
    # tests/golden/bnb_4bit.*: bitsandbytes' cdequantize_blockwise_cpu_* outputs (no library needed).
    from conftest import golden_array, load_golden
    index, blob = load_golden("bnb_4bit")
    for c in index["cases"]:
        total = c["m"] * c["n"]
        packed = golden_array(blob, c["packed"], np.uint8)
        absmax = golden_array(blob, c["absmax"], np.float32)
        dtype = ref.DTYPES[c["dtype"]]
        expected = golden_array(blob, c["out"], np.uint8)
        out = np.empty(total, dtype)
        kbit.dequantize_4bit(packed, absmax=absmax, out=out, blocksize=c["blocksize"], quant_type=c["quant_type"])
        assert np.array_equal(out.view(np.uint8), expected), c
    assert len(index["cases"]) == 240
