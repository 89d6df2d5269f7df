"""Minimal stand-ins for torch and cupy (neither is installed for the tests): just the attributes
kbit's adapters use, over host numpy memory, so that a copy of the CPU backend registered for "cuda"
can run on them. Installed into sys.modules only for the test that needs them."""
import types

import ml_dtypes
import numpy as np


def _np(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"

    def __eq__(self, other):
        return isinstance(other, FakeDtype) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class FakeDevice:
    def __init__(self, type_):
        self.type = type_

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def make_torch(stream=9):
    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, a, device):
            self.a, self.device = a, device

        def data_ptr(self):
            return self.a.ctypes.data

        @property
        def shape(self):
            return self.a.shape

        @property
        def dtype(self):
            return getattr(torch, self.a.dtype.name)

        def is_contiguous(self):
            return self.a.flags.c_contiguous

        def cpu(self):
            return Tensor(self.a, FakeDevice("cpu"))

        def numpy(self):
            return self.a

        def view(self, dtype):
            return Tensor(self.a.view(_np(dtype.name)), self.device)

        def to(self, device):
            return Tensor(self.a.copy(), device)

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    for name in ("float32", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64"):
        setattr(torch, name, FakeDtype(name))
    torch.empty = lambda shape, dtype, device: Tensor(np.empty(shape, _np(dtype.name)), device)
    torch.from_numpy = lambda a: Tensor(a, FakeDevice("cpu"))
    torch.cuda = types.SimpleNamespace(current_stream=lambda device: types.SimpleNamespace(cuda_stream=stream))
    torch.tensor_on = lambda a, device="cuda": Tensor(a, FakeDevice(device))
    return torch


def make_cupy(stream=5):
    cupy = types.ModuleType("cupy")

    class ndarray:
        def __init__(self, a):
            self.a = a
            self.device = FakeDevice("cuda")

        @property
        def dtype(self):
            return self.a.dtype

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.a.shape, "typestr": self.a.dtype.str, "data": (self.a.ctypes.data, False),
                    "version": 3, "strides": None, "stream": stream}

        def get(self):
            return self.a.copy()

        def reshape(self, *shape):
            return ndarray(self.a.reshape(*shape))

    ndarray.__module__ = "cupy"
    cupy.ndarray = ndarray
    cupy.empty = lambda shape, dtype: ndarray(np.empty(shape, dtype))
    cupy.asarray = lambda a: ndarray(np.array(a))
    return cupy
