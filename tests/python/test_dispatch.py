"""Device dispatch: the array picks the backend (numpy -> cpu, __cuda_array_interface__ / torch CUDA ->
cuda), and kbit.register_backend() plugs another .so in without changing the calling code."""
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import kbit
from kbit import _devices

from conftest import subprocess_env


class FakeCudaArray:
    """A "device" array as cupy or numba present one, backed by host memory so that a copy of the CPU
    backend registered as the "cuda" backend can run on it."""

    def __init__(self, host, stream=7, strides=None):
        self.host = host
        self.stream = stream
        self.strides = strides

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.host.shape, "typestr": self.host.dtype.str, "data": (self.host.ctypes.data, False),
                "version": 3, "strides": self.strides, "stream": self.stream}


@pytest.fixture
def registry():
    saved = _devices.registered_backends()
    yield
    with _devices._lock:
        _devices._registry.clear()
        _devices._registry.update(saved)


def backend_copy(tmp_path, name):
    dst = tmp_path / f"libkbit_{name}.so"
    shutil.copy(kbit.load("cpu").path, dst)
    return dst


class Spy:
    """Counts the checked calls of one library and records their arguments."""

    def __init__(self, lib, names):
        self.calls = []
        for name in names:
            real = getattr(lib.checked, name)

            def wrapper(*args, _real=real, _name=name):
                self.calls.append((_name, args))
                return _real(*args)
            setattr(lib.checked, name, wrapper)
        self.lib, self.names = lib, names

    def remove(self):
        for name in self.names:
            self.lib.checked.__dict__.pop(name, None)


def test_numpy_arrays_run_on_the_cpu_backend():
    assert _devices.Ctx(np.zeros(4, np.float32)).lib is kbit.load("cpu")
    assert kbit.backend_for("cpu").name == "cpu"


def test_registered_backend_is_the_one_called(tmp_path, registry):
    path = backend_copy(tmp_path, "acme")
    lib = kbit.register_backend("cpu", str(path))
    assert lib.path == str(path) and lib.name == "acme" and lib.backend_name() == "cpu"
    assert kbit.backend_for("cpu") is lib and kbit.registered_backends()["cpu"] == str(path)
    mapped = [line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(".so")]
    assert str(path) in mapped
    spy, original = Spy(lib, ["kbit_quantize_4bit"]), Spy(kbit.load("cpu"), ["kbit_quantize_4bit"])
    try:
        w = np.linspace(-1, 1, 1024, dtype=np.float32)
        packed, state = kbit.quantize_4bit(w, quant_type="nf4")  # unchanged calling code
        assert [c[0] for c in spy.calls] == ["kbit_quantize_4bit"] and original.calls == []
    finally:
        spy.remove(), original.remove()
    kbit.register_backend("cpu", "cpu")
    assert np.array_equal(kbit.quantize_4bit(w, quant_type="nf4")[0], packed)


def test_cuda_array_interface_objects_dispatch_to_cuda(tmp_path, registry, rng):
    lib = kbit.register_backend("cuda", str(backend_copy(tmp_path, "fakecuda")))
    w = rng.standard_normal((32, 128)).astype(np.float16)
    fake = FakeCudaArray(w, stream=7)
    ptr, shape, dtype, contiguous, stream = _devices.adapter(fake).info(fake)
    assert (ptr, shape, dtype, contiguous, stream) == (w.ctypes.data, (32, 128), np.float16, True, 7)
    spy = Spy(lib, ["kbit_quantize_4bit", "kbit_dequantize_4bit", "kbit_nested_absmax_quantize"])
    try:
        packed, state = kbit.quantize_4bit(fake, quant_type="nf4", compress_statistics=True)
        out = kbit.dequantize_4bit(packed, state)
    finally:
        spy.remove()
    assert [c[0] for c in spy.calls] == ["kbit_quantize_4bit", "kbit_nested_absmax_quantize", "kbit_dequantize_4bit"]
    assert all(c[1][-1] == 7 for c in spy.calls)  # the array's stream is passed on
    assert isinstance(packed, kbit.DeviceArray) and isinstance(out, kbit.DeviceArray) and packed.lib is lib
    assert "__cuda_array_interface__" in dir(out) and out.shape == (32, 128)
    ref_packed, ref_state = kbit.quantize_4bit(w, quant_type="nf4", compress_statistics=True)
    assert np.array_equal(packed.numpy(), ref_packed)
    assert np.array_equal(out.numpy(), kbit.dequantize_4bit(ref_packed, ref_state))
    assert state.offset == ref_state.offset


def test_device_mismatch_and_strided_device_arrays(tmp_path, registry):
    kbit.register_backend("cuda", str(backend_copy(tmp_path, "fakecuda")))
    w = np.ones((4, 64), np.float32)
    packed, state = kbit.quantize_4bit(w)
    with pytest.raises(ValueError, match="dequantize_4bit: A is on device 'cpu', the input on 'cuda'|"
                                         "quant_state.absmax is on device 'cpu', the input on 'cuda'"):
        kbit.dequantize_4bit(FakeCudaArray(packed), state)
    strided = FakeCudaArray(w, strides=(8, 4))
    with pytest.raises(ValueError, match="quantize_4bit: A must be C-contiguous"):
        kbit.quantize_4bit(strided)


def test_cuda_without_a_backend_says_so(registry):
    with _devices._lock:
        _devices._registry["cuda"] = "nosuchcuda"
    with pytest.raises(kbit.KbitError, match="nosuchcuda"):
        kbit.quantize_4bit(FakeCudaArray(np.ones(64, np.float32)))


def test_register_backend_validates(registry):
    with pytest.raises(TypeError, match="device_type must be a non-empty str"):
        kbit.register_backend("", "cpu")
    with pytest.raises(kbit.KbitError):
        kbit.register_backend("xpu", "nosuchvendor")
    assert "xpu" not in kbit.registered_backends()
    assert kbit.register_backend("xpu", "cpu") is kbit.load("cpu")
    assert kbit.backend_for("xpu") is kbit.load("cpu")
    with pytest.raises(ValueError, match="no backend registered for device type 'npu'"):
        kbit.backend_for("npu")


def test_importing_kbit_imports_neither_torch_nor_cupy():
    code = ("import sys, numpy as np, kbit; kbit.quantize_4bit(np.ones(64, np.float32)); "
            "print([m for m in ('torch', 'cupy') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_torch_tensors_use_data_ptr_and_the_current_stream(tmp_path, registry, monkeypatch, rng):
    from fake_modules import make_torch
    torch = make_torch(stream=9)
    monkeypatch.setitem(sys.modules, "torch", torch)
    lib = kbit.register_backend("cuda", str(backend_copy(tmp_path, "faketorch")))
    w = rng.standard_normal((16, 128)).astype(np.float32)
    t = torch.tensor_on(w.astype(ml_dtypes.bfloat16))
    ptr, shape, dtype, contiguous, stream = _devices.adapter(t).info(t)
    assert ptr == t.data_ptr() and shape == (16, 128) and dtype.name == "bfloat16" and contiguous and stream == 9
    spy = Spy(lib, ["kbit_quantize_4bit", "kbit_dequantize_4bit"])
    try:
        packed, state = kbit.quantize_4bit(t, quant_type="nf4")
        out = kbit.dequantize_4bit(packed, state)
    finally:
        spy.remove()
    assert [c[1][-1] for c in spy.calls] == [9, 9]
    assert isinstance(packed, torch.Tensor) and isinstance(out, torch.Tensor) and out.device.type == "cuda"
    assert isinstance(state.code, torch.Tensor) and str(out.dtype) == "torch.bfloat16"
    ref_packed, ref_state = kbit.quantize_4bit(t.a, quant_type="nf4")
    assert np.array_equal(packed.a, ref_packed) and np.array_equal(out.a.view(np.uint16),
                                                                   kbit.dequantize_4bit(ref_packed, ref_state).view(np.uint16))
    cpu_tensor = torch.from_numpy(w)
    assert _devices.Ctx(cpu_tensor).lib is kbit.backend_for("cpu")  # a torch CPU tensor runs on the CPU backend

    class Int8Params(torch.Tensor):  # a subclass defined outside torch (bitsandbytes' parameters)
        pass
    Int8Params.__module__ = "bitsandbytes.nn.modules"
    param = Int8Params(w, _devices_cpu())
    assert _devices.adapter(param) is _devices._TorchAdapter and _devices.Ctx(param).lib is kbit.backend_for("cpu")


def _devices_cpu():
    from fake_modules import FakeDevice
    return FakeDevice("cpu")


def test_cupy_arrays_get_cupy_outputs(tmp_path, registry, monkeypatch, rng):
    from fake_modules import make_cupy
    cupy = make_cupy(stream=5)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    kbit.register_backend("cuda", str(backend_copy(tmp_path, "fakecupy")))
    x = cupy.asarray((rng.standard_normal((4, 64)) * 3).astype(np.float16))
    q, stats, cols = kbit.int8_vectorwise_quant(x, threshold=6.0)
    assert all(isinstance(a, cupy.ndarray) for a in (q, stats, cols))
    ref_q, ref_stats, ref_cols = kbit.int8_vectorwise_quant(x.get(), threshold=6.0)
    assert np.array_equal(q.get(), ref_q) and np.array_equal(stats.get(), ref_stats)
    assert np.array_equal(cols.get(), ref_cols)
