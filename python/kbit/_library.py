"""Opening kbit through its loader libkbit.so with ctypes: the default backend (libkbit.so's own
trampolines) or one backend by name or path (kbit_loader_open and that backend's function tables)."""
import ctypes
import os
import threading
from pathlib import Path

from . import _abi

LOADER_FILE = "libkbit.so"
_PACKAGE_DIR = Path(__file__).resolve().parent


class KbitError(RuntimeError):
    """A kbit function returned a non-zero kbit_status.

    Attributes: function (C name), status (int), status_name ("KBIT_STATUS_INVALID_ARGUMENT"), message
    (kbit_last_error_message() of the library right after the call)."""

    def __init__(self, function, status, status_name, message):
        self.function = function
        self.status = status
        self.status_name = status_name
        self.message = message
        # The message names the function already ("cquantize_blockwise_fp32_nf4: blocksize 48 is ...").
        super().__init__(f"{status_name}: {message}" if message else f"{function} returned {status_name}")


def library_dir():
    """Directory holding libkbit.so and its backends, in this order: $KBIT_LIBRARY_DIR; the copy
    installed inside the package (kbit/_lib); the build tree of a source checkout (<repo>/build/lib)."""
    env = os.environ.get("KBIT_LIBRARY_DIR")
    if env:
        if not (Path(env) / LOADER_FILE).is_file():
            raise OSError(f"kbit: KBIT_LIBRARY_DIR={env} does not contain {LOADER_FILE}")
        return Path(env)
    for d in (_PACKAGE_DIR / "_lib", _PACKAGE_DIR.parent.parent / "build" / "lib"):
        if (d / LOADER_FILE).is_file():
            return d
    raise OSError(f"kbit: {LOADER_FILE} not found in {_PACKAGE_DIR / '_lib'} (installed package) nor in "
                  f"{_PACKAGE_DIR.parent.parent / 'build' / 'lib'} (source checkout); set KBIT_LIBRARY_DIR")


def loader_path():
    return library_dir() / LOADER_FILE


def _cublas_wheel_dir():
    """lib/ of the nvidia-cublas wheel (the Python package nvidia.cublas, which torch's CUDA wheels
    install), or None where it is not installed."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("nvidia.cublas")
    except (ImportError, ValueError):
        return None
    for d in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(d) / "lib").is_dir():
            return Path(d) / "lib"
    return None


# The CUDA backend opens cuBLASLt (its int8 GEMM) when first asked for it: from the library search path,
# else from the directory KBIT_CUBLASLT_DIR names (src/cuda/igemmlt.cpp). A value the user set stays.
if "KBIT_CUBLASLT_DIR" not in os.environ:
    _wheel_lib = _cublas_wheel_dir()
    if _wheel_lib is not None:
        os.environ["KBIT_CUBLASLT_DIR"] = str(_wheel_lib)


class _Candidate(ctypes.Structure):
    # kbit_loader_candidate (kbit_loader.h): the leading members this module reads.
    _fields_ = [("size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("source", ctypes.c_int32), ("stage", ctypes.c_int32), ("verdict", ctypes.c_int32),
                ("score", ctypes.c_int32), ("reason", ctypes.c_char_p)]


def _table_struct(iface):
    fields = [("size", ctypes.c_size_t), ("version", ctypes.c_uint32)]
    fields += [(fn["name"], ctypes.c_void_p) for fn in _abi.table_functions(iface)]
    return type(f"kbit_{iface}_table", (ctypes.Structure,), {"_fields_": fields})


_TABLES = {iface: _table_struct(iface) for iface in _abi.INTERFACES}
_loader_lock = threading.Lock()
_loader_cdll = None


def _loader():
    """libkbit.so with the loader API typed from abi/kbit_loader.def (one handle per process)."""
    global _loader_cdll
    with _loader_lock:
        if _loader_cdll is None:
            cdll = ctypes.CDLL(str(loader_path()))
            for fn in _abi.functions(_abi.LOADER) + _abi.functions("core"):
                f = getattr(cdll, fn["name"])
                f.restype, f.argtypes = _abi.signature(fn)
            _loader_cdll = cdll
        return _loader_cdll


class _Checked:
    """lib.checked.<name>(...): calls lib.<name> and raises KbitError for a non-zero status."""

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if name not in self._lib._status_functions:
            return fn
        lib = self._lib

        def call(*args):
            status = fn(*args)
            if status != 0:
                raise lib.error(name, status)
            return status

        call.__name__ = name
        self.__dict__[name] = call
        return call


class InterfaceMissing(KbitError, AttributeError):
    """A function of an interface the backend does not implement (also an AttributeError, so
    hasattr(lib, name) is False)."""


_IFACE_OF = {fn["name"]: iface for iface in _abi.INTERFACES for fn in _abi.functions(iface)}


class Library:
    """One kbit backend reached through ctypes.

    Every interface function is an attribute under its C name (`lib.cquantize_blockwise_fp32_nf4`), a
    ctypes function whose argtypes/restype come from abi/*.def: data pointers are c_void_p (numpy's
    `.ctypes.data`, `c_void_p(tensor.data_ptr())` or None), and functions return their kbit_status as
    an int, as bitsandbytes' callers expect. `lib.checked.<name>` raises KbitError instead.
    Attributes: name (backend name given by the loader), path (its file), versions ({iface: (major,
    minor)}), backend_versions (the same of the backend that runs the calls: for trampolines the
    default backend's, which can be older than libkbit.so's own), trampolines (True for libkbit.so's
    own exports)."""

    def __init__(self, functions, name, path, versions, trampolines, handle=None, backend_versions=None):
        self._status_functions = set()
        for iface_fns in functions.values():
            for fn, cfunc in iface_fns:
                restype, argtypes = _abi.signature(fn)
                cfunc.restype, cfunc.argtypes = restype, argtypes
                setattr(self, fn["name"], cfunc)
                if _abi.returns_status(fn):
                    self._status_functions.add(fn["name"])
        self.name = name
        self.path = path
        self.versions = versions
        self.backend_versions = versions if backend_versions is None else backend_versions
        self.trampolines = trampolines
        self._handle = handle
        self.checked = _Checked(self)

    def __repr__(self):
        kind = "trampolines of libkbit.so" if self.trampolines else "explicit"
        return f"<kbit.Library {self.name} ({self.path}), {kind}>"

    def __getattr__(self, name):  # only for names that are not attributes
        iface = _IFACE_OF.get(name)
        if iface is None or name.startswith("__"):
            raise AttributeError(f"kbit.Library has no attribute {name!r}")
        raise InterfaceMissing(name, 4, "KBIT_STATUS_NOT_IMPLEMENTED",
                               f"{name}: backend {self.__dict__.get('name')} ({self.__dict__.get('path')}) does not "
                               f"implement the {iface} interface")

    def has(self, name):
        return name in self.__dict__

    def backend_name(self):
        return self.kbit_backend_name().decode()

    def last_error(self):
        msg = self.kbit_last_error_message()
        return msg.decode(errors="replace") if msg else ""

    def status_name(self, status):
        """The ABI's name of a status (kbit_core.h), whatever the backend's kbit_status_string says."""
        if status in _abi.STATUS_NAMES:
            return _abi.STATUS_NAMES[status]
        s = self.kbit_status_string(status)
        return s.decode() if s else f"status {status}"

    def error(self, function, status):
        return KbitError(function, status, self.status_name(status), self.last_error())

    def check(self, status, function):
        if status != 0:
            raise self.error(function, status)


def _candidate_of(backend):
    rec = ctypes.cast(_loader().kbit_loader_backend_candidate(backend), ctypes.POINTER(_Candidate))
    return rec.contents.name.decode(), rec.contents.path.decode()


def _versions_from_cdll(cdll):
    out = {}
    for iface in _abi.INTERFACES:
        try:
            f = getattr(cdll, f"kbit_{iface}_interface_version")
        except AttributeError:
            continue
        f.restype, f.argtypes = ctypes.c_uint32, []
        v = f()
        out[iface] = (v >> 16, v & 0xFFFF)
    return out


def _open_trampolines():
    loader = _loader()
    # Choosing the default here reports a missing backend at load() instead of at the first call.
    backend = ctypes.c_void_p()
    status = loader.kbit_loader_default(ctypes.byref(backend))
    if status != 0:
        raise KbitError("kbit_loader_default", status, _abi.STATUS_NAMES.get(status, str(status)),
                        loader.kbit_last_error_message().decode())
    name, _ = _candidate_of(backend)
    cdll = ctypes.CDLL(str(loader_path()))  # a CDLL of its own: its function objects carry our argtypes
    functions = {iface: [(fn, getattr(cdll, fn["name"])) for fn in _abi.functions(iface)]
                 for iface in _abi.INTERFACES}
    return Library(functions, name, str(loader_path()), _versions_from_cdll(cdll), True,
                   backend_versions=_table_versions(loader, backend))


def _table_versions(loader, backend):
    """{iface: (major, minor)} of an opened backend's accepted interfaces (its tables' versions)."""
    versions = {}
    for iface in _abi.INTERFACES:
        ptr = getattr(loader, f"kbit_loader_{iface}_table")(backend)
        if ptr:
            table = ctypes.cast(ptr, ctypes.POINTER(_TABLES[iface])).contents
            versions[iface] = (table.version >> 16, table.version & 0xFFFF)
    return versions


def _open_backend(spec):
    loader = _loader()
    backend = ctypes.c_void_p()
    status = loader.kbit_loader_open(os.fsencode(spec), ctypes.byref(backend))
    if status != 0:
        raise KbitError("kbit_loader_open", status, _abi.STATUS_NAMES.get(status, str(status)),
                        loader.kbit_last_error_message().decode())
    name, path = _candidate_of(backend)
    functions, versions = {}, {}
    for iface in _abi.INTERFACES:
        ptr = getattr(loader, f"kbit_loader_{iface}_table")(backend)
        if not ptr:
            continue  # the backend lacks this interface
        table = ctypes.cast(ptr, ctypes.POINTER(_TABLES[iface])).contents
        versions[iface] = (table.version >> 16, table.version & 0xFFFF)
        fns = []
        for fn in _abi.table_functions(iface):
            member = getattr(_TABLES[iface], fn["name"])
            if table.size < member.offset + member.size:
                continue  # a loader older than this package's lists: the member does not exist
            restype, argtypes = _abi.signature(fn)
            fns.append((fn, ctypes.CFUNCTYPE(restype, *argtypes)(getattr(table, fn["name"]))))
        functions[iface] = fns
    return Library(functions, name, path, versions, False, handle=backend)


_cache = {}
_cache_lock = threading.Lock()


def loaded(backend=None):
    """The kbit.Library load(backend) returned before, or None when it has not been opened (never
    opens one)."""
    key = None if backend is None else os.fspath(backend)
    with _cache_lock:
        return _cache.get(key)


def load(backend=None):
    """Returns a kbit.Library.

    backend=None: libkbit.so's trampolines, which forward every call to the loader's default backend
    (KBIT_BACKEND, else the highest probe score). A name ("cpu", "cuda", a vendor's) or a path to a
    backend file: kbit_loader_open() and that backend's function tables. Libraries are cached: the
    same argument returns the same object. Raises KbitError when the loader cannot open the backend."""
    key = None if backend is None else os.fspath(backend)
    with _cache_lock:
        lib = _cache.get(key)
        if lib is None:
            lib = _open_trampolines() if key is None else _open_backend(key)
            _cache[key] = lib
        return lib
