"""The C ABI as data: the function lists abi/kbit_<iface>.def and the interface registry
abi/interfaces.def, read at import time by kbit._abidef, turned into ctypes signatures and cffi
declarations. Nothing here restates a C signature by hand."""
import ctypes
import re
from pathlib import Path

from . import _abidef

_HERE = Path(__file__).resolve().parent
# Installed package: kbit/abi/ holds the lists, kbit/include/ the headers. Source checkout: the
# repository's own.
_CANDIDATES = ((_HERE / "abi", _HERE / "include"), (_HERE.parent.parent / "abi", _HERE.parent.parent / "include"))

LOADER = "loader"


def _locate():
    for abi_dir, include in _CANDIDATES:
        if (abi_dir / "interfaces.def").is_file() and (include / "kbit" / "kbit_core.h").is_file():
            return abi_dir, include
    raise ImportError("kbit: cannot find the ABI lists (interfaces.def, kbit_core.h) beside the package "
                      f"({_CANDIDATES[0][0]}) or in the source tree ({_CANDIDATES[1][0]})")


ABI_DIR, INCLUDE_DIR = _locate()
parse_def = _abidef.parse_def
# The backend interfaces, in loader table order, from their one list abi/interfaces.def.
INTERFACES = tuple(name for name, _, _ in _abidef.parse_interfaces(ABI_DIR / "interfaces.def"))


def functions(iface):
    """The parsed list of one interface: [{'minor', 'ret', 'name', 'params': [(type, name)], ...}],
    with the implicit version function of a backend interface first."""
    fns = parse_def(ABI_DIR / f"kbit_{iface}.def")
    version = {"minor": 0, "ret": "uint32_t", "name": f"kbit_{iface}_interface_version", "params": [],
               "args": [], "params_text": "void"}
    return [version] + fns


def table_functions(iface):
    """Members of kbit_<iface>_table after size and version, in order (no version function)."""
    return parse_def(ABI_DIR / f"kbit_{iface}.def")


def _status_names():
    """{value: "KBIT_STATUS_..."} from the #defines of kbit_core.h (numbered explicitly, only appended)."""
    text = (INCLUDE_DIR / "kbit" / "kbit_core.h").read_text()
    return {int(v): f"KBIT_STATUS_{n}" for n, v in re.findall(r"#define KBIT_STATUS_(\w+) (\d+)", text)}


STATUS_NAMES = _status_names()


def _core_define(name):
    text = (INCLUDE_DIR / "kbit" / "kbit_core.h").read_text()
    return int(re.search(rf"#define {name} (\d+)", text).group(1))


# The blockwise functions' blocksizes: the powers of two between kbit_core.h's bounds.
BLOCKSIZE_MIN, BLOCKSIZE_MAX = _core_define("KBIT_BLOCKSIZE_MIN"), _core_define("KBIT_BLOCKSIZE_MAX")
# 8bit 1.1: the 8-bit blockwise functions of a backend at that minor take blocksizes up to this.
BLOCKSIZE_MAX_8BIT = int(re.search(r"#define KBIT_8BIT_BLOCKSIZE_MAX (\d+)",
                                   (INCLUDE_DIR / "kbit" / "kbit_8bit.h").read_text()).group(1))
# 4bit 1.2: kbit_gemm_4bit_precision's classes, {"exact": KBIT_PRECISION_EXACT, "int8": KBIT_PRECISION_INT8}, and
# from 4bit 1.3 "bf16": KBIT_PRECISION_BF16.
PRECISIONS = {name.lower(): int(v) for name, v in re.findall(r"#define KBIT_PRECISION_(\w+) (\d+)",
                                                               (INCLUDE_DIR / "kbit" / "kbit_4bit.h").read_text())}
RELEASE_VERSION = re.search(r'#define KBIT_RELEASE_VERSION_STRING "([^"]+)"',
                            (INCLUDE_DIR / "kbit" / "kbit_core.h").read_text()).group(1)


# ---- ctypes ------------------------------------------------------------------------------------

_SCALARS = {
    "int": ctypes.c_int32, "int32_t": ctypes.c_int32, "kbit_status": ctypes.c_int32,
    "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32, "uint8_t": ctypes.c_uint8,
    "unsigned char": ctypes.c_ubyte, "size_t": ctypes.c_size_t, "float": ctypes.c_float,
    "bool": ctypes.c_bool, "void": None,
}


def _bare(ctype):
    return re.sub(r"\bconst\b", "", ctype).strip()


def ctypes_type(ctype):
    """ctypes type of a parameter or result spelled as in a .def list. Every data pointer is c_void_p,
    which accepts what bitsandbytes passes (c_void_p(tensor.data_ptr()), None, ctypes arrays, ints);
    `const char*` is c_char_p (bytes or str results)."""
    t = _bare(ctype)
    if "*" in t:
        return ctypes.c_char_p if t.replace(" ", "") == "char*" else ctypes.c_void_p
    if t not in _SCALARS:
        raise TypeError(f"kbit: no ctypes mapping for C type {ctype!r}")
    return _SCALARS[t]


def signature(fn):
    """(restype, [argtypes]) of one parsed function."""
    return ctypes_type(fn["ret"]), [ctypes_type(t) for t, _ in fn["params"]]


def returns_status(fn):
    return _bare(fn["ret"]) == "kbit_status"


# ---- cffi --------------------------------------------------------------------------------------

CDEF_TYPES = """\
typedef int32_t kbit_status;
typedef struct kbit_half { uint16_t bits; } kbit_half;
typedef struct kbit_bf16 { uint16_t bits; } kbit_bf16;
typedef struct kbit_context kbit_context;
"""

# The loader's own types, as opaque handles (their records are read through kbit.Library).
CDEF_LOADER_TYPES = """\
typedef struct kbit_backend kbit_backend;
typedef struct kbit_loader_report kbit_loader_report;
typedef struct kbit_loader_candidate kbit_loader_candidate;
typedef struct kbit_loader_interface_record kbit_loader_interface_record;
typedef struct kbit_core_table kbit_core_table;
typedef struct kbit_4bit_table kbit_4bit_table;
typedef struct kbit_8bit_table kbit_8bit_table;
typedef struct kbit_optim8_table kbit_optim8_table;
"""


def cdef_declaration(fn):
    return f"{fn['ret']} {fn['name']}({fn['params_text']});"
