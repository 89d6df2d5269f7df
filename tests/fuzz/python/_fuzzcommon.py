"""Shared pieces of the atheris fuzz targets in this directory: the import of atheris (exit 77 with
"SKIPPED: ..." when it is missing), the import of kbit from the source checkout (python/ and build/lib,
or KBIT_LIBRARY_DIR), and value / array mutators driven by an atheris.FuzzedDataProvider.

The mutators build what a hostile or broken checkpoint / state_dict could hold: arrays of other
dtypes, lengths, shapes, strides, flags (read-only, misaligned, non-contiguous) and values (NaN, inf,
huge), plain Python values of every JSON type and a few that JSON cannot hold.
"""
import os
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

try:
    import atheris  # noqa: F401
except ImportError as e:  # the runner turns this into a skip
    print(f"SKIPPED: atheris is not importable by {sys.executable} ({e}); pip install atheris", flush=True)
    sys.exit(SKIP)

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

if os.path.join(REPO, "python") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "python"))


def import_kbit():
    """kbit, with its Python code instrumented for coverage feedback."""
    with atheris.instrument_imports(include=["kbit"]):
        import kbit
        import kbit.checkpoint  # noqa: F401
        import kbit.optim  # noqa: F401
    return kbit


BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                np.uint64, np.float16, np.float32, np.float64, np.complex64, object)] + \
    [BF16, np.dtype("S4"), np.dtype("U1"), np.dtype("V4"), np.dtype([("a", "<f4")]), np.dtype(">f4"),
     np.dtype(ml_dtypes.float8_e4m3fn)]
INTS = [0, 1, -1, 2, 3, 7, 15, 16, 32, 63, 64, 255, 256, 4096, 65536, 2**31 - 2, 2**31 - 1, 2**31, 2**32,
        2**32 + 1, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, -2**31, -2**63, 10**20, 10**400]
FLOATS = [0.0, -0.0, 0.5, 1.0, 64.0, 1e-45, 3.4028235e38, 3.5e38, 1e308, float("inf"), float("-inf"),
          float("nan")]
STRINGS = ["", "nf4", "fp4", "NF4", "int8", "float32", "float16", "bfloat16", "float64", "uint8", "int4",
           "float", "bitsandbytes__nf4", "quant_state", "absmax", "shape", "0", "64", "1e3", "\x00", "\u00e9",
           "nf4 ", "float32\x00"]


def pick(fdp, seq):
    return seq[fdp.ConsumeIntInRange(0, len(seq) - 1)]


def any_value(fdp, depth=0):
    """A plain value of any JSON type (and a few that JSON cannot hold: tuples, numpy scalars, bytes,
    arrays)."""
    kind = fdp.ConsumeIntInRange(0, 13 if depth < 2 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return pick(fdp, INTS) * (1 if fdp.ConsumeBool() else -1)
    if kind == 3:
        return fdp.ConsumeIntInRange(-1000, 5000)
    if kind == 4:
        return pick(fdp, FLOATS)
    if kind == 5:
        return fdp.ConsumeRegularFloat()
    if kind == 6:
        return pick(fdp, STRINGS)
    if kind == 7:
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 12))
    if kind == 8:
        return pick(fdp, [np.int64(3), np.int32(-1), np.uint64(2**64 - 1), np.float32("nan"), np.float64(64.0),
                          np.bool_(True), np.int8(64), np.uint8(0)])
    if kind == 9:
        return [any_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    if kind == 10:
        return [fdp.ConsumeIntInRange(0, 80) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    if kind == 11:
        return {pick(fdp, STRINGS): any_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))}
    if kind == 12:
        return tuple(any_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    return small_array(fdp)


def small_array(fdp):
    n = fdp.ConsumeIntInRange(0, 40)
    dt = pick(fdp, DTYPES)
    raw = fdp.ConsumeBytes(n * max(dt.itemsize, 1))
    raw = raw + b"\0" * (n * dt.itemsize - len(raw))
    if dt.hasobject:
        return np.array([None] * n, dtype=object)
    if dt.kind == "U":  # code points past U+10FFFF make numpy itself fail (SystemError in repr)
        return np.array([chr(c % 0x110000) if not 0xD800 <= c % 0x110000 < 0xE000 else "x"
                         for c in np.frombuffer(raw, np.uint32, count=n).tolist()], dtype=dt)
    return np.frombuffer(raw, dtype=dt, count=n).copy() if dt.itemsize else np.zeros(n, dt)


def _misaligned(a):
    """A copy of `a` (C-contiguous) that starts one byte past an aligned address (flags.aligned False
    where the dtype has an alignment)."""
    if a.dtype.hasobject:  # pointers: numpy will not view bytes as them
        return a.copy()
    buf = np.zeros(a.nbytes + 16, np.uint8)
    start = (-buf.ctypes.data) % 16 + 1
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape) if a.nbytes else a.copy()
    out[...] = a
    return out


def mutate_array(fdp, a):
    """A mutated stand-in for array `a`: other dtype, size, shape, strides, flags or values, or no
    array at all."""
    if not isinstance(a, np.ndarray):
        return any_value(fdp)
    kind = fdp.ConsumeIntInRange(0, 16)
    flat = a.reshape(-1)
    if kind == 0:  # cast to another dtype (same element count)
        dt = pick(fdp, DTYPES)
        try:
            return a.astype(dt)
        except (TypeError, ValueError, OverflowError, SystemError):  # SystemError: numpy, ints -> 'U'
            return np.zeros(a.shape, dt)
    if kind == 1 and not a.dtype.hasobject:  # reinterpret the bytes as another dtype
        dt = pick(fdp, [d for d in DTYPES if not d.hasobject and d.itemsize and d.kind != "U"])
        b = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        return b[: b.size - b.size % dt.itemsize].view(dt).copy()
    if kind == 2:  # shorter
        k = fdp.ConsumeIntInRange(1, max(1, flat.size))
        return flat[: max(0, flat.size - k)].copy()
    if kind == 3:  # longer
        k = fdp.ConsumeIntInRange(1, 300)
        return np.concatenate([flat, np.zeros(k, a.dtype) if not a.dtype.hasobject else np.array([None] * k)])
    if kind == 4:  # the same elements in another shape (must be accepted where only the count matters)
        shapes = [(flat.size,), (1, flat.size), (flat.size, 1), (1, 1, flat.size)]
        if flat.size and flat.size % 2 == 0:
            shapes.append((2, flat.size // 2))
        if flat.size == 1:
            shapes.append(())
        return flat.copy().reshape(pick(fdp, shapes))
    if kind == 5:  # non-contiguous: every other element of a doubled copy, reversed, or transposed
        how = fdp.ConsumeIntInRange(0, 3)
        if how == 0:
            return np.repeat(flat, 2)[::2]
        if how == 1:
            return flat[::-1]
        if how == 2 and flat.size % 2 == 0 and flat.size:
            return flat.copy().reshape(2, -1).T
        return np.asfortranarray(flat.copy().reshape(1, -1).repeat(2, axis=0))[:1]
    if kind == 6:  # read-only
        b = a.copy()
        b.flags.writeable = False
        return b
    if kind == 7:  # misaligned (C-contiguous, element-misaligned start)
        return _misaligned(np.ascontiguousarray(a))
    if kind == 8:  # special values
        b = a.copy()
        if b.size and (b.dtype.kind in "fc" or b.dtype == BF16):
            b.reshape(-1)[fdp.ConsumeIntInRange(0, b.size - 1):] = pick(
                fdp, [np.nan, np.inf, -np.inf, 0.0, -1.0, 3e38, 1e-40])
        elif b.size and b.dtype.kind in "iu":
            b.reshape(-1)[fdp.ConsumeIntInRange(0, b.size - 1):] = np.iinfo(b.dtype).max
        return b
    if kind == 9:  # random bytes in the same dtype and shape
        b = np.ascontiguousarray(a).copy()
        if b.dtype.hasobject or b.dtype.kind == "U":
            return b
        raw = np.frombuffer(fdp.ConsumeBytes(b.nbytes).ljust(b.nbytes, b"\xff"), np.uint8)
        b.reshape(-1).view(np.uint8)[:] = raw
        return b
    if kind == 10:  # not an array
        return pick(fdp, [None, 0, 1.0, "absmax", b"\x00\x01", flat[:8].tolist(), tuple(flat[:8].tolist()),
                          {"data": 1}, memoryview(b"abcd"), bytearray(4)])
    if kind == 11:  # empty
        return np.zeros((0,) + a.shape[1:], a.dtype)
    if kind == 12:  # zero-strided broadcast (read-only, non-contiguous unless one element)
        return np.broadcast_to(flat[:1] if flat.size else np.zeros(1, a.dtype), (max(flat.size, 1),))
    if kind == 13:  # a numpy subclass or a view with a base
        how = fdp.ConsumeIntInRange(0, 2)
        if how == 0:
            return np.ma.masked_array(a.copy())
        if how == 1:
            return a.copy().view(np.recarray) if not a.dtype.hasobject else a
        return np.concatenate([flat, flat])[: flat.size]
    if kind == 14:  # a 0-d array
        return np.array(flat[0] if flat.size else 0, dtype=a.dtype)
    if kind == 15:
        return small_array(fdp)
    return a.copy()  # unchanged (a fresh copy)


def describe(x):
    if isinstance(x, np.ndarray):
        f = x.flags
        return (f"ndarray({x.dtype}, {x.shape}, strides={x.strides}, c={f.c_contiguous}, w={f.writeable}, "
                f"aligned={f.aligned}, type={type(x).__name__})")
    r = repr(x)
    return r if len(r) < 120 else r[:117] + "..."


def message(e):
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


_seen = set()


def keep_going(target):
    """With KBIT_FUZZ_KEEP_GOING=1, a finding (an exception the target raises) is printed once per
    distinct first line (digits masked) and the run goes on: for surveying, not for CI. Otherwise the
    target is returned as it is, so that atheris stops at the first finding and saves its input."""
    if os.environ.get("KBIT_FUZZ_KEEP_GOING") != "1":
        return target
    import re
    import traceback

    def wrapped(data):
        try:
            target(data)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            first = f"{type(e).__name__}: {e}".splitlines()[0]
            sig = re.sub(r"\d+", "N", first)[:160]
            if sig not in _seen:
                _seen.add(sig)
                where = "".join(traceback.format_tb(e.__traceback__)[-3:]) if not isinstance(e, AssertionError) else ""
                print(f"FINDING #{len(_seen)}: " + "".join(traceback.format_exception_only(type(e), e)).strip()
                      + f"\n  input: {data!r}"[:2000] + ("\n" + where if where else ""), flush=True)
    return wrapped


_stats = {}
_runs = [0]


def count(outcome):
    """Tally one execution's outcome ("accepted", "refused ValueError", ...); the tallies are printed
    as a "STATS:" line after 2^k executions (libFuzzer exits without running Python's atexit)."""
    _stats[outcome] = _stats.get(outcome, 0) + 1


_CURRENT = os.environ.get("KBIT_FUZZ_CURRENT_INPUT")


def tick(data):
    """Counts an execution; with KBIT_FUZZ_CURRENT_INPUT=path, first writes its input there (a sanitizer
    that aborts the process leaves libFuzzer no chance to save it)."""
    if _CURRENT:
        with open(_CURRENT, "wb") as f:
            f.write(data)
    _runs[0] += 1
    n = _runs[0]
    if n & (n - 1) == 0 and n >= 256:
        print(f"STATS: {n} runs: " + ", ".join(f"{k} {v}" for k, v in sorted(_stats.items())), flush=True)
