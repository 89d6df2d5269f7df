"""bitsandbytes.functional on numpy arrays (bf16 through ml_dtypes), over the kbit C ABI.

Names, arguments and defaults follow bitsandbytes.functional (0.50): quantize_4bit / dequantize_4bit
with a QuantState, quantize_blockwise / dequantize_blockwise, create_dynamic_map, the LLM.int8 pieces
(int8_vectorwise_quant, int8_linear_matmul, int8_mm_dequant) and gemv_4bit. Differences: arrays must
already be C-contiguous (bitsandbytes copies; kbit raises ValueError rather than copy silently), and
blocksizes are 32 ... 4096 for every 4-bit and 8-bit function (kbit's ABI), and for the 8-bit
blockwise functions also 8192 and 16384 on a backend at 8bit 1.1 or later (the CPU backend).

Every array's device picks the backend (kbit._devices): numpy arrays run on the CPU backend, CUDA
arrays (torch, cupy, __cuda_array_interface__) on the backend registered for "cuda".
"""
import functools
import itertools
import json
import math
import numbers
import threading
from typing import NamedTuple

import ml_dtypes
import numpy as np

from . import _abi
from ._devices import Ctx, adapter, to_host

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_KBIT_DTYPE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(ml_dtypes.bfloat16): 2}
_SUFFIX = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(ml_dtypes.bfloat16): "bf16"}
_QUANT_TYPE = {"fp4": 1, "nf4": 2}  # KBIT_QUANT_FP4 / KBIT_QUANT_NF4
PRECISIONS = dict(_abi.PRECISIONS)  # gemv_4bit / gemm_4bit precision names: {"exact": 0, "bf16": 1, "int8": 2}
BLOCKSIZES = tuple(1 << e for e in range(_abi.BLOCKSIZE_MIN.bit_length() - 1, _abi.BLOCKSIZE_MAX.bit_length()))
# 8bit 1.1: the 8-bit blockwise blocksizes of a backend at that minor (1.0: BLOCKSIZES).
BLOCKSIZES_8BIT = tuple(1 << e for e in range(_abi.BLOCKSIZE_MIN.bit_length() - 1,
                                              _abi.BLOCKSIZE_MAX_8BIT.bit_length()))
NESTED_BLOCKSIZE = 256  # bitsandbytes' compress_statistics
_U8, _I8, _I32, _F32, _F16 = (np.dtype(t) for t in (np.uint8, np.int8, np.int32, np.float32, np.float16))


# ---- argument checks (before any C call) --------------------------------------------------------

def _dtype_names(dtypes):
    return ", ".join(d.name for d in dtypes)


def _check_blocksize(fn, blocksize, field="blocksize", allowed=BLOCKSIZES):
    if isinstance(blocksize, bool) or not isinstance(blocksize, (int, np.integer)) or blocksize not in allowed:
        raise ValueError(f"{fn}: {field} {blocksize!r} is not one of {', '.join(map(str, allowed))}")
    return int(blocksize)


def _blocksizes_8bit(lib):
    """The 8-bit blockwise blocksizes of the backend that runs lib's calls: 8bit 1.1 added 8192 and
    16384, which a 1.0 backend (the CUDA backend) never receives from here."""
    return BLOCKSIZES_8BIT if lib.backend_versions.get("8bit", (1, 0))[1] >= 1 else BLOCKSIZES


def _check_quant_type(fn, quant_type):
    if quant_type not in _QUANT_TYPE:
        raise ValueError(f"{fn}: quant_type {quant_type!r} is not 'fp4' or 'nf4'")
    return quant_type


class Arr(NamedTuple):
    ptr: int
    shape: tuple
    dtype: np.dtype

    @property
    def numel(self):
        return _numel(self.shape)


def _arg(ctx, fn, x, name, dtypes=None, numel=None, shape=None, writable=False):
    """Pointer, shape and dtype of argument `name` after checking device, dtype, contiguity, size and
    (for outputs) that numpy may write to it. One look at the array (its .ctypes costs microseconds)."""
    if x is None:
        raise TypeError(f"{fn}: {name} is required")
    if x is ctx.like:
        a, info = ctx.adapter, ctx.info
    else:
        try:
            a = adapter(x)
        except TypeError:
            raise TypeError(f"{fn}: {name} must be an array, not {type(x).__name__}") from None
        if a.device_type(x) != ctx.device_type:
            raise ValueError(f"{fn}: {name} is on device {a.device_type(x)!r}, the input on {ctx.device_type!r}")
        info = a.info(x)
    ptr, shp, dt, contiguous, _ = info
    if dtypes is not None and dt not in dtypes:
        raise TypeError(f"{fn}: {name} must have dtype {_dtype_names(dtypes)}, not {dt.name}")
    if not contiguous:
        raise ValueError(f"{fn}: {name} must be C-contiguous")
    if dtypes is not None and ptr % dt.alignment:  # docs/behaviour.md: a pointer needs its element type's alignment
        raise ValueError(f"{fn}: {name} is not aligned to its {dt.alignment}-byte {dt.name} elements")
    if writable and isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{fn}: {name} is read-only")
    shp = tuple(shp)
    if shape is not None and shp != tuple(shape):
        raise ValueError(f"{fn}: {name} has shape {shp}, expected {tuple(shape)}")
    if numel is not None and _numel(shp) != numel:
        raise ValueError(f"{fn}: {name} has {_numel(shp)} elements, expected {numel}")
    return Arr(ptr, shp, dt)


def _numel(shape):
    return math.prod(shape)


def _check_saved(where, x, dtype, numel=None, need="expected", device=None, writable=False):
    """(shape, dtype) of an array read back from a saved state (a checkpoint's tensor, an optimizer's
    state_dict), checked before the C side trusts its size: an array (dtype None: of any dtype, else
    exactly `dtype`, a TypeError otherwise, and aligned to it) with `numel` elements, C-contiguous, on
    `device` (None: any), and not read-only where the C side writes it."""
    try:
        a = adapter(x)
    except TypeError:
        raise TypeError(f"{where} must be an array, not {type(x).__name__}") from None
    ptr, shape, dt, contiguous, _ = a.info(x)
    if dtype is not None and dt != np.dtype(dtype):
        raise TypeError(f"{where} has dtype {dt.name}, expected {np.dtype(dtype).name}")
    if numel is not None and _numel(shape) != numel:
        raise ValueError(f"{where} has {_numel(shape)} elements, {need} {numel}")
    if not contiguous:
        raise ValueError(f"{where} must be C-contiguous")
    if dtype is not None and ptr % dt.alignment:  # the C side reads it as dt: misaligned is undefined
        raise ValueError(f"{where} is not aligned to its {dt.alignment}-byte {dt.name} elements")
    if device is not None and a.device_type(x) != device:
        raise ValueError(f"{where} is on device {a.device_type(x)!r}, expected {device!r}")
    if writable and isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{where} is read-only")
    return tuple(shape), dt


def _addr(x):
    """Pointer of an array this module allocated (no checks needed)."""
    return adapter(x).info(x)[0]


def _info(x):
    return adapter(x).info(x)


def _shape(x):
    return tuple(_info(x)[1])


def _dtype(x):
    return _info(x)[2]


def _int32(fn, what, v):
    if v > 2**31 - 1:
        raise ValueError(f"{fn}: {what} {v} exceeds 2^31 - 1 (a 32-bit size of the C function)")
    return v


def _blocks(n, blocksize):
    return (n + blocksize - 1) // blocksize


# ---- tables ---------------------------------------------------------------------------------------

def _fma32(a, i, c):
    """float32(a * i + c) rounded once, as fmaf: the product of a float32 and an integer below 2^24
    is exact in binary64, and so is the sum whenever the two terms' bits span at most 53 places
    (always for linspace(0.1, 1, count) with count <= 2^24); an inexact sum would round twice and is
    refused rather than returned."""
    p = float(a) * float(i)
    s = p + float(c)
    t = s - p
    if (p - (s - t)) + (float(c) - t) != 0.0:  # TwoSum: the rounding error of the binary64 sum
        raise ArithmeticError(f"kbit: fused multiply-add {a!r} * {i} + {c!r} is not exact in binary64")
    return np.float32(s)


def _linspace32(start, end, count):
    """torch.linspace(start, end, count) in float32 as torch 2.15's AVX2/AVX-512 CPU kernels evaluate it
    (the first half counts up from start, the second half down from end, each point one fused
    multiply-add: docs/behaviour.md §1.6), as a list of np.float32."""
    f32 = np.float32
    start, end = f32(start), f32(end)
    if count == 1:
        return [start]
    h = f32((end - start) / f32(count - 1))
    return [_fma32(h, i, start) if i < count // 2 else _fma32(-h, count - 1 - i, end) for i in range(count)]


@functools.lru_cache(maxsize=None)
def _dynamic_map_cached(signed, max_exponent_bits, total_bits):
    f32 = np.float32
    data = []
    non_sign_bits = total_bits - 1
    if not 1 <= max_exponent_bits <= non_sign_bits or total_bits > 8:
        raise ValueError(f"create_dynamic_map: needs 1 <= max_exponent_bits <= total_bits - 1 and total_bits <= 8, "
                         f"not max_exponent_bits={max_exponent_bits}, total_bits={total_bits}")
    extra = 2 ** (non_sign_bits - max_exponent_bits) - 1

    def means(count):
        # torch.linspace(0.1, 1, count), then pairwise midpoints.
        b = _linspace32(0.1, 1.0, count)
        return [f32((b[i] + b[i + 1]) / f32(2.0)) for i in range(count - 1)]

    def append(scale, ms):
        s = f32(scale)  # a Python double, rounded to float32 by torch before the multiply
        for m in ms:
            data.append(f32(s * m))
            if signed:
                data.append(f32(-(s * m)))

    for i in range(max_exponent_bits):
        count = 2 ** (i + non_sign_bits - max_exponent_bits) + 1 if signed else \
            2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1
        append(10.0 ** (-(max_exponent_bits - 1) + i), means(count))
    if extra > 0:
        append(10.0 ** (-(max_exponent_bits - 1) + max_exponent_bits - 1), means(extra + 1))
    data += [f32(0.0), f32(1.0)]
    if len(data) != 2 ** total_bits:
        raise ValueError(f"create_dynamic_map: signed={signed}, max_exponent_bits={max_exponent_bits}, "
                         f"total_bits={total_bits} gives {len(data)} values, not {2 ** total_bits}")
    data += [f32(0.0)] * (256 - len(data))
    out = np.array(sorted(data), dtype=np.float32)
    out.flags.writeable = False
    return out


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    """bitsandbytes' dynamic 8-bit map: 256 ascending float32 values, evaluated in float32 exactly as
    torch 2.15's AVX2/AVX-512 CPU linspace does (docs/behaviour.md §1.6). signed=True is the default code of quantize_blockwise
    and of the optimizers' first state; signed=False the second state's."""
    return _dynamic_map_cached(bool(signed), int(max_exponent_bits), int(total_bits)).copy()


def _frozen(values):
    out = np.array(values, dtype=np.float32)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=None)
def _linear_map_cached(signed, total_bits, add_zero):
    count = 2 ** total_bits
    if add_zero or total_bits < 8:
        count = 2 ** total_bits - 1 if signed else 2 ** total_bits  # one code kept for the zero
    values = _linspace32(-1.0 if signed else 0.0, 1.0, count)
    gap = 256 - len(values)
    if gap < 0:
        raise ValueError(f"create_linear_map: total_bits={total_bits} gives {len(values)} values, more than 256")
    half = len(values) // 2
    return _frozen(values[:half] + [np.float32(0.0)] * gap + values[half:])


def create_linear_map(signed=True, total_bits=8, add_zero=True):
    """bitsandbytes' linear map: torch.linspace(-1 or 0, 1) in float32 with the codes that fewer than
    8 bits (or add_zero) leave unused set to 0 in the middle; 256 values (not sorted when zeros are
    added, as there)."""
    if isinstance(total_bits, bool) or not isinstance(total_bits, (int, np.integer)) or not 1 <= total_bits <= 8:
        raise ValueError(f"create_linear_map: total_bits must be an integer from 1 to 8, not {total_bits!r}")
    return _linear_map_cached(bool(signed), int(total_bits), bool(add_zero)).copy()


def _ndtri(p):
    """The standard normal quantile (scipy.special.ndtri) in binary64: Acklam's rational approximation
    (relative error below 1.2e-9) refined by two Halley steps on math.erfc, accurate to a few units in
    the last place of a double for 0 < p < 1, far below the float32 rounding applied to the result."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if not 0.0 < p < 1.0:
        raise ValueError(f"create_normal_map: a quantile {p!r} outside (0, 1)")
    low = 0.02425
    if p < low or p > 1 - low:
        q = math.sqrt(-2 * math.log(p if p < low else 1 - p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        x = x if p < low else -x
    else:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    for _ in range(2):
        e = 0.5 * math.erfc(-x / math.sqrt(2.0)) - p
        u = e * math.sqrt(2.0 * math.pi) * math.exp(x * x / 2.0)
        x -= u / (1.0 + x * u / 2.0)
    return x


@functools.lru_cache(maxsize=None)
def _normal_map_cached(offset, use_extra_value):
    positive = _linspace32(offset, 0.5, 9 if use_extra_value else 8)[:-1]
    negative = _linspace32(offset, 0.5, 8)[:-1]
    zeros = 256 - len(positive) - len(negative)
    values = [np.float32(_ndtri(float(q))) for q in positive] + [np.float32(0.0)] * zeros + \
        [np.float32(-_ndtri(float(q))) for q in negative]
    values = np.sort(np.array(values, dtype=np.float32), kind="stable")
    return _frozen(values / values.max())


def create_normal_map(offset=0.9677083, use_extra_value=True):
    """bitsandbytes' NormalFloat map: normal quantiles at torch.linspace(offset, 0.5, 9 or 8) (float32
    points, quantiles rounded to float32), mirrored, 256 values sorted and divided by their maximum in
    float32. bitsandbytes computes the quantiles with scipy; kbit with _ndtri (no scipy)."""
    offset = float(offset)
    if not 0.5 < offset < 1.0:
        raise ValueError(f"create_normal_map: offset must be in (0.5, 1), not {offset!r}")
    return _normal_map_cached(offset, bool(use_extra_value)).copy()


@functools.lru_cache(maxsize=None)
def _fp8_map_cached(signed, exponent_bits, precision_bits, total_bits):
    bias = 2 ** (exponent_bits - 1)
    values = []
    for exponent in range(2 ** exponent_bits):
        for bits in itertools.product((0, 1), repeat=precision_bits):
            v = float(exponent != 0) + sum(bit * 2.0 ** -(i + 1) for i, bit in enumerate(bits))
            v *= 2.0 ** -bias if exponent == 0 else 2.0 ** -(exponent - bias - 1)  # subnormal / normal
            values += [v, -v] if signed else [v]
    values.sort()
    values += [0] * (256 - len(values))
    values.sort()  # Python's stable sort: the order of +0.0 and -0.0 is bitsandbytes'
    code = np.array(values, dtype=np.float32)
    code = code / code.max()
    # exponent_bits=8 overflows float32: inf / inf is a NaN with the machine's default bits; x86's
    # 0xFFC00000 (bitsandbytes' table there) on every machine, as kbit's outputs (behaviour.md §1.1).
    code.view(np.uint32)[np.isnan(code)] = 0xFFC00000
    return _frozen(code)


def create_fp8_map(signed=True, exponent_bits=5, precision_bits=2, total_bits=8):
    """bitsandbytes' floating-point map of sign, exponent_bits and precision_bits (bias 2^(e-1),
    subnormals at exponent 0), sorted, zero-padded to 256 and divided by its maximum in float32."""
    ints = (exponent_bits, precision_bits, total_bits)
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in ints):
        raise ValueError(f"create_fp8_map: bit counts must be non-negative integers, not {ints}")
    if exponent_bits + precision_bits != total_bits - (1 if signed else 0) or not 1 <= total_bits <= 8 \
            or exponent_bits < 1:
        raise ValueError(f"create_fp8_map: signed={bool(signed)}, exponent_bits={exponent_bits}, precision_bits="
                         f"{precision_bits} do not add up to total_bits={total_bits} (at most 8, one exponent bit)")
    return _fp8_map_cached(bool(signed), int(exponent_bits), int(precision_bits), int(total_bits)).copy()


# get_4bit_type's tables beside the kernels' (read from the library): bitsandbytes' literals, divided
# by their largest magnitude in float32.
_INT4 = (7, 6, 5, 4, 3, 2, 1, 0, 0, -1, -2, -3, -4, -5, -6, -7)
_AF4_64 = (1.0, 0.72424863, 0.55496234, 0.42563882, 0.31675666, 0.21961274, 0.12934483, 0.04273164, 0.0,
           -0.04934812, -0.14982478, -0.25607552, -0.3736951, -0.51243739, -0.69441008, -1.0)


@functools.lru_cache(maxsize=None)
def _quant_map_cached(quant_type):
    from ._devices import backend_for
    lib = backend_for("cpu")
    # The 16 table values, read from the library itself: nibbles 0..15 dequantized with scale 1.0.
    packed = np.array([0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF], dtype=np.uint8)
    absmax = np.ones(1, dtype=np.float32)
    out = np.empty(16, dtype=np.float32)
    lib.checked.kbit_dequantize_4bit(_QUANT_TYPE[quant_type], 0, packed.ctypes.data, absmax.ctypes.data,
                                     out.ctypes.data, 32, 16, None)
    if quant_type == "fp4":
        out[8] = 0.0  # bitsandbytes' get_4bit_type("fp4") holds +0.0 at index 8 (the kernels give -0.0)
    out.flags.writeable = False
    return out


def get_4bit_type(typename, device=None, blocksize=64):
    """The 16-entry float32 table of "nf4" or "fp4" (bitsandbytes' quant_state.code / quant_map), or of
    bitsandbytes' other 4-bit tables, "int4" (7 ... -7 over 7) and "af4" (AbnormalFloat, blocksize 64
    only: NotImplementedError otherwise, as there). device is accepted for bitsandbytes' signature and
    ignored (numpy). An unknown name raises NotImplementedError, as in bitsandbytes."""
    if typename in _QUANT_TYPE:
        return _quant_map_cached(typename).copy()
    if typename == "int4":
        values = np.array(_INT4, dtype=np.float32)
    elif typename == "af4":
        if blocksize != 64:
            raise NotImplementedError("get_4bit_type: 4-bit AbnormalFloat (af4) exists only for blocksize 64, "
                                      f"not {blocksize!r}")
        values = np.array(_AF4_64, dtype=np.float32)
    else:
        raise NotImplementedError(f"get_4bit_type: typename {typename!r} is not one of 'nf4', 'fp4', 'int4', 'af4'")
    return values / np.abs(values).max()


# ---- QuantState -------------------------------------------------------------------------------------

def _dtype_name(dt):
    return np.dtype(dt).name


def _dtype_from_name(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


class QuantState:
    """Everything needed to dequantize (bitsandbytes.functional.QuantState): absmax (fp32 block
    scales, or their uint8 codes when nested), shape and dtype of the original tensor, blocksize,
    code (4-bit: the 16-entry quant_map; 8-bit: the 256-entry map), quant_type, and for nested
    (compress_statistics) states the mean `offset` and `state2` (the scales' own QuantState)."""

    valid_quant_types = ("fp4", "nf4")
    valid_qs_type_keys = [f"bitsandbytes__{x}" for x in valid_quant_types]
    valid_qs_keys = ["absmax", "quant_map", "nested_absmax", "nested_quant_map", "quant_state", "quant_type",
                     "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype", "nested_offset"]

    def __init__(self, absmax, shape=None, code=None, blocksize=None, quant_type=None, dtype=None,
                 offset=None, state2=None):
        self.absmax = absmax
        self.shape = tuple(shape) if shape is not None else None
        self.code = code
        self.dtype = np.dtype(dtype) if dtype is not None else None
        self.blocksize = blocksize
        self.quant_type = quant_type
        self.offset = None if offset is None else np.float32(offset)
        self.state2 = state2
        self.nested = state2 is not None

    def __repr__(self):
        return (f"QuantState(quant_type={self.quant_type!r}, blocksize={self.blocksize}, dtype={_dtype_name(self.dtype) if self.dtype is not None else None}, "
                f"shape={self.shape}, nested={self.nested})")

    def as_dict(self, packed=False):
        """bitsandbytes' QuantState.as_dict. packed=True gives the checkpoint form: tensors plus the key
        "quant_state.bitsandbytes__<quant_type>" holding the JSON of the other fields as uint8."""
        qs = {"quant_type": self.quant_type, "absmax": self.absmax, "blocksize": self.blocksize,
              "quant_map": self.code, "dtype": _dtype_name(self.dtype),
              "shape": list(self.shape) if self.shape is not None else None}
        if self.nested:
            qs.update({"nested_absmax": self.state2.absmax, "nested_blocksize": self.state2.blocksize,
                       "nested_quant_map": self.state2.code, "nested_dtype": _dtype_name(self.state2.dtype),
                       "nested_offset": float(self.offset)})
        if not packed:
            return qs
        tensors = {k: v for k, v in qs.items() if not _is_plain(v)}
        plain = {k: v for k, v in qs.items() if _is_plain(v)}
        tensors["quant_state.bitsandbytes__" + self.quant_type] = pack_dict_to_tensor(plain)
        return tensors

    @classmethod
    def from_dict(cls, qs_dict):
        """bitsandbytes' QuantState.from_dict: accepts the packed form (one key containing
        "quant_state" whose last dotted part is bitsandbytes__nf4|fp4) or the unpacked fields; key
        prefixes are stripped to their last dotted component. Every field and tensor is checked here, so
        that a bad checkpoint fails on loading with a ValueError naming its key and field (TypeError for
        a tensor's dtype), not in a later call."""
        fn = "QuantState.from_dict"
        bad_keys = [k for k in qs_dict if not isinstance(k, str)]
        if bad_keys:
            raise TypeError(f"{fn}: keys must be str, not {type(bad_keys[0]).__name__} ({bad_keys[0]!r})")
        # "quant_state" looked for in the key's last two dotted parts only: a module prefix holding it
        # ("model.quant_state_proj.weight.absmax") does not make every tensor a quant_state item.
        qs_key = [k for k, v in qs_dict.items() if "quant_state" in ".".join(k.split(".")[-2:]) and not _is_plain(v)]
        if not qs_key and "quant_type" not in qs_dict:
            raise ValueError(f"{fn}: expected packed or unpacked quant_state items, found neither")
        if len(qs_key) > 1 or (qs_key and qs_key[0].split(".")[-1] not in cls.valid_qs_type_keys):
            raise ValueError(f"{fn}: expected one quant_state item ending in one of "
                             f"{cls.valid_qs_type_keys}, found {qs_key}")
        d = dict(qs_dict)
        src = qs_key[0] if qs_key else "quant_state"  # names the fields in messages
        if qs_key:
            _check_saved(f"{fn}: {src}", d[src], _U8)
            try:
                fields = unpack_tensor_to_dict(to_host(d.pop(src)))
            except (ValueError, RecursionError) as e:  # not UTF-8, not JSON
                raise ValueError(f"{fn}: {src} is not a JSON object ({e})") from None
            if not isinstance(fields, dict):
                raise ValueError(f"{fn}: {src} is not a JSON object but {type(fields).__name__}")
            suffix = src.rsplit("__", 1)[-1]
            if fields.get("quant_type") != suffix:  # the key names the type too: both must agree
                raise ValueError(f"{fn}: {src}: quant_type {fields.get('quant_type')!r} does not match the "
                                 f"key's {suffix!r}")
            d.update(fields)
        names = {k.split(".")[-1]: k for k in d}  # the tensors' full keys, for messages
        d = {k.split(".")[-1]: v for k, v in d.items()}
        nested = any(k in d for k in _NESTED_KEYS)
        required = ("quant_type", "absmax", "blocksize", "quant_map", "dtype", "shape")
        missing = [k for k in required + (_NESTED_KEYS if nested else ()) if k not in d]
        if missing:
            raise ValueError(f"{fn}: {src}: missing {', '.join(missing)}")
        where = f"{fn}: {src}"
        quant_type = _check_choice(where, "quant_type", d["quant_type"], cls.valid_quant_types)
        blocksize = _check_blocksize(where, d["blocksize"])
        dtype = _dtype_from_name(_check_choice(where, "dtype", d["dtype"], ("float32", "float16", "bfloat16")))
        shape = d["shape"]
        if not isinstance(shape, (list, tuple)) or not all(_is_size(s) for s in shape):
            raise ValueError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        shape = tuple(int(s) for s in shape)
        try:  # numpy's limits (64 dimensions; the byte size, zero dimensions counted as 1, in int64),
            np.broadcast_to(np.empty((), dtype), shape)  # checked without allocating: else no output
        except ValueError as e:
            raise ValueError(f"{where}: shape {list(shape)} is not the shape of a possible {dtype.name} array "
                             f"({e})") from None
        blocks = _blocks(_numel(shape), blocksize)
        need = f"the shape {list(shape)} with blocksize {blocksize} needs"
        _check_saved(f"{fn}: {names['quant_map']}", d["quant_map"], _F32, 16)
        _check_saved(f"{fn}: {names['absmax']}", d["absmax"], _U8 if nested else _F32, blocks, need)
        state2 = offset = None
        if nested:
            nested_blocksize = _check_blocksize(where, d["nested_blocksize"], "nested_blocksize")
            nested_dtype = _dtype_from_name(_check_choice(where, "nested_dtype", d["nested_dtype"], ("float32",)))
            offset = d["nested_offset"]  # a float32 added to every scale: NaN or inf would spread to all
            if isinstance(offset, bool) or not isinstance(offset, numbers.Real) or not abs(offset) <= _F32_MAX:
                raise ValueError(f"{where}: nested_offset {offset!r} is not a finite float32 number")
            _check_saved(f"{fn}: {names['nested_quant_map']}", d["nested_quant_map"], _F32, 256)
            _check_saved(f"{fn}: {names['nested_absmax']}", d["nested_absmax"], _F32,
                         _blocks(blocks, nested_blocksize), f"{blocks} blocks of absmax need")
            state2 = cls(absmax=d["nested_absmax"], blocksize=nested_blocksize, code=d["nested_quant_map"],
                         dtype=nested_dtype)
        return cls(quant_type=quant_type, absmax=d["absmax"], blocksize=blocksize, code=d["quant_map"],
                   dtype=dtype, shape=shape, offset=offset, state2=state2)


_NESTED_KEYS = ("nested_absmax", "nested_blocksize", "nested_quant_map", "nested_dtype", "nested_offset")
_F32_MAX = float(np.finfo(np.float32).max)


def _is_size(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0


def _check_choice(where, field, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{where}: {field} {value!r} is not one of {', '.join(allowed)}")
    return value


def _is_plain(v):
    return v is None or isinstance(v, (str, int, float, list, tuple, bool))


def pack_dict_to_tensor(source):
    """JSON (Python json.dumps, default separators) of a dict as a uint8 array, as bitsandbytes stores it."""
    return np.frombuffer(json.dumps(source).encode("utf-8"), dtype=np.uint8).copy()


def unpack_tensor_to_dict(tensor):
    """The dict pack_dict_to_tensor stored (a device array is copied to the host first)."""
    return json.loads(bytes(np.asarray(to_host(tensor), dtype=np.uint8).tobytes()).decode("utf-8"))


# ---- 4-bit ------------------------------------------------------------------------------------------

def _host_scalar(ctx, x):
    return np.float32(ctx.to_numpy(x).reshape(-1)[0])


def quantize_4bit(A, absmax=None, out=None, blocksize=None, compress_statistics=False, quant_type="fp4",
                  quant_storage=np.uint8):
    """Quantizes A (float32, float16 or bfloat16) to packed 4-bit NF4/FP4 in blocks of `blocksize`
    (default 64). Returns (packed uint8 [(n+1)//2, 1] (viewed as quant_storage), QuantState).
    compress_statistics=True stores the block scales nested (8-bit codes of absmax - mean, blocks of
    256), as bitsandbytes' Params4bit does by default."""
    fn = "quantize_4bit"
    ctx = Ctx(A)
    blocksize = _check_blocksize(fn, 64 if blocksize is None else blocksize)
    _check_quant_type(fn, quant_type)
    a = _arg(ctx, fn, A, "A", FLOAT_DTYPES)
    shape, dtype = a.shape, a.dtype
    n = a.numel
    blocks = _blocks(n, blocksize)
    storage = np.dtype(quant_storage)
    nbytes = (n + 1) // 2
    if storage != _U8 and (not isinstance(A, np.ndarray) or nbytes % storage.itemsize):
        raise ValueError(f"{fn}: quant_storage {storage.name} needs a numpy input whose packed size "
                         f"({nbytes} bytes) is a multiple of {storage.itemsize}")
    if absmax is None:
        absmax = ctx.empty((blocks,), _F32)
    am = _arg(ctx, fn, absmax, "absmax", (_F32,), numel=blocks, writable=True)
    if out is None:
        out = ctx.empty((nbytes, 1), _U8)
    o = _arg(ctx, fn, out, "out", (_U8,), numel=nbytes, writable=True)
    ctx.lib.checked.kbit_quantize_4bit(_QUANT_TYPE[quant_type], _KBIT_DTYPE[dtype], a.ptr, am.ptr, o.ptr,
                                       blocksize, n, ctx.stream)
    state = _state_4bit(ctx, absmax, shape, dtype, blocksize, quant_type, compress_statistics)
    if storage != _U8:
        out = out.reshape(-1).view(storage).reshape(-1, 1)  # bitsandbytes: [(n+1) // (2 * itemsize), 1]
    return out, state


def _nest(ctx, absmax, code, nested_blocksize):
    """(uint8 codes, nested_absmax, host offset) of fp32 block scales (kbit_nested_absmax_quantize)."""
    blocks = _numel(_shape(absmax))
    qabsmax = ctx.empty((blocks,), _U8)
    nested_absmax = ctx.empty((_blocks(blocks, nested_blocksize),), _F32)
    offset = ctx.empty((1,), _F32)
    ctx.lib.checked.kbit_nested_absmax_quantize(_addr(absmax), _addr(code), _addr(qabsmax),
                                                _addr(nested_absmax), _addr(offset), blocks,
                                                nested_blocksize, ctx.stream)
    return qabsmax, nested_absmax, _host_scalar(ctx, offset)


def _state_4bit(ctx, absmax, shape, dtype, blocksize, quant_type, compress_statistics):
    """QuantState of 4-bit data with fp32 scales `absmax`, nested when compress_statistics."""
    code = ctx.from_numpy(get_4bit_type(quant_type))
    if not compress_statistics:
        return QuantState(absmax=absmax, shape=shape, dtype=dtype, blocksize=blocksize, code=code,
                          quant_type=quant_type)
    code8 = ctx.from_numpy(create_dynamic_map(signed=True))
    qabsmax, nested_absmax, offset = _nest(ctx, absmax, code8, NESTED_BLOCKSIZE)
    state2 = QuantState(absmax=nested_absmax, code=code8, blocksize=NESTED_BLOCKSIZE, dtype=_F32)
    return QuantState(absmax=qabsmax, shape=shape, dtype=dtype, blocksize=blocksize, code=code,
                      quant_type=quant_type, offset=offset, state2=state2)


def _check_state(fn, state, four_bit, lib=None):
    if not isinstance(state, QuantState):
        raise TypeError(f"{fn}: quant_state must be a kbit.QuantState, not {type(state).__name__}")
    if four_bit:
        _check_quant_type(fn, state.quant_type)
        if state.shape is None or state.dtype is None:
            raise ValueError(f"{fn}: quant_state needs shape and dtype")
    if state.dtype is not None and state.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{fn}: quant_state.dtype must be {_dtype_names(FLOAT_DTYPES)}, not {state.dtype.name}")
    plain_8bit = not four_bit and lib is not None and not state.nested
    _check_blocksize(fn, state.blocksize, allowed=_blocksizes_8bit(lib) if plain_8bit else BLOCKSIZES)
    if state.nested:
        if state.offset is None:
            raise ValueError(f"{fn}: a nested quant_state needs offset")
        _check_blocksize(fn, state.state2.blocksize)


def _plain_absmax(ctx, fn, state, blocks):
    """(array, pointer) of the fp32 block scales of a state, restoring nested ones
    (kbit_nested_absmax_dequantize); keep the array alive while the pointer is used."""
    if not state.nested:
        return state.absmax, _arg(ctx, fn, state.absmax, "quant_state.absmax", (_F32,), numel=blocks).ptr
    s2 = state.state2
    q = _arg(ctx, fn, state.absmax, "quant_state.absmax", (_U8,), numel=blocks)
    c = _arg(ctx, fn, s2.code, "quant_state.state2.code", (_F32,), numel=256)
    na = _arg(ctx, fn, s2.absmax, "quant_state.state2.absmax", (_F32,), numel=_blocks(blocks, s2.blocksize))
    absmax = ctx.empty((blocks,), _F32)
    ptr = _addr(absmax)
    ctx.lib.checked.kbit_nested_absmax_dequantize(q.ptr, c.ptr, na.ptr, float(state.offset), ptr,
                                                  blocks, s2.blocksize, ctx.stream)
    return absmax, ptr


def dequantize_4bit(A, quant_state=None, absmax=None, out=None, blocksize=None, quant_type="fp4"):
    """Dequantizes packed 4-bit data to quant_state.dtype with quant_state.shape (or, without a
    quant_state, with `absmax` and `out` giving scales, shape and dtype)."""
    fn = "dequantize_4bit"
    ctx = Ctx(A)
    if quant_state is None:
        if absmax is None or out is None:
            raise ValueError(f"{fn}: without quant_state, absmax and out are required")
        quant_state = QuantState(absmax=absmax, shape=_shape(out), dtype=_dtype(out),
                                 blocksize=64 if blocksize is None else blocksize, quant_type=quant_type)
    _check_state(fn, quant_state, four_bit=True)
    n = _numel(quant_state.shape)
    a = _arg(ctx, fn, A, "A")
    if a.dtype.itemsize * a.numel != (n + 1) // 2:
        raise ValueError(f"{fn}: A holds {a.dtype.itemsize * a.numel} bytes, a packed tensor of shape "
                         f"{quant_state.shape} needs {(n + 1) // 2}")
    _absmax, absmax_ptr = _plain_absmax(ctx, fn, quant_state, _blocks(n, quant_state.blocksize))
    if out is None:
        out = ctx.empty(quant_state.shape, quant_state.dtype)
    o = _arg(ctx, fn, out, "out", (quant_state.dtype,), numel=n, writable=True)
    ctx.lib.checked.kbit_dequantize_4bit(_QUANT_TYPE[quant_state.quant_type], _KBIT_DTYPE[quant_state.dtype],
                                         a.ptr, absmax_ptr, o.ptr, quant_state.blocksize, n, ctx.stream)
    return out


def quantize_fp4(A, absmax=None, out=None, blocksize=None, compress_statistics=False, quant_storage=np.uint8):
    return quantize_4bit(A, absmax, out, blocksize, compress_statistics, "fp4", quant_storage)


def quantize_nf4(A, absmax=None, out=None, blocksize=None, compress_statistics=False, quant_storage=np.uint8):
    return quantize_4bit(A, absmax, out, blocksize, compress_statistics, "nf4", quant_storage)


def dequantize_nf4(A, quant_state=None, absmax=None, out=None, blocksize=None):
    return dequantize_4bit(A, quant_state, absmax, out, blocksize, "nf4")


def dequantize_fp4(A, quant_state=None, absmax=None, out=None, blocksize=None):
    return dequantize_4bit(A, quant_state, absmax, out, blocksize, "fp4")


def _weight_4bit(fn, A, state):
    """(ctx, A's Arr, N, K) of a product with the 4-bit weight W [N, K] of QuantState `state`."""
    if state is None:
        raise ValueError(f"{fn}: state cannot be None (pass the weight's QuantState)")
    ctx = Ctx(A)
    _check_state(fn, state, four_bit=True)
    if len(state.shape) != 2:
        raise ValueError(f"{fn}: the weight of quant_state must be 2-D [N, K], not {state.shape}")
    N, K = state.shape
    return ctx, _arg(ctx, fn, A, "A", FLOAT_DTYPES), N, K


def _precision(fn, precision):
    """The KBIT_PRECISION_* value of a precision name ("exact", "bf16" or "int8")."""
    _check_choice(fn, "precision", precision, tuple(PRECISIONS))
    return PRECISIONS[precision]


def _scale_pointers(ctx, fn, state, blocks, keep):
    """(absmax, absmax_8bit, absmax_code, absmax_offset) pointers of a 4-bit QuantState for cgemm_4bit and the
    kbit_* GEMMs: nested scales of 256-block nesting as they are, anything else as plain fp32 scales; the
    arrays whose pointers are passed go into `keep`."""
    if state.nested and state.state2.blocksize == NESTED_BLOCKSIZE:
        s2 = state.state2
        codes = _arg(ctx, fn, state.absmax, "quant_state.absmax", (_U8,), numel=blocks)
        scales = _arg(ctx, fn, s2.absmax, "quant_state.state2.absmax", (_F32,), numel=_blocks(blocks, s2.blocksize))
        table = _arg(ctx, fn, s2.code, "quant_state.state2.code", (_F32,), numel=256)
        offset = ctx.from_numpy(np.array([state.offset], dtype=np.float32))
        keep.append(offset)
        return scales.ptr, codes.ptr, table.ptr, _addr(offset)
    absmax, absmax_ptr = _plain_absmax(ctx, fn, state, blocks)
    keep.append(absmax)
    return absmax_ptr, None, None, None


def gemv_4bit(A, B, out=None, transposed_A=False, transposed_B=False, state=None, precision="exact"):
    """out = A @ W^T for one activation row A (K elements, any leading 1-sized dims) and the 4-bit
    weight W [N, K] given as its packed bytes B (bitsandbytes passes W.t() of the packed [(N*K+1)//2, 1]
    tensor; only the bytes matter) and its QuantState. Accumulates in fp32; out has A.shape[:-1] + (N,)
    and A's dtype. transposed_A / transposed_B are accepted for bitsandbytes compatibility and ignored,
    as there. precision (kbit addition): "exact" (default) is bitsandbytes' GEMV,
    cgemm_4bit_inference_naive_*; "int8" is kbit_gemm_4bit_precision's int8 class (4bit 1.2, behaviour.md
    §3.6: the row cut to int8 per 32 elements, integer dot products with the weights' int8 levels; K must be
    a multiple of 32; a backend at 4bit 1.1 raises KbitError with the loader's "not implemented" message);
    "bf16" its bf16 class (4bit 1.3, §3.7: weights and the row rounded to bf16, exact products, fp32 sums, as
    a bf16 matmul of the dequantized weight; a backend at 4bit 1.2 raises KbitError naming the value)."""
    fn = "gemv_4bit"
    if _precision(fn, precision) != PRECISIONS["exact"]:
        ctx, a, N, K = _weight_4bit(fn, A, state)
        if not a.shape or a.shape[-1] != K or _numel(a.shape) != K:
            raise ValueError(f"{fn}: A must be one row of {K} elements (shape (..., {K}) with leading dims 1), "
                             f"not {a.shape}")
        return gemm_4bit(A, B, state, out=out, precision=precision)
    ctx, a, N, K = _weight_4bit(fn, A, state)
    a_shape = a.shape
    if not a_shape or a_shape[-1] != K or _numel(a_shape) != K:
        raise ValueError(f"{fn}: A must be one row of {K} elements (shape (..., {K}) with leading dims 1), "
                         f"not {a_shape}")
    if K % 2:
        raise ValueError(f"{fn}: the inner dimension K = {K} must be even")
    _int32(fn, "N", N), _int32(fn, "K", K)
    b = _arg(ctx, fn, B, "B", (_U8,), numel=(N * K + 1) // 2)
    _absmax, absmax_ptr = _plain_absmax(ctx, fn, state, _blocks(N * K, state.blocksize))
    code = _arg(ctx, fn, state.code, "state.code", (_F32,), numel=16)
    dtype = a.dtype
    out_shape = a_shape[:-1] + (N,)
    if out is None:
        out = ctx.empty(out_shape, dtype)
    o = _arg(ctx, fn, out, "out", (dtype,), shape=out_shape, writable=True)
    name = f"cgemm_4bit_inference_naive_{_SUFFIX[dtype]}"
    getattr(ctx.lib.checked, name)(N, 1, K, a.ptr, b.ptr, absmax_ptr, code.ptr, o.ptr, N, (K + 1) // 2, N,
                                   state.blocksize, ctx.stream)
    return out


def gemm_4bit(A, B, state, bias=None, out=None, precision="exact"):
    """out = A @ W^T (+ bias) for any number of activation rows A [..., K] and the 4-bit weight W [N, K]
    given as its packed bytes B and its QuantState (kbit addition: bitsandbytes has this only as its
    op torch.ops.bitsandbytes.gemm_4bit). One call of cgemm_4bit_{fp32,fp16,bf16}: fp32 accumulation,
    nested block scales of 256-block nesting read as they are; bias has N elements of A's dtype; out has
    A.shape[:-1] + (N,) and A's dtype. precision: "exact" (default, cgemm_4bit), "int8", the int8 class of
    kbit_gemm_4bit_precision (4bit 1.2, behaviour.md §3.6; K a multiple of 32; a backend at 4bit 1.1 raises
    KbitError with the loader's "not implemented" message), or "bf16", its bf16 class (4bit 1.3, §3.7: any
    even K; a backend at 4bit 1.2 raises KbitError: "precision is 1, must be ...")."""
    fn = "gemm_4bit"
    kind = _precision(fn, precision)
    ctx, a, N, K = _weight_4bit(fn, A, state)
    if not a.shape or a.shape[-1] != K:
        raise ValueError(f"{fn}: A must have shape (..., {K}), not {a.shape}")
    if K % 2:
        raise ValueError(f"{fn}: the inner dimension K = {K} must be even")
    M = a.numel // K if K else _numel(a.shape[:-1])
    for what, v in (("N", N), ("K", K), ("rows of A", M)):
        _int32(fn, what, v)
    b = _arg(ctx, fn, B, "B", numel=None)
    if b.dtype.itemsize * b.numel != (N * K + 1) // 2:
        raise ValueError(f"{fn}: B holds {b.dtype.itemsize * b.numel} bytes, a packed [{N}, {K}] weight needs "
                         f"{(N * K + 1) // 2}")
    keep = []  # arrays whose pointers are passed
    ptrs = _scale_pointers(ctx, fn, state, _blocks(N * K, state.blocksize), keep)
    dtype = a.dtype
    bias_ptr = None if bias is None else _arg(ctx, fn, bias, "bias", (dtype,), numel=N).ptr
    out_shape = a.shape[:-1] + (N,)
    if out is None:
        out = ctx.empty(out_shape, dtype)
    o = _arg(ctx, fn, out, "out", (dtype,), shape=out_shape, writable=True)
    if kind == PRECISIONS["exact"]:
        getattr(ctx.lib.checked, f"cgemm_4bit_{_SUFFIX[dtype]}")(a.ptr, b.ptr, *ptrs, o.ptr, bias_ptr, M, N, K,
                                                                 state.blocksize, _QUANT_TYPE[state.quant_type],
                                                                 ctx.stream)
    else:
        ctx.lib.checked.kbit_gemm_4bit_precision(kind, _KBIT_DTYPE[dtype], a.ptr, b.ptr, *ptrs, o.ptr, bias_ptr, M,
                                                 N, K, state.blocksize, _QUANT_TYPE[state.quant_type], ctx.stream)
    return out


def gemm_4bit_grouped(A, B, state, ids, combine=None, out=None):
    """The grouped (mixture-of-experts) 4-bit GEMM, kbit_gemm_4bit_grouped (4bit 1.1): for the fused expert
    weight W [E, N, K] (packed bytes B and its QuantState of 3-D shape, quantized flat) and int32 ids
    [T, top_k], y[t, j] = x[t, j] @ W[ids[t, j]]^T with x[t, j] = A[t] when A is [T, K] (gate/up: every
    choice sees its token's row) or A[t, j] when A is [T, top_k, K] (down: one row per choice). Returns
    y [T, top_k, N] in A's dtype, or with combine (fp32 [T, top_k]) the weighted sums over j,
    out[t] = sum_j combine[t, j] * y[t, j] in fp32 (j in order, no FMA), rounded to A's dtype: [T, N].
    Equals, byte for byte, a loop of gemm_4bit over each expert's rows on the same backend. An id outside
    [0, E) raises KbitError and writes nothing; on device arrays the ids are checked on the device, so the
    error is raised at the next synchronization of the stream (kbit_stream_synchronize), not by this call."""
    fn = "gemm_4bit_grouped"
    if state is None:
        raise ValueError(f"{fn}: state cannot be None (pass the experts' QuantState)")
    ctx = Ctx(A)
    _check_state(fn, state, four_bit=True)
    if len(state.shape) != 3:
        raise ValueError(f"{fn}: the weight of quant_state must be 3-D [E, N, K], not {state.shape}")
    E, N, K = state.shape
    if K % 2:
        raise ValueError(f"{fn}: the inner dimension K = {K} must be even")
    i = _arg(ctx, fn, ids, "ids", (_I32,))
    if len(i.shape) != 2:
        raise ValueError(f"{fn}: ids must be 2-D [tokens, top_k], not {i.shape}")
    T, top_k = i.shape
    a = _arg(ctx, fn, A, "A", FLOAT_DTYPES)
    if a.shape == (T, K):
        rows = 1
    elif a.shape == (T, top_k, K):
        rows = top_k
    else:
        raise ValueError(f"{fn}: A must have shape ({T}, {K}) or ({T}, {top_k}, {K}) for ids of shape "
                         f"{i.shape}, not {a.shape}")
    b = _arg(ctx, fn, B, "B", numel=None)
    if b.dtype.itemsize * b.numel != E * N * K // 2:
        raise ValueError(f"{fn}: B holds {b.dtype.itemsize * b.numel} bytes, a packed [{E}, {N}, {K}] weight "
                         f"needs {E * N * K // 2}")
    blocks = _blocks(E * N * K, state.blocksize)
    keep = []  # arrays whose pointers are passed
    ptrs = _scale_pointers(ctx, fn, state, blocks, keep)
    dtype = a.dtype
    comb_ptr = None if combine is None else _arg(ctx, fn, combine, "combine", (_F32,), shape=(T, top_k)).ptr
    out_shape = (T, top_k, N) if combine is None else (T, N)
    if out is None:
        out = ctx.empty(out_shape, dtype)
    o = _arg(ctx, fn, out, "out", (dtype,), shape=out_shape, writable=True)
    ctx.lib.checked.kbit_gemm_4bit_grouped(_KBIT_DTYPE[dtype], a.ptr, rows, b.ptr, *ptrs, E, N, K, state.blocksize,
                                           _QUANT_TYPE[state.quant_type], i.ptr, T, top_k, comb_ptr, o.ptr,
                                           ctx.stream)
    return out


# ---- blockwise 8-bit ---------------------------------------------------------------------------

def quantize_blockwise(A, code=None, absmax=None, out=None, blocksize=4096, nested=False):
    """Blockwise dynamic 8-bit quantization of A (float32/float16/bfloat16): returns (uint8 codes with
    A's shape, QuantState). code defaults to create_dynamic_map(signed=True). nested=True quantizes
    the block scales again (8-bit, same blocksize), as bitsandbytes does."""
    fn = "quantize_blockwise"
    ctx = Ctx(A)
    # Nesting quantizes the scales in blocks of the same size (kbit_nested_absmax_quantize: <= 4096).
    blocksize = _check_blocksize(fn, blocksize, allowed=BLOCKSIZES if nested else _blocksizes_8bit(ctx.lib))
    a = _arg(ctx, fn, A, "A", FLOAT_DTYPES)
    shape, dtype = a.shape, a.dtype
    n = a.numel
    blocks = _blocks(n, blocksize)
    if code is None:
        code = ctx.from_numpy(create_dynamic_map(signed=True))
    c = _arg(ctx, fn, code, "code", (_F32,), numel=256)
    if absmax is None:
        absmax = ctx.empty((blocks,), _F32)
    am = _arg(ctx, fn, absmax, "absmax", (_F32,), numel=blocks, writable=True)
    if out is None:
        out = ctx.empty(shape, _U8)
    o = _arg(ctx, fn, out, "out", (_U8,), numel=n, writable=True)
    ctx.lib.checked.kbit_quantize_blockwise_8bit(_KBIT_DTYPE[dtype], c.ptr, a.ptr, am.ptr, o.ptr, blocksize, n,
                                                 ctx.stream)
    if nested:
        # As bitsandbytes: the scales are nested with the default (signed dynamic) map, whatever `code`.
        code2 = ctx.from_numpy(create_dynamic_map(signed=True))
        qabsmax, nested_absmax, offset = _nest(ctx, absmax, code2, blocksize)
        state2 = QuantState(absmax=nested_absmax, code=code2, blocksize=blocksize, dtype=_F32)
        state = QuantState(absmax=qabsmax, code=code, blocksize=blocksize, dtype=dtype, offset=offset, state2=state2)
    else:
        state = QuantState(absmax=absmax, code=code, blocksize=blocksize, dtype=dtype)
    return out, state


def dequantize_blockwise(A, quant_state=None, absmax=None, code=None, out=None, blocksize=4096, nested=False):
    """Inverse of quantize_blockwise: out[i] = code[A[i]] * absmax[i // blocksize] in A's shape and
    quant_state.dtype (or out's dtype; float32 without a quant_state)."""
    fn = "dequantize_blockwise"
    ctx = Ctx(A)
    if quant_state is None:
        if absmax is None:
            raise ValueError(f"{fn}: without quant_state, absmax is required")
        if code is None:
            code = ctx.from_numpy(create_dynamic_map(signed=True))
        quant_state = QuantState(absmax=absmax, code=code, blocksize=blocksize,
                                 dtype=_dtype(out) if out is not None else _F32)
    _check_state(fn, quant_state, four_bit=False, lib=ctx.lib)
    a = _arg(ctx, fn, A, "A", (_U8,))
    shape = a.shape
    n = a.numel
    bs = quant_state.blocksize
    _absmax, absmax_ptr = _plain_absmax(ctx, fn, quant_state, _blocks(n, bs))
    c = _arg(ctx, fn, quant_state.code, "quant_state.code", (_F32,), numel=256)
    dtype = quant_state.dtype if quant_state.dtype is not None else _F32
    if out is None:
        out = ctx.empty(shape, dtype)
    else:
        dtype = _dtype(out)
    o = _arg(ctx, fn, out, "out", FLOAT_DTYPES, numel=n, writable=True)
    ctx.lib.checked.kbit_dequantize_blockwise_8bit(_KBIT_DTYPE[dtype], c.ptr, a.ptr, absmax_ptr, o.ptr,
                                                   bs, n, ctx.stream)
    return out


# ---- LLM.int8 -----------------------------------------------------------------------------------

def _rows_cols(fn, shape, what):
    if len(shape) < 1:
        raise ValueError(f"{fn}: {what} must have at least one dimension")
    cols = shape[-1]
    return _numel(shape[:-1]), cols


_BF16 = np.dtype(ml_dtypes.bfloat16)
_INT8_DTYPES = (_F16, _F32, _BF16)


def int8_vectorwise_quant(A, threshold=0.0):
    """LLM.int8 row-wise quantization of a float16, float32 or bfloat16 matrix [..., cols]: returns
    (int8 codes with A's shape, float32 row absmax [rows], outlier column indices (int64) or None).
    With threshold > 0 the columns holding an |a| >= threshold are outliers (an empty array when there
    are none); for more than one row they are zeroed in the codes (computed in floating point instead),
    as bitsandbytes does. float16 runs the backend's kernel; float32 and bfloat16 are computed on the
    host with numpy, as bitsandbytes' default torch expression computes them (_int8_rows_host)."""
    fn = "int8_vectorwise_quant"
    ctx = Ctx(A)
    a = _arg(ctx, fn, A, "A", _INT8_DTYPES)
    threshold = float(threshold)
    if not threshold >= 0.0:
        raise ValueError(f"{fn}: threshold must be >= 0, not {threshold}")
    shape = a.shape
    rows, cols = _rows_cols(fn, shape, "A")
    if a.dtype != _F16:
        host = np.asarray(ctx.to_numpy(A)).reshape(rows, cols)
        out, row_stats, outlier_cols = _int8_rows_host(host, threshold)
        return (ctx.from_numpy(out.reshape(shape)), ctx.from_numpy(row_stats),
                None if outlier_cols is None else ctx.from_numpy(outlier_cols))
    out = ctx.empty(shape, _I8)
    row_stats = ctx.empty((rows,), _F32)
    mask = ctx.empty((cols,), _U8) if threshold > 0 else None
    ctx.lib.checked.kbit_int8_vectorwise_quant(a.ptr, _addr(out), _addr(row_stats),
                                               None if mask is None else _addr(mask), threshold, rows, cols,
                                               ctx.stream)
    outlier_cols = None
    if mask is not None:
        outlier_cols = ctx.from_numpy(np.flatnonzero(ctx.to_numpy(mask)).astype(np.int64))
    return out, row_stats, outlier_cols


def _outliers(A, threshold):
    """The mask |a| >= threshold of a host matrix, the threshold rounded to A's dtype first (torch
    compares a tensor with a Python float in the tensor's dtype); None when threshold == 0."""
    if threshold == 0.0:
        return None
    return np.abs(A) >= A.dtype.type(threshold)


def _int8_round(x):
    """rint (half to even) of float32 values to int8; a NaN (a zero scale's 0 * inf) gives 0."""
    x = np.rint(x)
    return np.where(np.isnan(x), 0, x).astype(np.int8)


def _int8_rows_host(A, threshold):
    """bitsandbytes' default int8_vectorwise_quant on a host [rows, cols] matrix of any float dtype:
    outliers zeroed before the row absmax, scale = fp32(fp32(1 / absmax) * 127) (torch evaluates
    127.0 / t as t.reciprocal() * 127), codes rint(fp32(a) * scale), outlier columns zeroed when
    rows > 1. A row whose absmax is 0 gives codes 0 (torch converts the NaN it computes there)."""
    mask = _outliers(A, threshold)
    outlier_cols = None
    if mask is not None:
        outlier_cols = np.flatnonzero(mask.any(axis=0)).astype(np.int64)
        A = np.where(mask, A.dtype.type(0), A)
    row_stats = (np.abs(A).max(axis=1) if A.shape[1] else np.zeros(A.shape[0], A.dtype)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = (np.float32(1.0) / row_stats) * np.float32(127.0)
        out = _int8_round(A.astype(np.float32) * scale[:, None])
    if A.shape[0] > 1 and outlier_cols is not None:
        out[:, outlier_cols] = 0
    return out, row_stats, outlier_cols


def int8_vectorwise_dequant(A, stats):
    """float32 A * stats / 127 of int8 codes [..., cols] and their float32 row absmax [rows], evaluated
    as bitsandbytes' default: fp32(fp32(a * stat) * fp32(1 / 127))."""
    fn = "int8_vectorwise_dequant"
    ctx = Ctx(A)
    a = _arg(ctx, fn, A, "A", (_I8,))
    rows, cols = _rows_cols(fn, a.shape, "A")
    _arg(ctx, fn, stats, "stats", (_F32,), numel=rows)
    host = np.asarray(ctx.to_numpy(A)).reshape(rows, cols).astype(np.float32)
    st = np.asarray(ctx.to_numpy(stats)).reshape(rows, 1)
    out = (host * st) * np.float32(7.874015718698502e-3)
    return ctx.from_numpy(out.reshape(a.shape))


def int8_double_quant(A, col_stats=None, row_stats=None, out_col=None, out_row=None, threshold=0.0):
    """LLM.int8 row-wise and column-wise quantization of A [..., cols] (float16, float32 or bfloat16):
    returns (row codes, column codes, row absmax [rows], column absmax [cols], outlier columns or None).
    The rows are int8_vectorwise_quant's; the columns are bitsandbytes' CUDA path's expression: outliers
    (|a| >= threshold) zeroed, col_stats = max |a| per column, codes rint(fp32(a * 127 in A's dtype) /
    col_stats) (0 for an all-zero column). The pre-allocated outputs of bitsandbytes' signature are refused
    as there."""
    fn = "int8_double_quant"
    for name, v in (("row_stats", row_stats), ("col_stats", col_stats), ("out_col", out_col), ("out_row", out_row)):
        if v is not None:
            raise ValueError(f"{fn}: {name} must be None; pre-allocated {name} is not supported (as in bitsandbytes)")
    quant_row, stats_row, outlier_cols = int8_vectorwise_quant(A, threshold)
    ctx = Ctx(A)
    shape = _shape(A)
    rows, cols = _rows_cols(fn, shape, "A")
    host = np.asarray(ctx.to_numpy(A)).reshape(rows, cols)
    mask = _outliers(host, float(threshold))
    if mask is not None:
        host = np.where(mask, host.dtype.type(0), host)
    stats_col = (np.abs(host).max(axis=0) if rows else np.zeros(cols, host.dtype)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        quant_col = _int8_round((host * host.dtype.type(127.0)).astype(np.float32) / stats_col[None, :])
    return (quant_row, ctx.from_numpy(quant_col.reshape(shape)), stats_row, ctx.from_numpy(stats_col),
            outlier_cols)


_context_lock = threading.Lock()


def _context(lib):
    """The library's int8 GEMM context, created once (as bitsandbytes keeps one per device)."""
    with _context_lock:
        ctx = lib.__dict__.get("_igemm_context")
        if ctx is None:
            ctx = lib.get_context()
            if not ctx:
                raise lib.error("get_context", 2)
            lib._igemm_context = ctx
        return ctx


def int8_linear_matmul(A, B, out=None, dtype=np.int32):
    """Exact int8 product out = A @ B^T: A int8 [..., K] (activations), B int8 [N, K] (weights),
    out int32 [..., N] (cigemmlt_32)."""
    fn = "int8_linear_matmul"
    ctx = Ctx(A)
    if np.dtype(dtype) != _I32:
        raise TypeError(f"{fn}: only dtype int32 is supported, not {np.dtype(dtype).name}")
    a = _arg(ctx, fn, A, "A", (_I8,))
    b = _arg(ctx, fn, B, "B", (_I8,))
    a_shape, b_shape = a.shape, b.shape
    if len(b_shape) != 2 or not a_shape or a_shape[-1] != b_shape[1]:
        raise ValueError(f"{fn}: A [..., K] and B [N, K] do not match: {a_shape} and {b_shape}")
    tokens, K = _rows_cols(fn, a_shape, "A")
    N = b_shape[0]
    for what, v in (("K", K), ("N", N), ("rows of A", tokens)):
        _int32(fn, what, v)
    out_shape = a_shape[:-1] + (N,)
    if out is None:
        out = ctx.empty(out_shape, _I32)
    o = _arg(ctx, fn, out, "out", (_I32,), shape=out_shape, writable=True)
    ctx.lib.checked.cigemmlt_32(_context(ctx.lib), K, tokens, N, b.ptr, a.ptr, o.ptr, None, K, K, N, ctx.stream)
    return out


def int8_mm_dequant(A, row_stats, col_stats, out=None, bias=None):
    """float16 result of an LLM.int8 product: out = A * row_stats * col_stats / 127^2 (+ bias), with A
    the int32 [..., N] product, row_stats [rows] (activation absmax), col_stats [N] (weight absmax, SCB),
    bias float16 [N] or None."""
    fn = "int8_mm_dequant"
    ctx = Ctx(A)
    a = _arg(ctx, fn, A, "A", (_I32,))
    shape = a.shape
    rows, cols = _rows_cols(fn, shape, "A")
    _int32(fn, "rows * cols", rows * cols)
    rs = _arg(ctx, fn, row_stats, "row_stats", (_F32,), numel=rows)
    cs = _arg(ctx, fn, col_stats, "col_stats", (_F32,), numel=cols)
    bias_ptr = None if bias is None else _arg(ctx, fn, bias, "bias", (_F16,), numel=cols).ptr
    if out is None:
        out = ctx.empty(shape, _F16)
    o = _arg(ctx, fn, out, "out", (_F16,), shape=shape, writable=True)
    ctx.lib.checked.cdequant_mm_int32_fp16(a.ptr, rs.ptr, cs.ptr, o.ptr, bias_ptr, rows, cols, ctx.stream)
    return out


def int8_outlier_matmul(A, W, W_stats, outlier_cols, out):
    """The fp16 outlier part of an LLM.int8 layer, added into out [rows, N] (kbit addition):
    out += A[:, cols] @ (W[:, cols] * W_stats / 127)^T over the outlier column indices."""
    fn = "int8_outlier_matmul"
    ctx = Ctx(A)
    a = _arg(ctx, fn, A, "A", (_F16,))
    rows, K = _rows_cols(fn, a.shape, "A")
    w = _arg(ctx, fn, W, "W", (_I8,))
    w_shape = w.shape
    if len(w_shape) != 2 or w_shape[1] != K:
        raise ValueError(f"{fn}: W must be [N, {K}], not {w_shape}")
    N = w_shape[0]
    st = _arg(ctx, fn, W_stats, "W_stats", (_F32,), numel=N)
    mask = np.zeros(K, dtype=np.uint8)
    if outlier_cols is not None:
        mask[ctx.to_numpy(outlier_cols).astype(np.int64)] = 1
    mask_dev = ctx.from_numpy(mask)
    o = _arg(ctx, fn, out, "out", (_F16,), numel=rows * N, writable=True)
    ctx.lib.checked.kbit_int8_outlier_matmul_fp16(a.ptr, w.ptr, st.ptr, _addr(mask_dev), o.ptr, rows, N, K,
                                                  ctx.stream)
    return out


__all__ = ["QuantState", "create_dynamic_map", "create_linear_map", "create_normal_map", "create_fp8_map",
           "get_4bit_type", "quantize_4bit", "dequantize_4bit", "quantize_nf4", "quantize_fp4", "dequantize_nf4",
           "dequantize_fp4", "gemv_4bit", "gemm_4bit", "gemm_4bit_grouped", "quantize_blockwise", "dequantize_blockwise",
           "int8_vectorwise_quant", "int8_vectorwise_dequant", "int8_double_quant", "int8_linear_matmul",
           "int8_mm_dequant", "int8_outlier_matmul", "pack_dict_to_tensor", "unpack_tensor_to_dict"]
