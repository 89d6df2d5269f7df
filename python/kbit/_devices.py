"""Device dispatch: an array's device type picks the kbit backend that runs on it.

Arrays are recognised by duck typing, without importing torch or cupy unless the object is one:
  - numpy.ndarray                        -> device "cpu", pointer .ctypes.data, no stream;
  - kbit.DeviceArray                     -> the backend that allocated it (its `lib`), its pointer and
    stream; its device type is "cuda" for memory of the CUDA backend, else the backend's name;
  - a torch.Tensor                       -> its device type, data_ptr(), torch's current stream there;
  - anything with __cuda_array_interface__ (cupy, numba, ...) -> "cuda", its data pointer, and the
    stream it names (the interface's "stream" entry: 1 = legacy default, 2 = per-thread default).
The registry maps a device type to a backend name or path (`register_backend`); defaults: "cpu" ->
the CPU backend, "cuda" -> the CUDA backend, each opened through the loader by name.
"""
import sys
import threading

import ml_dtypes
import numpy as np

from . import _library

_registry = {"cpu": "cpu", "cuda": "cuda"}
_lock = threading.Lock()


def register_backend(device_type, name_or_path):
    """Makes `device_type` ("cpu", "cuda", "xpu", a vendor's) run on the kbit backend `name_or_path`
    (a backend name the loader finds, or the path of a libkbit_<name>.so). Calling code is unchanged:
    every function that receives an array of that device type now calls this backend."""
    if not isinstance(device_type, str) or not device_type:
        raise TypeError("register_backend: device_type must be a non-empty str")
    lib = _library.load(name_or_path)  # fail here, not at the first call
    with _lock:
        _registry[device_type] = name_or_path
    return lib


def registered_backends():
    with _lock:
        return dict(_registry)


def _serves_cuda(lib):
    """Whether `lib` is the CUDA backend: the backend named "cuda", or the library already opened for
    the spec registered for device type "cuda" (a vendor's CUDA backend, register_backend)."""
    if lib.name == "cuda":
        return True
    with _lock:
        spec = _registry.get("cuda")
    return spec is not None and _library.loaded(spec) is lib


def backend_for(device_type):
    """The kbit.Library that serves arrays of `device_type`."""
    with _lock:
        spec = _registry.get(device_type)
    if spec is None:
        raise ValueError(f"kbit: no backend registered for device type {device_type!r} "
                         f"(kbit.register_backend({device_type!r}, name_or_path))")
    return _library.load(spec)


# ---- array adapters ----------------------------------------------------------------------------

def _torch_dtype_name(dt):
    return str(dt).replace("torch.", "")


class _NumpyAdapter:
    device_type = staticmethod(lambda x: "cpu")

    @staticmethod
    def matches(x):
        return isinstance(x, np.ndarray)

    @staticmethod
    def info(x):
        return x.ctypes.data, x.shape, x.dtype, x.flags.c_contiguous, None

    @staticmethod
    def empty(like, shape, dtype, lib):
        return np.empty(shape, dtype=dtype)

    @staticmethod
    def from_numpy(like, arr, lib):
        return arr

    @staticmethod
    def to_numpy(x, lib):
        return x


class _DeviceArrayAdapter:
    """kbit.DeviceArray: memory of the backend that allocated it, which runs the call (whatever the
    registry says); outputs are DeviceArrays of that backend and stream, copies go through its
    kbit_memcpy (the memory need not be host-addressable: an OpenCL backend's is not)."""

    @staticmethod
    def matches(x):
        return isinstance(x, DeviceArray)

    @staticmethod
    def device_type(x):
        return x.device_type

    @staticmethod
    def lib(x):
        return x.lib

    @staticmethod
    def info(x):
        return x.ptr, x.shape, x.dtype, True, x.stream

    @staticmethod
    def empty(like, shape, dtype, lib):
        return DeviceArray(like.lib, shape, dtype, stream=like.stream)

    @staticmethod
    def from_numpy(like, arr, lib):
        return DeviceArray.from_numpy(like.lib, arr, stream=like.stream)

    @staticmethod
    def to_numpy(x, lib):
        return x.numpy()


class _TorchAdapter:
    @staticmethod
    def matches(x):
        # Subclasses count too (torch.nn.Parameter, bitsandbytes' Int8Params and Params4bit). torch not
        # imported: x cannot be a tensor, and this package never imports torch itself.
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(x, torch.Tensor)

    @staticmethod
    def device_type(x):
        return x.device.type

    @staticmethod
    def info(x):
        torch = sys.modules["torch"]
        stream = None
        if x.device.type == "cuda":
            stream = torch.cuda.current_stream(x.device).cuda_stream
        return x.data_ptr(), tuple(x.shape), np.dtype(_dtype_from_name(_torch_dtype_name(x.dtype))), \
            x.is_contiguous(), stream

    @staticmethod
    def empty(like, shape, dtype, lib):
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name), device=like.device)

    @staticmethod
    def from_numpy(like, arr, lib):
        torch = sys.modules["torch"]
        if arr.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16).to(like.device)
        return torch.from_numpy(np.ascontiguousarray(arr)).to(like.device)

    @staticmethod
    def to_numpy(x, lib):
        torch = sys.modules["torch"]
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
        return x.cpu().numpy()


class _CudaArrayAdapter:
    """Any other object with __cuda_array_interface__; outputs are cupy arrays for cupy inputs, otherwise
    kbit.DeviceArray objects allocated by the backend (kbit_device_malloc)."""

    @staticmethod
    def matches(x):
        return hasattr(x, "__cuda_array_interface__")

    device_type = staticmethod(lambda x: "cuda")

    @staticmethod
    def info(x):
        cai = x.__cuda_array_interface__
        dtype = _cai_dtype(x, cai)
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        contiguous = strides is None or tuple(strides) == _c_strides(shape, dtype.itemsize)
        return cai["data"][0], shape, dtype, contiguous, cai.get("stream")

    @staticmethod
    def _is_cupy(x):
        return type(x).__module__.split(".")[0] == "cupy"

    @classmethod
    def empty(cls, like, shape, dtype, lib):
        if cls._is_cupy(like):
            cupy = sys.modules["cupy"]
            with like.device:
                return cupy.empty(shape, dtype=dtype)
        return DeviceArray(lib, shape, dtype, stream=cls.info(like)[4])

    @classmethod
    def from_numpy(cls, like, arr, lib):
        if cls._is_cupy(like):
            cupy = sys.modules["cupy"]
            with like.device:
                return cupy.asarray(arr)
        return DeviceArray.from_numpy(lib, arr, stream=cls.info(like)[4])

    @classmethod
    def to_numpy(cls, x, lib):
        if cls._is_cupy(x):
            return x.get()
        if lib is None:  # a caller without a context (checkpoint, QuantState.from_dict)
            lib = backend_for("cuda")
        ptr, shape, dtype, contiguous, _ = cls.info(x)
        if not contiguous:
            raise ValueError("kbit: cannot copy a non-contiguous device array to the host")
        out = np.empty(shape, dtype=dtype)
        lib.checked.kbit_memcpy(out.ctypes.data, ptr, out.nbytes, 2)  # KBIT_MEMCPY_DEVICE_TO_HOST
        return out


# DeviceArray before __cuda_array_interface__: a CUDA DeviceArray offers both, and belongs to its lib.
_ADAPTERS = (_NumpyAdapter, _DeviceArrayAdapter, _TorchAdapter, _CudaArrayAdapter)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _dtype_from_name(name):
    if name == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _cai_dtype(x, cai):
    dt = getattr(x, "dtype", None)
    if dt is not None:
        try:
            return np.dtype(dt)
        except TypeError:
            pass
    return np.dtype(cai["typestr"])


def adapter(x):
    for a in _ADAPTERS:
        if a.matches(x):
            return a
    raise TypeError(f"kbit: unsupported array type {type(x).__module__}.{type(x).__name__} (expected a numpy "
                    "array, a kbit.DeviceArray, a torch tensor or an object with __cuda_array_interface__)")


def to_host(x):
    """A numpy array of x's values: x itself for numpy, a copy through its adapter for device arrays
    (torch, cupy, kbit.DeviceArray, __cuda_array_interface__), np.asarray() for anything else (lists,
    scalars)."""
    if isinstance(x, np.ndarray):
        return x
    for a in _ADAPTERS:
        if a.matches(x):
            return a.to_numpy(x, None)
    return np.asarray(x)


class DeviceArray:
    """Memory of a kbit backend (kbit_device_malloc of `lib`), C-contiguous. Returned for inputs that
    are neither numpy, torch nor cupy arrays, and made by `DeviceArray.from_numpy(lib, arr)` for any
    backend (`lib = kbit.load("opencl")`). The functional API and the optimizers run a call on
    DeviceArrays on their own `lib`, whatever is registered for a device type, and return DeviceArrays
    of that backend and stream.

    The memory need not be addressable from the host (an OpenCL backend's is not): `.numpy()` copies it
    with kbit_memcpy, and np.asarray() of a DeviceArray is a TypeError rather than a wrong object
    array. __cuda_array_interface__ (cupy.asarray / numba can wrap it) exists only for memory of the
    CUDA backend (`device_type` "cuda"); elsewhere hasattr() is False. `stream` is the stream of the
    call that produced it (its interface's "stream" entry), so later calls on it run on the same
    stream."""

    def __init__(self, lib, shape, dtype, stream=None):
        import ctypes
        self.lib = lib
        self.stream = stream
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        # "cuda" for memory of the CUDA backend (it meets cupy / numba / torch CUDA arrays), else the
        # backend's own name ("cpu": host memory, which numpy arrays may be mixed with).
        self.device_type = "cuda" if _serves_cuda(lib) else lib.name
        ptr = ctypes.c_void_p()
        lib.checked.kbit_device_malloc(ctypes.byref(ptr), max(self.nbytes, 1))
        self.ptr = ptr.value

    @classmethod
    def from_numpy(cls, lib, arr, stream=None):
        """A copy of the host array `arr` in memory of backend `lib` (kbit_memcpy)."""
        arr = np.ascontiguousarray(arr)
        d = cls(lib, arr.shape, arr.dtype, stream)
        if arr.nbytes:
            lib.checked.kbit_memcpy(d.ptr, arr.ctypes.data, arr.nbytes, 1)  # KBIT_MEMCPY_HOST_TO_DEVICE
        return d

    @property
    def __cuda_array_interface__(self):
        if self.device_type != "cuda":
            raise AttributeError(f"kbit.DeviceArray on backend {self.lib.name!r} is not CUDA memory: it has no "
                                 "__cuda_array_interface__ (copy it with .numpy())")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": self.stream}

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"kbit.DeviceArray on backend {self.lib.name!r}: implicit conversion to a numpy array is "
                        "not allowed; use .numpy()")

    def numpy(self):
        """A host copy: waits for the array's stream, then kbit_memcpy (synchronous with the host)."""
        out = np.empty(self.shape, dtype=self.dtype)
        if self.nbytes:
            if self.stream is not None:  # work on another stream than the copy's may still be running
                self.lib.checked.kbit_stream_synchronize(self.stream)
            self.lib.checked.kbit_memcpy(out.ctypes.data, self.ptr, self.nbytes, 2)  # DEVICE_TO_HOST
        return out

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize != self.nbytes:
            raise ValueError(f"cannot reshape {self.shape} to {tuple(shape)}")
        view = object.__new__(DeviceArray)
        view.__dict__.update(self.__dict__)
        view.shape = tuple(int(s) for s in shape)
        view._base = self  # keeps the allocation alive
        return view

    def __del__(self):
        if "_base" not in self.__dict__ and getattr(self, "ptr", None):
            try:
                self.lib.kbit_device_free(self.ptr)
            except Exception:  # interpreter shutdown
                pass
            self.ptr = None

    def __repr__(self):
        return f"<kbit.DeviceArray {self.shape} {self.dtype} on {self.lib.name}>"


class Ctx:
    """Everything a functional call needs about its arrays: the backend, the stream, and how to
    allocate outputs and move small tables like the inputs."""

    def __init__(self, x):
        self.adapter = adapter(x)
        self.like = x
        self.device_type = self.adapter.device_type(x)
        # A kbit.DeviceArray names its backend; other arrays find theirs by device type (the registry).
        own = getattr(self.adapter, "lib", None)
        self.lib = own(x) if own is not None else backend_for(self.device_type)
        self.info = self.adapter.info(x)  # (ptr, shape, dtype, contiguous, stream) of the input
        self.stream = self.info[4]

    def empty(self, shape, dtype):
        return self.adapter.empty(self.like, tuple(shape), dtype, self.lib)

    def from_numpy(self, arr):
        return self.adapter.from_numpy(self.like, arr, self.lib)

    def to_numpy(self, x):
        return adapter(x).to_numpy(x, self.lib)
