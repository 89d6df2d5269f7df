"""Declarations for cffi's ABI mode, generated from the function lists (abi/*.def)."""
from . import _abi


def cdef(loader=False):
    """C declarations that `cffi.FFI().cdef()` accepts: the ABI types (kbit_status, kbit_half,
    kbit_bf16, kbit_context) and every function of the core, 4-bit, 8-bit and optimizer interfaces
    (version functions included). loader=True adds the loader API of libkbit.so, its handles and
    records as opaque types.

        ffi = cffi.FFI(); ffi.cdef(kbit.cdef()); lib = ffi.dlopen(str(kbit.library_dir() / "libkbit.so"))
    """
    lines = [_abi.CDEF_TYPES]
    if loader:
        lines.append(_abi.CDEF_LOADER_TYPES)
    for iface in _abi.INTERFACES + ((_abi.LOADER,) if loader else ()):
        lines += [_abi.cdef_declaration(fn) for fn in _abi.functions(iface)]
    return "\n".join(lines) + "\n"
