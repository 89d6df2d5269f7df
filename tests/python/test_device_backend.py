"""The functional API, the optimizers, torchao and checkpoints on kbit.DeviceArrays of one backend,
equal to the same calls on numpy arrays through the CPU backend.

The backend is named by KBIT_TEST_DEVICE_BACKEND: a name the loader finds ("opencl", with its
directory on KBIT_BACKEND_PATH) or the path of its .so, e.g.

    KBIT_TEST_DEVICE_BACKEND=/path/to/libkbit_opencl.so ctest --test-dir build -R python.device_backend

Without it the whole module skips (ctest reports it skipped). The memory of the backend is never read
on the host except through kbit_memcpy (an OpenCL backend's device pointers fault on the host), so
these tests are the Python package's check that no call path assumes host memory. Tests of an
interface the backend lacks (8bit, optim8) skip with the reason.

Exact functions (quantize, dequantize, nested scales, 8-bit blockwise, LLM.int8, the optimizers) must give
the CPU backend's bytes; the GEMV and GEMM, whose fp32 summation order is the backend's, must be
within the bound of test_functional_4bit / test_compat of the fp64 product, so within twice it of the
CPU backend's result (the conformance suite's comparison of two summation orders).
"""
import os

import ml_dtypes
import numpy as np
import pytest

import kbit
import reference as ref
from kbit import functional as F

SPEC = os.environ.get("KBIT_TEST_DEVICE_BACKEND")
if not SPEC:
    pytest.skip("KBIT_TEST_DEVICE_BACKEND is not set (a backend name such as opencl, or the path of its .so): "
                "no backend to run the device-array tests on", allow_module_level=True)

DTS = ["fp32", "fp16", "bf16"]
QS = ["nf4", "fp4"]


@pytest.fixture(scope="module")
def lib():
    return kbit.load(SPEC)  # a backend that cannot be opened fails the tests: it was asked for


@pytest.fixture(scope="module")
def cpu():
    lib = kbit.load("cpu")
    assert kbit.backend_for("cpu") is lib  # numpy arrays below run on the CPU backend
    return lib


def need(lib, iface):
    if iface not in lib.versions:
        pytest.skip(f"backend {lib.name} ({lib.path}) does not implement the {iface} interface "
                    f"(it has {', '.join(sorted(lib.versions))})")


def dev(lib, a):
    return kbit.DeviceArray.from_numpy(lib, a)


def host(x):
    assert isinstance(x, kbit.DeviceArray), f"expected a kbit.DeviceArray, got {type(x).__name__}"
    return x.numpy()


def same_bytes(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def assert_device_output(x, lib):
    assert isinstance(x, kbit.DeviceArray) and x.lib is lib and x.stream is None


def check_4bit_state(state, ref_state, lib):
    """Every array of a device QuantState holds the CPU state's bytes; scalars are equal."""
    assert (state.quant_type, state.blocksize, state.dtype, state.shape, state.nested) == \
        (ref_state.quant_type, ref_state.blocksize, ref_state.dtype, ref_state.shape, ref_state.nested)
    for x in (state.absmax, state.code):
        assert_device_output(x, lib)
    assert same_bytes(host(state.absmax), ref_state.absmax)
    assert same_bytes(host(state.code), ref_state.code)
    if ref_state.nested:
        s2, r2 = state.state2, ref_state.state2
        assert (s2.blocksize, s2.dtype) == (r2.blocksize, r2.dtype)
        assert same_bytes(host(s2.absmax), r2.absmax) and same_bytes(host(s2.code), r2.code)
        assert np.float32(state.offset).tobytes() == np.float32(ref_state.offset).tobytes()


# ---- the arrays themselves ---------------------------------------------------------------------

def test_device_arrays_belong_to_their_backend(lib, rng):
    w = rng.standard_normal((4, 64)).astype(np.float32)
    d = dev(lib, w)
    assert d.lib is lib and d.shape == (4, 64) and d.dtype == np.float32
    assert same_bytes(d.numpy(), w)  # through kbit_memcpy
    cuda = d.device_type == "cuda"
    assert d.device_type == ("cuda" if cuda else lib.name)
    assert hasattr(d, "__cuda_array_interface__") == cuda  # only CUDA memory claims to be CUDA memory
    with pytest.raises(TypeError, match="implicit conversion to a numpy array is not allowed; use .numpy()"):
        np.asarray(d)
    ctx = kbit._devices.Ctx(d)
    assert ctx.lib is lib and ctx.adapter is kbit._devices._DeviceArrayAdapter
    packed, state = kbit.quantize_4bit(d)
    assert_device_output(packed, lib)
    assert packed.device_type == d.device_type


def test_memcpy_round_trip_of_every_dtype(lib, rng):
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16, np.uint8, np.int8, np.int32):
        a = (rng.standard_normal(1001) * 50).astype(dtype)
        assert same_bytes(dev(lib, a).numpy(), a)
    empty = dev(lib, np.zeros((0, 3), np.float32))
    assert empty.numpy().shape == (0, 3)


# ---- 4-bit ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("q", QS)
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "nested"])
def test_quantize_dequantize_gemv_gemm_4bit(lib, cpu, rng, dt, q, nested):
    need(lib, "4bit")
    N, K, M, bs = 96, 640, 3, 64  # 960 blocks: nested in 4 blocks of 256, the last partial
    W = ref.to_dtype(rng.standard_normal((N, K)) * 0.05, dt)
    packed, state = kbit.quantize_4bit(dev(lib, W), blocksize=bs, quant_type=q, compress_statistics=nested)
    ref_packed, ref_state = kbit.quantize_4bit(W, blocksize=bs, quant_type=q, compress_statistics=nested)
    assert_device_output(packed, lib)
    assert same_bytes(host(packed), ref_packed)
    check_4bit_state(state, ref_state, lib)

    out = kbit.dequantize_4bit(packed, state)
    assert_device_output(out, lib)
    Wd = kbit.dequantize_4bit(ref_packed, ref_state)
    assert same_bytes(host(out), Wd)

    eps = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}[dt]
    Wd64 = Wd.astype(np.float64)

    # GEMV: one row, test_functional_4bit's bound (fp32 sums of K products, each product rounded once
    # in the input dtype, one output rounding) of the fp64 product for each backend.
    A = ref.to_dtype(rng.standard_normal((1, 1, K)), dt)
    y = kbit.gemv_4bit(dev(lib, A), packed, state=state)
    assert_device_output(y, lib)
    y_cpu = kbit.gemv_4bit(A, ref_packed, state=ref_state)
    a = A.reshape(K).astype(np.float64)
    exact = Wd64 @ a
    bound = (K * 2.0**-24 + 2 * eps) * (np.abs(Wd64) @ np.abs(a)) + eps * np.abs(exact)
    got, want = host(y), y_cpu
    assert got.shape == want.shape == (1, 1, N) and got.dtype == want.dtype
    got, want = got.reshape(N).astype(np.float64), want.reshape(N).astype(np.float64)
    assert np.all(np.abs(got - exact) <= bound)
    assert np.all(np.abs(got - want) <= 2 * bound)

    # gemm_4bit: M rows and a bias, test_compat's bound.
    A = ref.to_dtype(rng.standard_normal((M, 1, K)), dt)
    bias = ref.to_dtype(rng.standard_normal(N), dt)
    Y = F.gemm_4bit(dev(lib, A), packed, state, bias=dev(lib, bias))
    assert_device_output(Y, lib)
    Y_cpu = F.gemm_4bit(A, ref_packed, ref_state, bias=bias)
    a = A.reshape(M, K).astype(np.float64)
    exact = a @ Wd64.T + bias.astype(np.float64)
    mag = np.abs(a) @ np.abs(Wd64).T + np.abs(bias.astype(np.float64))
    bound = K * 2.0**-24 * mag + eps * (mag + np.abs(exact))
    got, want = host(Y), Y_cpu
    assert got.shape == want.shape == (M, 1, N) and got.dtype == want.dtype
    got, want = got.reshape(M, N).astype(np.float64), want.reshape(M, N).astype(np.float64)
    assert np.all(np.abs(got - exact) <= bound)
    assert np.all(np.abs(got - want) <= 2 * bound)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "nested"])
@pytest.mark.parametrize("with_combine", [False, True], ids=["rows", "combine"])
def test_gemm_4bit_grouped_on_device_arrays(lib, cpu, rng, dt, nested, with_combine):
    need(lib, "4bit")
    E, N, K, T, top_k = 4, 32, 512, 5, 2  # 16384 weights per expert: whole nested groups
    W = ref.to_dtype(rng.standard_normal((E, N, K)) * 0.05, dt)
    packed, state = kbit.quantize_4bit(dev(lib, W), blocksize=64, quant_type="nf4", compress_statistics=nested)
    ref_packed, ref_state = kbit.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=nested)
    ids = rng.integers(0, E, size=(T, top_k)).astype(np.int32)
    A = ref.to_dtype(rng.standard_normal((T, top_k, K)), dt)
    comb = rng.standard_normal((T, top_k)).astype(np.float32) if with_combine else None
    Y = kbit.gemm_4bit_grouped(dev(lib, A), packed, state, dev(lib, ids),
                               combine=None if comb is None else dev(lib, comb))
    assert_device_output(Y, lib)
    Y_cpu = kbit.gemm_4bit_grouped(A, ref_packed, ref_state, ids, combine=comb)
    Wd = kbit.dequantize_4bit(ref_packed, ref_state).astype(np.float64)
    a = A.astype(np.float64)
    exact = np.einsum("tjk,tjnk->tjn", a, Wd[ids])
    mag = np.einsum("tjk,tjnk->tjn", np.abs(a), np.abs(Wd[ids]))
    eps = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}[dt]
    bound = K * 2.0**-24 * mag + eps * (mag + np.abs(exact))
    if comb is not None:  # each y rounded to dt, then the fp32 weighted sum and one more rounding
        c = np.abs(comb.astype(np.float64))[:, :, None]
        exact = (comb.astype(np.float64)[:, :, None] * exact).sum(axis=1)
        bound = (c * (bound + eps * mag)).sum(axis=1) + (top_k + 1) * 2.0**-24 * (c * mag).sum(axis=1) \
            + eps * np.abs(exact) + 1e-30
    got, want = host(Y).astype(np.float64), Y_cpu.astype(np.float64)
    assert got.shape == want.shape == exact.shape
    assert np.all(np.abs(got - exact) <= bound)
    assert np.all(np.abs(got - want) <= 2 * bound)
    # An id out of range: the call raises, or (checked on the device) the next synchronization does, once;
    # out is not written either way.
    bad = ids.copy()
    bad[3, 1] = E
    fill = np.full((T, top_k, N), 7, dtype=A.dtype)
    out = dev(lib, fill)
    with pytest.raises(kbit.KbitError, match=rf"ids\[7\] \(token 3, slot 1\) is {E}, must be in \[0, {E}\)"):
        kbit.gemm_4bit_grouped(dev(lib, A), packed, state, dev(lib, bad), out=out)
        lib.checked.kbit_stream_synchronize(None)
    lib.checked.kbit_stream_synchronize(None)
    assert same_bytes(host(out), fill)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("q", QS)
def test_odd_sizes_and_every_blocksize(lib, cpu, rng, dt, q):
    """An odd element count (a half-filled last byte, a partial last block) at each blocksize."""
    need(lib, "4bit")
    W = ref.to_dtype(rng.standard_normal((33, 129)) * 0.02, dt)
    W.reshape(-1)[5] = 0
    d = dev(lib, W)
    for bs in F.BLOCKSIZES:
        packed, state = kbit.quantize_4bit(d, blocksize=bs, quant_type=q)
        ref_packed, ref_state = kbit.quantize_4bit(W, blocksize=bs, quant_type=q)
        assert same_bytes(host(packed), ref_packed), bs
        check_4bit_state(state, ref_state, lib)
        assert same_bytes(host(kbit.dequantize_4bit(packed, state)), kbit.dequantize_4bit(ref_packed, ref_state)), bs


def test_nested_absmax_round_trip(lib, cpu, rng):
    """compress_statistics: the 8-bit codes, nested scales and offset of the device, restored by the
    device (kbit_nested_absmax_dequantize inside dequantize_4bit) and by the CPU from a host copy."""
    need(lib, "4bit")
    W = (rng.standard_normal((64, 1000)) * 0.05).astype(np.float32)
    packed, state = kbit.quantize_4bit(dev(lib, W), quant_type="nf4", compress_statistics=True)
    ref_packed, ref_state = kbit.quantize_4bit(W, quant_type="nf4", compress_statistics=True)
    check_4bit_state(state, ref_state, lib)
    assert isinstance(state.offset, np.float32)
    host_state = F.QuantState(absmax=host(state.absmax), shape=state.shape, code=host(state.code),
                              blocksize=state.blocksize, quant_type="nf4", dtype=state.dtype, offset=state.offset,
                              state2=F.QuantState(absmax=host(state.state2.absmax), code=host(state.state2.code),
                                                  blocksize=state.state2.blocksize, dtype=state.state2.dtype))
    on_device = host(kbit.dequantize_4bit(packed, state))
    assert same_bytes(on_device, kbit.dequantize_4bit(host(packed), host_state))
    assert same_bytes(on_device, kbit.dequantize_4bit(ref_packed, ref_state))
    # the plain scales the nesting approximates: within the 8-bit code spacing of each
    plain = kbit.quantize_4bit(W, quant_type="nf4")[1].absmax
    restored = F._plain_absmax(kbit._devices.Ctx(packed), "test", state, plain.size)[0].numpy()
    assert np.all(np.abs(restored - plain) <= 0.02 * np.abs(plain).max())


def test_views_and_preallocated_outputs(lib, cpu, rng):
    """reshape() views (of inputs and of outputs passed as out=) are the same memory; a view keeps its
    allocation alive after the array it came from is gone."""
    need(lib, "4bit")
    W = rng.standard_normal((32, 128)).astype(np.float16)
    flat = dev(lib, W.reshape(-1))
    view = flat.reshape(32, 128)
    del flat
    packed, state = kbit.quantize_4bit(view, quant_type="nf4")
    ref_packed, ref_state = kbit.quantize_4bit(W, quant_type="nf4")
    assert state.shape == (32, 128) and same_bytes(host(packed), ref_packed)
    out_flat = kbit.DeviceArray(lib, (32 * 128,), np.float16)
    out = out_flat.reshape((32, 128))
    assert kbit.dequantize_4bit(packed.reshape(2048), state, out=out) is out
    assert same_bytes(host(out_flat).reshape(32, 128), kbit.dequantize_4bit(ref_packed, ref_state))
    absmax = kbit.DeviceArray(lib, (64,), np.float32)
    packed_out = kbit.DeviceArray(lib, (2048, 1), np.uint8)
    r_packed, r_state = kbit.quantize_4bit(view, absmax=absmax, out=packed_out, quant_type="nf4")
    assert r_packed is packed_out and r_state.absmax is absmax
    assert same_bytes(host(absmax), ref_state.absmax) and same_bytes(host(packed_out), ref_packed)
    A = rng.standard_normal(128).astype(np.float16)
    y = kbit.gemv_4bit(dev(lib, A).reshape(1, 128), packed, state=state)
    assert y.shape == (1, 32)
    y_cpu = kbit.gemv_4bit(A.reshape(1, 128), ref_packed, state=ref_state)
    assert np.allclose(host(y).astype(np.float32), y_cpu.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_offset_pointers(lib, cpu, rng):
    """Pointers inside an allocation (base + offset, as a torch view passes them). kbit.DeviceArray has
    no slicing, so the C function is called directly on the same backend with offset pointers into
    larger allocations; the bytes around the output stay untouched."""
    need(lib, "4bit")
    n, bs = 4096, 64
    W = rng.standard_normal(n).astype(np.float32)
    ref_packed, ref_state = kbit.quantize_4bit(W, blocksize=bs, quant_type="fp4")
    pad_p, pad_a, pad_o = 24, 8, 40  # bytes, elements, elements (aligned to the element types)
    packed = dev(lib, np.concatenate([np.full(pad_p, 0x5A, np.uint8), ref_packed.reshape(-1)]))
    absmax = dev(lib, np.concatenate([np.full(pad_a, -1, np.float32), ref_state.absmax]))
    out = dev(lib, np.full(pad_o + n + pad_o, 7, np.float32))
    lib.checked.kbit_dequantize_4bit(1, 0, packed.ptr + pad_p, absmax.ptr + 4 * pad_a, out.ptr + 4 * pad_o, bs, n,
                                     None)
    got = out.numpy()
    assert np.all(got[:pad_o] == 7) and np.all(got[pad_o + n:] == 7)
    assert same_bytes(got[pad_o:pad_o + n], kbit.dequantize_4bit(ref_packed, ref_state))
    # and the quantizer writing through offset pointers
    src = dev(lib, np.concatenate([np.zeros(pad_a, np.float32), W]))
    q = dev(lib, np.zeros(pad_p + n // 2, np.uint8))
    am = dev(lib, np.zeros(pad_a + n // bs, np.float32))
    lib.checked.kbit_quantize_4bit(1, 0, src.ptr + 4 * pad_a, am.ptr + 4 * pad_a, q.ptr + pad_p, bs, n, None)
    assert same_bytes(q.numpy()[pad_p:], ref_packed.reshape(-1)) and same_bytes(am.numpy()[pad_a:], ref_state.absmax)
    assert not q.numpy()[:pad_p].any() and not am.numpy()[:pad_a].any()


def test_host_arrays_mixed_with_device_arrays_are_refused(lib, cpu, rng):
    need(lib, "4bit")
    probe = kbit.DeviceArray(lib, (1,), np.uint8)
    if probe.device_type == "cpu":
        pytest.skip(f"backend {lib.name} keeps its arrays in host memory: numpy arrays may be mixed with them")
    where = probe.device_type
    W = rng.standard_normal((16, 64)).astype(np.float32)
    packed, state = kbit.quantize_4bit(dev(lib, W), quant_type="nf4")
    ref_packed, ref_state = kbit.quantize_4bit(W, quant_type="nf4")
    on = f"is on device '{where}', the input on 'cpu'"
    with pytest.raises(ValueError, match=f"dequantize_4bit: quant_state.absmax {on}"):
        kbit.dequantize_4bit(ref_packed, state)
    with pytest.raises(ValueError, match=f"gemv_4bit: B {on}"):
        kbit.gemv_4bit(W[:1].copy(), packed, state=ref_state)
    back = f"is on device 'cpu', the input on '{where}'"
    with pytest.raises(ValueError, match=f"dequantize_4bit: quant_state.absmax {back}"):
        kbit.dequantize_4bit(packed, ref_state)
    with pytest.raises(ValueError, match=f"quantize_4bit: absmax {back}"):
        kbit.quantize_4bit(dev(lib, W), absmax=np.empty(16, np.float32))
    with pytest.raises(ValueError, match=f"dequantize_4bit: out {back}"):
        kbit.dequantize_4bit(packed, state, out=np.empty((16, 64), np.float32))
    with pytest.raises(ValueError, match=f"gemm_4bit: bias {back}"):
        F.gemm_4bit(dev(lib, W[:2].copy()), packed, state, bias=np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="quant_storage float32 needs a numpy input"):
        kbit.quantize_4bit(dev(lib, W), quant_storage=np.float32)
    # the device arrays are intact after the refusals
    assert same_bytes(host(kbit.dequantize_4bit(packed, state)), kbit.dequantize_4bit(ref_packed, ref_state))


# ---- what reads device arrays on the host: torchao, QuantState dicts, checkpoints ---------------------

def test_quant_state_dict_and_checkpoint_from_device_arrays(lib, cpu, rng, tmp_path):
    need(lib, "4bit")
    W = (rng.standard_normal((64, 512)) * 0.05).astype(ml_dtypes.bfloat16)
    packed, state = kbit.quantize_4bit(dev(lib, W), quant_type="nf4", compress_statistics=True)
    ref_packed, ref_state = kbit.quantize_4bit(W, quant_type="nf4", compress_statistics=True)
    # the packed dict keeps device arrays; from_dict reads its JSON through the adapter
    d = state.as_dict(packed=True)
    json_key = "quant_state.bitsandbytes__nf4"
    assert isinstance(d[json_key], np.ndarray) and isinstance(d["absmax"], kbit.DeviceArray)
    d[json_key] = dev(lib, d[json_key])
    back = F.QuantState.from_dict(d)
    assert back.state2.absmax is state.state2.absmax and back.offset == state.offset
    assert same_bytes(host(kbit.dequantize_4bit(packed, back)), kbit.dequantize_4bit(ref_packed, ref_state))
    # checkpoint entries are host copies, equal to the CPU's
    tensors = kbit.checkpoint.tensors_4bit("layer", packed, state)
    ref_tensors = kbit.checkpoint.tensors_4bit("layer", ref_packed, ref_state)
    assert tensors.keys() == ref_tensors.keys()
    assert all(isinstance(v, np.ndarray) and same_bytes(v, ref_tensors[k]) for k, v in tensors.items())
    kbit.checkpoint.save(tmp_path / "m.safetensors", tensors)
    p2, s2 = kbit.checkpoint.load_4bit(kbit.checkpoint.load(tmp_path / "m.safetensors"), "layer")
    assert same_bytes(kbit.dequantize_4bit(p2, s2), kbit.dequantize_4bit(ref_packed, ref_state))
    fmt = kbit.checkpoint.load_int8({"l.weight": np.zeros((2, 4), np.int8), "l.SCB": np.ones(2, np.float32),
                                     "l.weight_format": dev(lib, np.zeros(1, np.uint8))}, "l")
    assert fmt[0].shape == (2, 4)
    assert F.unpack_tensor_to_dict(dev(lib, F.pack_dict_to_tensor({"a": [1, 2]}))) == {"a": [1, 2]}


@pytest.mark.parametrize("dt", DTS)
def test_torchao_nf4_on_device_arrays(lib, cpu, rng, dt):
    need(lib, "4bit")
    W = ref.to_dtype(rng.standard_normal((64, 256)), dt)
    t = kbit.torchao.to_nf4(dev(lib, W))
    r = kbit.torchao.to_nf4(W)
    for name in ("quantized_data", "quantized_scalers", "quantization_factor", "scaler_mean"):
        assert same_bytes(host(getattr(t, name)), getattr(r, name)), name
    assert same_bytes(host(kbit.torchao.get_original_weight(t)), kbit.torchao.get_original_weight(r))
    packed, state = kbit.torchao.to_bitsandbytes(t, compress_statistics=True)
    ref_packed, ref_state = kbit.torchao.to_bitsandbytes(r, compress_statistics=True)
    assert same_bytes(host(packed), ref_packed)
    check_4bit_state(state, ref_state, lib)
    t2 = kbit.torchao.from_bitsandbytes(packed, state)
    r2 = kbit.torchao.from_bitsandbytes(ref_packed, ref_state)
    for name in ("quantized_data", "quantized_scalers", "quantization_factor", "scaler_mean"):
        assert same_bytes(host(getattr(t2, name)), getattr(r2, name)), name


# ---- 8-bit blockwise and the optimizers (interfaces 8bit and optim8) ----------------------------------

@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [256, 4096])
@pytest.mark.parametrize("nested", [False, True], ids=["plain", "nested"])
def test_blockwise_8bit_round_trip(lib, cpu, rng, dt, blocksize, nested):
    need(lib, "8bit")
    A = ref.to_dtype(rng.standard_normal((37, 301)) * 3, dt)  # partial last block
    q, state = kbit.quantize_blockwise(dev(lib, A), blocksize=blocksize, nested=nested)
    ref_q, ref_state = kbit.quantize_blockwise(A, blocksize=blocksize, nested=nested)
    assert_device_output(q, lib)
    assert same_bytes(host(q), ref_q)
    assert same_bytes(host(state.absmax), ref_state.absmax) and same_bytes(host(state.code), ref_state.code)
    if nested:
        assert same_bytes(host(state.state2.absmax), ref_state.state2.absmax)
        assert np.float32(state.offset).tobytes() == np.float32(ref_state.offset).tobytes()
    out = kbit.dequantize_blockwise(q, state)
    assert_device_output(out, lib)
    assert same_bytes(host(out), kbit.dequantize_blockwise(ref_q, ref_state))


@pytest.mark.parametrize("dt", DTS)
def test_llm_int8_chain(lib, cpu, rng, dt):
    """int8_vectorwise_quant (fp16 on the backend, fp32/bf16 from a host copy), int8_double_quant, the
    int8 GEMM, int8_mm_dequant, int8_vectorwise_dequant and the outlier product: the CPU's bytes."""
    need(lib, "8bit")
    A = ref.to_dtype(rng.standard_normal((5, 64)) * 3, dt)
    W = (rng.standard_normal((16, 64))).astype(np.float16)
    got, want = F.int8_vectorwise_quant(dev(lib, A), threshold=6.0), F.int8_vectorwise_quant(A, threshold=6.0)
    assert want[2] is not None and all(same_bytes(host(x), y) for x, y in zip(got, want))
    got, want = F.int8_double_quant(dev(lib, A), threshold=6.0), F.int8_double_quant(A, threshold=6.0)
    assert all(same_bytes(host(x), y) for x, y in zip(got, want))
    qa, sa, _ = F.int8_vectorwise_quant(A.astype(np.float16))
    qw, sw, _ = F.int8_vectorwise_quant(W)
    acc = F.int8_linear_matmul(dev(lib, qa), dev(lib, qw))
    acc_cpu = F.int8_linear_matmul(qa, qw)
    assert same_bytes(host(acc), acc_cpu)
    bias = rng.standard_normal(16).astype(np.float16)
    assert same_bytes(host(F.int8_mm_dequant(acc, dev(lib, sa), dev(lib, sw), bias=dev(lib, bias))),
                      F.int8_mm_dequant(acc_cpu, sa, sw, bias=bias))
    assert same_bytes(host(F.int8_vectorwise_dequant(dev(lib, qa), dev(lib, sa))), F.int8_vectorwise_dequant(qa, sa))
    out, out_cpu = dev(lib, np.zeros((5, 16), np.float16)), np.zeros((5, 16), np.float16)
    cols = np.array([1, 7, 40], np.int64)
    F.int8_outlier_matmul(dev(lib, A.astype(np.float16)), dev(lib, qw), dev(lib, sw), dev(lib, cols), out)
    F.int8_outlier_matmul(A.astype(np.float16), qw, sw, cols, out_cpu)
    assert same_bytes(host(out), out_cpu)


@pytest.mark.parametrize("dt", DTS)
def test_adam8bit_steps_equal_the_cpu_backend(lib, cpu, rng, dt):
    need(lib, "optim8")
    shape = (64, 130)  # 8320 elements >= min_8bit_size: 8-bit state, a partial last 256-block
    p0 = ref.to_dtype(rng.standard_normal(shape) * 0.1, dt)
    grads = [ref.to_dtype(rng.standard_normal(shape) * 0.01, dt) for _ in range(3)]
    p_dev, p_cpu = dev(lib, p0), p0.copy()
    opt_dev = kbit.optim.Adam8bit([p_dev], lr=1e-3, weight_decay=0.01)
    opt_cpu = kbit.optim.Adam8bit([p_cpu], lr=1e-3, weight_decay=0.01)
    for g in grads:
        opt_dev.step([dev(lib, g)])
        opt_cpu.step([g])
        assert same_bytes(p_dev.numpy(), p_cpu)
    st, ref_st = opt_dev.state[0], opt_cpu.state[0]
    assert st["bits"] == ref_st["bits"] == 8 and st["step"] == ref_st["step"] == 3
    for key in ("state1", "state2", "absmax1", "absmax2", "qmap1", "qmap2"):
        assert_device_output(st[key], lib)
        assert same_bytes(host(st[key]), ref_st[key]), key
    # the state dict round trip keeps device arrays; a host gradient for a device parameter is refused
    opt_dev.load_state_dict(opt_dev.state_dict())
    if p_dev.device_type != "cpu":
        with pytest.raises(ValueError, match=f"gradient 0 is on 'cpu', its parameter on '{p_dev.device_type}'"):
            opt_dev.step([grads[0]])
        bad = opt_cpu.state_dict()
        with pytest.raises(ValueError, match=f"is on device 'cpu', expected '{p_dev.device_type}'"):
            opt_dev.load_state_dict(bad)


def _managed_memory_or_skip(lib):
    addr = lib.cget_managed_ptr(64)
    if not addr:
        pytest.skip(f"backend {lib.name} has no managed memory for paged state: {lib.last_error()}")
    lib.checked.kbit_free_managed_ptr(addr)


@pytest.mark.parametrize("name", ["PagedAdamW8bit", "LAMB32bit", "Lion8bit"])
def test_other_optimizer_paths_equal_the_cpu_backend(lib, cpu, rng, name):
    """Paged state (numpy arrays over the backend's managed memory, prefetched to its device), the
    update-norm clipping of LAMB (the parameter's norm from a host copy), a one-state 8-bit optimizer."""
    need(lib, "optim8")
    if name.startswith("Paged"):
        _managed_memory_or_skip(lib)
    n = 100_000 if name.startswith("Paged") else 5000  # paged from 1e5 elements; 8-bit from 4096
    p0 = (rng.standard_normal(n) * 0.1).astype(np.float32)
    grads = [(rng.standard_normal(n) * 0.01).astype(np.float32) for _ in range(2)]
    cls = getattr(kbit.optim, name)
    p_dev, p_cpu = dev(lib, p0), p0.copy()
    opt_dev, opt_cpu = cls([p_dev]), cls([p_cpu])
    for g in grads:
        opt_dev.step([dev(lib, g)])
        opt_cpu.step([g])
        assert same_bytes(p_dev.numpy(), p_cpu)
    st, ref_st = opt_dev.state[0], opt_cpu.state[0]
    assert st.keys() == ref_st.keys()
    for key, v in st.items():
        if isinstance(v, (np.ndarray, kbit.DeviceArray)):
            if st.get("paged") and key in ("state1", "state2"):
                assert isinstance(v, np.ndarray)  # managed memory, host-addressable by contract
            else:
                assert_device_output(v, lib)
            assert same_bytes(v if isinstance(v, np.ndarray) else host(v), ref_st[key]), key


def test_a_forked_child_gets_an_error_not_a_hang(lib, rng):
    """A device context does not survive fork(): the OpenCL backend answers the child with
    KBIT_STATUS_DEVICE_ERROR and a sentence; the parent's memory stays usable."""
    if lib.name != "opencl":
        pytest.skip(f"the fork rule checked here is the OpenCL backend's (this is {lib.name})")
    x = dev(lib, rng.standard_normal(256).astype(np.float32))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the outcome through the pipe, never return into pytest
        try:
            F.quantize_4bit(x, quant_type="nf4")
            outcome = "no error"
        except kbit.KbitError as e:
            outcome = str(e)  # "KBIT_STATUS_...: function: sentence"
        except BaseException as e:  # noqa: BLE001 - anything else is the failure to report
            outcome = f"{type(e).__name__}: {e}"
        os.write(write, outcome.encode()[:4000])
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    outcome = os.read(read, 4096).decode()
    os.close(read)
    assert os.WEXITSTATUS(status) == 0
    assert outcome.startswith("KBIT_STATUS_DEVICE_ERROR") and "cannot be used after fork()" in outcome, outcome
    assert host(x).shape == (256,)  # the parent goes on
