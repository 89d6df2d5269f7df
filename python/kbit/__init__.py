"""kbit: the k-bit quantization kernels of the bitsandbytes family behind a stable C ABI, for Python.

    import kbit
    lib = kbit.load()                 # libkbit.so: every C function under its bitsandbytes/kbit name
    packed, state = kbit.quantize_4bit(w, quant_type="nf4")   # bitsandbytes.functional on numpy

Needs neither torch nor a GPU. See docs/python.md for the whole tour.
"""
from . import _abi
from ._cffi import cdef
from ._devices import DeviceArray, backend_for, register_backend, registered_backends
from ._library import KbitError, Library, library_dir, load
from .functional import (QuantState, create_dynamic_map, dequantize_4bit, dequantize_blockwise, dequantize_fp4,
                         dequantize_nf4, gemm_4bit_grouped, gemv_4bit, get_4bit_type, int8_linear_matmul, int8_mm_dequant,
                         int8_outlier_matmul, int8_vectorwise_quant, quantize_4bit, quantize_blockwise)
from . import functional, optim, checkpoint, torchao  # noqa: E402  (submodules, also as kbit.<name>)

__version__ = _abi.RELEASE_VERSION  # kbit_core.h, as the wheel's metadata
