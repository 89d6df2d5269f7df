"""kbit.cdef(): declarations cffi's ABI mode accepts, used for real calls."""
import numpy as np
import pytest

import kbit
from kbit import _abi

cffi = pytest.importorskip("cffi")


@pytest.fixture(scope="module")
def ffi_lib():
    ffi = cffi.FFI()
    ffi.cdef(kbit.cdef())
    return ffi, ffi.dlopen(str(kbit.library_dir() / "libkbit.so"))


def test_cdef_declares_every_interface_function_and_the_abi_types():
    text = kbit.cdef()
    for t in ("typedef int32_t kbit_status;", "kbit_half", "kbit_bf16", "typedef struct kbit_context kbit_context;"):
        assert t in text
    ffi = cffi.FFI()
    ffi.cdef(text)
    for iface in _abi.INTERFACES:
        for fn in _abi.functions(iface):
            assert f" {fn['name']}(" in text


def test_every_declared_function_resolves_in_libkbit(ffi_lib):
    ffi, lib = ffi_lib
    for iface in _abi.INTERFACES:
        for fn in _abi.functions(iface):
            ct = ffi.typeof(getattr(lib, fn["name"]))
            assert len(ct.args) == len(fn["params"]), fn["name"]
    assert ffi.sizeof("kbit_half") == 2 and ffi.sizeof("kbit_bf16") == 2 and ffi.sizeof("kbit_status") == 4


def test_function_types_match_the_lists(ffi_lib):
    ffi, lib = ffi_lib
    f = getattr(lib, "cquantize_blockwise_bf16_nf4")
    ct = ffi.typeof(f)
    assert ct.kind == "function" and ct.result.cname == "int32_t"
    assert [a.cname for a in ct.args] == ["float *", "kbit_bf16 *", "float *", "unsigned char *", "int", "int"]
    assert [a.cname for a in ffi.typeof(lib.cadam_8bit_blockwise_grad_fp32).args][-2:] == ["_Bool", "int"]


def test_quantize_and_dequantize_nf4_through_cffi_match_the_functional_api(ffi_lib, rng):
    ffi, lib = ffi_lib
    w = rng.standard_normal(4096 + 100).astype(np.float32)
    n, bs = w.size, 64
    blocks = (n + bs - 1) // bs
    absmax = np.empty(blocks, np.float32)
    packed = np.empty((n + 1) // 2, np.uint8)
    fp = lambda a, t: ffi.cast(t, a.ctypes.data)  # noqa: E731
    assert lib.cquantize_blockwise_fp32_nf4(ffi.NULL, fp(w, "float*"), fp(absmax, "float*"),
                                            fp(packed, "unsigned char*"), bs, n) == 0
    ref_packed, ref_state = kbit.quantize_4bit(w, blocksize=bs, quant_type="nf4")
    assert np.array_equal(packed, ref_packed.reshape(-1))
    assert np.array_equal(absmax, ref_state.absmax)
    out = np.empty(n, np.float32)
    assert lib.cdequantize_blockwise_fp32_nf4(ffi.NULL, fp(packed, "unsigned char*"), fp(absmax, "float*"),
                                              fp(out, "float*"), bs, n, ffi.NULL) == 0
    assert np.array_equal(out.view(np.uint32), kbit.dequantize_4bit(ref_packed, ref_state).view(np.uint32))


def test_cffi_status_and_error_message(ffi_lib):
    ffi, lib = ffi_lib
    status = lib.kbit_quantize_4bit(2, 7, ffi.NULL, ffi.NULL, ffi.NULL, 64, 0, ffi.NULL)
    assert ffi.string(lib.kbit_status_string(status)) == b"KBIT_STATUS_INVALID_ARGUMENT"
    assert b"dtype 7" in ffi.string(lib.kbit_last_error_message())


def test_cffi_half_types_and_int8_calls(ffi_lib, rng):
    ffi, lib = ffi_lib
    a = (rng.standard_normal((3, 40)) * 2).astype(np.float16)
    out = np.empty((3, 40), np.int8)
    stats = np.empty(3, np.float32)
    assert lib.cint8_vector_quant(ffi.cast("kbit_half*", a.ctypes.data), ffi.cast("int8_t*", out.ctypes.data),
                                  ffi.cast("float*", stats.ctypes.data), 0.0, 3, 40, ffi.NULL) == 0
    ref_out, ref_stats, _ = kbit.int8_vectorwise_quant(a)
    assert np.array_equal(out, ref_out) and np.array_equal(stats, ref_stats)


def test_cdef_with_the_loader_api():
    ffi = cffi.FFI()
    ffi.cdef(kbit.cdef(loader=True))
    lib = ffi.dlopen(str(kbit.library_dir() / "libkbit.so"))
    b = ffi.new("kbit_backend**")
    assert lib.kbit_loader_open(b"cpu", b) == 0
    assert lib.kbit_loader_4bit_table(b[0]) != ffi.NULL
    assert lib.kbit_loader_close(b[0]) == 0
    assert lib.kbit_loader_interface_version() >> 16 == 1
