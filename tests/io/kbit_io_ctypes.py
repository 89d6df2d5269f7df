"""ctypes declarations of libkbit_io.so's C API (include/kbit/kbit_io.h), shared by the Python-driven tests
(tests/io/test_writer.py, tests/cli/test_quantize.py). load(path) returns the library with argtypes set."""
import ctypes as C


class Tensor(C.Structure):
    _fields_ = [("size", C.c_size_t), ("name", C.c_char_p), ("dtype_name", C.c_char_p), ("dtype", C.c_int32),
                ("ndim", C.c_int32), ("shape", C.POINTER(C.c_int64)), ("numel", C.c_uint64), ("nbytes", C.c_uint64),
                ("data", C.c_void_p), ("file_offset", C.c_uint64), ("shard", C.c_size_t)]


class Quant(C.Structure):
    _fields_ = [("size", C.c_size_t), ("prefix", C.c_char_p), ("format", C.c_int32), ("blocksize", C.c_int32),
                ("ndim", C.c_int32), ("shape", C.POINTER(C.c_int64)), ("numel", C.c_uint64), ("dtype", C.c_int32),
                ("dtype_name", C.c_char_p), ("nested", C.c_bool), ("aligned", C.c_bool), ("storage_dtype", C.c_int32),
                ("weight", C.c_void_p), ("weight_bytes", C.c_uint64), ("absmax", C.c_void_p),
                ("absmax_dtype", C.c_int32), ("blocks", C.c_uint64), ("absmax_bytes", C.c_uint64),
                ("quant_map", C.c_void_p), ("nested_absmax", C.c_void_p), ("nested_blocks", C.c_uint64),
                ("nested_quant_map", C.c_void_p), ("nested_offset", C.c_float), ("nested_blocksize", C.c_int32),
                ("scb", C.c_void_p), ("weight_name", C.c_char_p),
                ("parameter", C.c_bool), ("experts", C.c_uint64)]  # io 1.3


P = C.c_void_p


def load(path):
    lib = C.CDLL(path)
    lib.kbit_io_open.argtypes = [C.c_char_p, C.POINTER(P)]
    lib.kbit_io_close.argtypes = [P]
    lib.kbit_io_last_error_message.restype = C.c_char_p
    lib.kbit_io_tensor_count.argtypes = [P]
    lib.kbit_io_tensor_count.restype = C.c_size_t
    lib.kbit_io_tensor_at.argtypes = [P, C.c_size_t, C.POINTER(C.POINTER(Tensor))]
    lib.kbit_io_quant_count.argtypes = [P]
    lib.kbit_io_quant_count.restype = C.c_size_t
    lib.kbit_io_quant_describe.argtypes = [P, C.c_size_t, C.POINTER(C.POINTER(Quant))]
    lib.kbit_io_quant_find.argtypes = [P, C.c_char_p, C.POINTER(C.POINTER(Quant))]
    lib.kbit_io_writer_create.argtypes = [C.c_char_p, C.POINTER(P)]
    lib.kbit_io_writer_metadata.argtypes = [P, C.c_char_p, C.c_char_p]
    lib.kbit_io_writer_add.argtypes = [P, C.c_char_p, C.c_int32, C.c_int32, C.POINTER(C.c_int64), C.c_void_p]
    lib.kbit_io_writer_add_quant.argtypes = [P, C.POINTER(Quant)]
    lib.kbit_io_writer_finish.argtypes = [P]
    lib.kbit_io_writer_discard.argtypes = [P]
    lib.kbit_io_writer_declare.argtypes = [P, C.c_char_p, C.c_int32, C.c_int32, C.POINTER(C.c_int64)]
    lib.kbit_io_writer_declare_quant.argtypes = [P, C.POINTER(Quant)]
    lib.kbit_io_interface_version.restype = C.c_uint32
    return lib


IO_DTYPE = {"bool": 0, "uint8": 1, "int8": 2, "int16": 3, "uint16": 4, "float16": 5, "bfloat16": 6, "int32": 7,
            "uint32": 8, "float32": 9, "float64": 10, "int64": 11, "uint64": 12, "float8_e5m2": 13,
            "float8_e4m3fn": 14}
SUCCESS, INVALID = 0, 1


def raw(ptr, nbytes):
    """The bytes at a pointer into a mapping."""
    return C.string_at(ptr, nbytes) if nbytes else b""
