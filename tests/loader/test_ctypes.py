#!/usr/bin/env python3
"""ctest loader.ctypes: libkbit.so used from Python exactly like bitsandbytes' native library, through
ctypes, with a fake backend chosen by KBIT_BACKEND (so the outcome does not depend on the machine).
Usage: test_ctypes.py PATH/TO/libkbit.so FAKES_DIR"""
import ctypes
import os
import sys

lib_path, fakes = sys.argv[1], sys.argv[2]
os.environ["KBIT_BACKEND_PATH"] = fakes
os.environ["KBIT_BACKEND"] = "missingfn"
lib = ctypes.CDLL(lib_path)
lib.kbit_backend_name.restype = ctypes.c_char_p
lib.kbit_last_error_message.restype = ctypes.c_char_p
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


check(lib.kbit_backend_name() == b"missingfn", "the default backend is the one KBIT_BACKEND names")
# bitsandbytes-style calls, return value ignored or read as an int (kbit_status).
code = (ctypes.c_float * 16)()
absmax = (ctypes.c_float * 1)()
out = (ctypes.c_float * 64)()
packed = (ctypes.c_ubyte * 32)()
status = lib.cdequantize_blockwise_fp32_nf4(code, packed, absmax, out, ctypes.c_int(64), ctypes.c_int(64), None)
check(status == 4, f"a function the backend lacks returns KBIT_STATUS_NOT_IMPLEMENTED (got {status})")
check(lib.kbit_last_error_message() ==
      f"cdequantize_blockwise_fp32_nf4: not implemented by backend missingfn ({fakes}/libkbit_missingfn.so)".encode(),
      "its message names the function and the backend")
status = lib.cquantize_blockwise_fp32_nf4(None, out, absmax, packed, ctypes.c_int(64), ctypes.c_int(64))
check(status == 0, f"a function the backend has is forwarded (got {status})")
ptr = ctypes.c_void_p()
check(lib.kbit_device_malloc(ctypes.byref(ptr), ctypes.c_size_t(128)) == 0 and ptr.value, "kbit_device_malloc")
check(lib.kbit_device_free(ptr) == 0, "kbit_device_free")
if failures:
    print("FAILED:", *failures, sep="\n  ")
    sys.exit(1)
print("ctypes: all checks passed")
