#!/usr/bin/env python3
"""ctest io.writer: libkbit_io.so's writer (kbit_io_writer_*, io 1.1 and 1.2) against the Python
package's (kbit.checkpoint.save, i.e. the safetensors library), byte for byte, each file written both
ways: added as they come (through the scratch file) and declared first (io 1.2, written once):
  - plain tensors of every dtype, scalars, empty tensors, names with non-ASCII and control characters;
  - every layer of the io.make_checkpoints files (nf4/fp4, nested or not, fp32/fp16/bf16, uint16
    storage, int8): the C reader describes each layer, the C writer writes it back from that
    description, and the file equals the Python package's;
  - the quant_state JSON of nested layers for many float32 offsets against Python's json.dumps;
  - bad arguments and misuse of declarations: a status, the message, and no file left behind.
Usage: test_writer.py PATH/TO/libkbit_io.so CHECKPOINTS_DIR"""
import ctypes as C
import json
import os
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

import kbit.checkpoint as ckpt

LIB, DATA = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_report import Checks  # noqa: E402
from kbit_io_ctypes import INVALID, IO_DTYPE, SUCCESS, P, Quant, Tensor, load  # noqa: E402

check = Checks("io.writer")

lib = load(LIB)
check(lib.kbit_io_interface_version() == (1 << 16) | 3, "kbit_io_interface_version is 1.3")


def c_shape(a):
    return (C.c_int64 * max(a.ndim, 1))(*a.shape)


def no_data(q):
    """A copy of layer description q without its data pointers (what a declaration may pass)."""
    d = Quant.from_buffer_copy(q.contents)
    for f in ("weight", "absmax", "quant_map", "nested_absmax", "nested_quant_map", "scb"):
        setattr(d, f, None)
    return C.pointer(d)


def c_write(path, tensors, metadata=None, layers=(), declared=False):
    """Writes the file with the C writer. declared: every tensor is declared first (without data), then
    the tensors are added in the reverse order, the layers first."""
    w = P()
    rc = lib.kbit_io_writer_create(str(path).encode(), C.byref(w))
    assert rc == SUCCESS, lib.kbit_io_last_error_message()
    for k, v in (metadata or {}).items():
        assert lib.kbit_io_writer_metadata(w, k.encode(), v.encode()) == SUCCESS
    items = [(n, np.ascontiguousarray(a) if a.ndim else a) for n, a in tensors.items()]
    if declared:
        for name, a in items:
            rc = lib.kbit_io_writer_declare(w, name.encode(), IO_DTYPE[a.dtype.name], a.ndim, c_shape(a))
            assert rc == SUCCESS, lib.kbit_io_last_error_message()
        for q in layers:
            assert lib.kbit_io_writer_declare_quant(w, no_data(q)) == SUCCESS, lib.kbit_io_last_error_message()
        for q in layers:
            assert lib.kbit_io_writer_add_quant(w, q) == SUCCESS, lib.kbit_io_last_error_message()
        items.reverse()
    for name, a in items:
        rc = lib.kbit_io_writer_add(w, name.encode(), IO_DTYPE[a.dtype.name], a.ndim, c_shape(a), a.ctypes.data)
        assert rc == SUCCESS, lib.kbit_io_last_error_message()
    if not declared:
        for q in layers:
            rc = lib.kbit_io_writer_add_quant(w, q)
            assert rc == SUCCESS, lib.kbit_io_last_error_message()
    rc = lib.kbit_io_writer_finish(w)
    assert rc == SUCCESS, lib.kbit_io_last_error_message()


def leftovers(d):
    return [p.name for p in Path(d).iterdir() if ".kbit-" in p.name]


def unnamed(d):
    """Sizes of the unnamed files (O_TMPFILE) in directory d this process holds open: the writer's
    temporary file and its scratch file, which /proc shows as D/#INODE (deleted)."""
    sizes, d = [], os.path.realpath(d)
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{d}/#") and target.endswith(" (deleted)"):
            sizes.append(os.fstat(int(fd)).st_size)
    return sizes


tmp = Path(tempfile.mkdtemp(prefix="kbit-io-writer-"))
rng = np.random.default_rng(3)

# -- plain tensors of every dtype, against safetensors' writer
plain = {
    "u64": rng.integers(0, 2**63, (3,), dtype=np.uint64), "i64": rng.integers(-9, 9, (2, 2), dtype=np.int64),
    "f64": rng.standard_normal(3), "f32": rng.standard_normal((2, 3)).astype(np.float32),
    "u32": rng.integers(0, 9, (4,), dtype=np.uint32), "i32": rng.integers(-9, 9, (1, 1, 2), dtype=np.int32),
    "bf16": rng.standard_normal(5).astype(ml_dtypes.bfloat16), "f16": rng.standard_normal(3).astype(np.float16),
    "u16": rng.integers(0, 9, (2,), dtype=np.uint16), "i16": rng.integers(-9, 9, (3,), dtype=np.int16),
    "e4m3": rng.standard_normal(3).astype(ml_dtypes.float8_e4m3fn),
    "e5m2": rng.standard_normal(2).astype(ml_dtypes.float8_e5m2),
    "i8": rng.integers(-9, 9, (7,), dtype=np.int8), "u8": rng.integers(0, 255, (3, 3), dtype=np.uint8),
    "bool": np.array([True, False, True]), "scalar": np.array(2.5, np.float32), "empty": np.zeros((0, 4), np.float32),
    "b.same": np.zeros(2, np.float32), "a.same": np.ones(2, np.float32),
    "na\u00efve \u2603": np.ones(1, np.uint8), 'q"uote\\back\nline\x01\x7f': np.ones(2, np.int16),
}
for meta in (None, {"format": "pt"}):
    ckpt_path, c_path = tmp / "py.safetensors", tmp / "c.safetensors"
    if meta is None:
        from safetensors.numpy import save_file
        save_file(dict(plain), str(ckpt_path))
    else:
        ckpt.save(ckpt_path, plain, meta)
    for declared in (False, True):
        c_write(c_path, plain, meta, declared=declared)
        check(c_path.read_bytes() == ckpt_path.read_bytes(),
              f"plain tensors, metadata {meta}, declared {declared}: same bytes as safetensors")
umask = os.umask(0)
os.umask(umask)
check(oct(os.stat(tmp / "c.safetensors").st_mode & 0o777) == oct(0o666 & ~umask),
      "the file gets the mode open(0666) would give")

# -- the layers of the Python package's checkpoints: C reader -> C writer == Python writer
for src in ("mixed.safetensors", "misaligned.safetensors"):
    ck = P()
    assert lib.kbit_io_open(str(DATA / "good" / src).encode(), C.byref(ck)) == SUCCESS
    layers, names = [], set()
    for i in range(lib.kbit_io_quant_count(ck)):
        q = C.POINTER(Quant)()
        assert lib.kbit_io_quant_describe(ck, i, C.byref(q)) == SUCCESS
        layers.append(q)
    py = ckpt.load(DATA / "good" / src)
    prefixes = ckpt.quantized_prefixes(py)
    layer_keys = set()
    for p in prefixes["4bit"] + prefixes["int8"]:
        w = p if ckpt.is_parameter_4bit(py, p) else p + ".weight"  # a 4-bit parameter: under its own key
        layer_keys |= {k for k in py if k == w or k.startswith(w + ".") or k in (p + ".SCB", p + ".weight_format")}
    rest = {k: v for k, v in py.items() if k not in layer_keys}
    ckpt.save(tmp / "layers_py.safetensors", py)
    for declared in (False, True):
        c_write(tmp / "layers.safetensors", rest, {"format": "pt"}, layers, declared)
        check((tmp / "layers.safetensors").read_bytes() == (tmp / "layers_py.safetensors").read_bytes(),
              f"{src}, declared {declared}: every layer written back from its description equals the Python package's file")
    lib.kbit_io_close(ck)

# -- nested offsets: the quant_state JSON as Python's json.dumps writes the float32 value
ck = P()
assert lib.kbit_io_open(str(DATA / "good" / "mixed.safetensors").encode(), C.byref(ck)) == SUCCESS
nested = None
for i in range(lib.kbit_io_quant_count(ck)):
    q = C.POINTER(Quant)()
    lib.kbit_io_quant_describe(ck, i, C.byref(q))
    if q.contents.nested and not q.contents.parameter:  # a linear layer: its keys are P.weight...
        nested = q
offsets = [0.0, -0.0, 1.0, -2.5, 1e-4, 9.99e-5, 1e-5, 3.4028234663852886e38, 1.401298464324817e-45, 1e16, 1e15,
           123456789.0, 0.1, 1 / 3]
offsets += list(rng.standard_normal(200) * 10.0 ** rng.integers(-12, 12, 200))
offsets = [float(np.float32(o)) for o in offsets]
qs_name = f"{nested.contents.prefix.decode()}.weight.quant_state.bitsandbytes__{'nf4' if nested.contents.format == 0 else 'fp4'}"
mismatch = []
for o in offsets:
    layer = Quant.from_buffer_copy(nested.contents)
    layer.nested_offset = o
    c_write(tmp / "offset.safetensors", {}, None, [C.pointer(layer)])
    got = bytes(ckpt.load(tmp / "offset.safetensors")[qs_name])
    want = json.loads(got.decode())
    want["nested_offset"] = float(np.float32(o))
    if got != json.dumps(want).encode():
        mismatch.append((o, got))
check(not mismatch, f"nested_offset written as json.dumps writes it: {mismatch[:3]}")
check(len(offsets) > 200, "offsets tried")

# -- bad arguments: a status and a message, nothing added, no file left
w = P()
check(lib.kbit_io_writer_create(str(tmp / "no-such-dir" / "x.safetensors").encode(), C.byref(w)) == INVALID and
      not w and b"cannot create a file beside it" in lib.kbit_io_last_error_message(), "unwritable directory")
check(lib.kbit_io_writer_create(str(tmp).encode(), C.byref(w)) == INVALID and b"is a directory" in
      lib.kbit_io_last_error_message(), "a directory as path")
out = tmp / "bad.safetensors"
assert lib.kbit_io_writer_create(str(out).encode(), C.byref(w)) == SUCCESS
one = np.ones(2, np.float32)
sh = (C.c_int64 * 1)(2)
check(lib.kbit_io_writer_add(w, b"a", 9, 1, sh, one.ctypes.data) == SUCCESS, "add a")
check(lib.kbit_io_writer_add(w, b"a", 9, 1, sh, one.ctypes.data) == INVALID and
      b"tensor 'a' was already added" in lib.kbit_io_last_error_message(), "a name twice")
check(lib.kbit_io_writer_add(w, b"b", 99, 1, sh, one.ctypes.data) == INVALID and
      b"unknown dtype 99" in lib.kbit_io_last_error_message(), "unknown dtype")
check(lib.kbit_io_writer_add(w, b"__metadata__", 9, 1, sh, one.ctypes.data) == INVALID, "__metadata__ as a name")
check(lib.kbit_io_writer_add(w, b"\xff\xfe", 9, 1, sh, one.ctypes.data) == INVALID and
      b"not valid UTF-8" in lib.kbit_io_last_error_message(), "a name that is not UTF-8")
neg = (C.c_int64 * 1)(-2)
check(lib.kbit_io_writer_add(w, b"c", 9, 1, neg, one.ctypes.data) == INVALID and b"negative" in
      lib.kbit_io_last_error_message(), "a negative dimension")
check(lib.kbit_io_writer_add(w, b"d", 9, 1, sh, None) == INVALID and b"data is NULL" in
      lib.kbit_io_last_error_message(), "NULL data")


def refused_layer(what, message, **fields):
    """The nested layer with `fields` changed is refused: INVALID, and `message` in the error."""
    bad = Quant.from_buffer_copy(nested.contents)
    for name, value in fields.items():
        setattr(bad, name, value)
    check(lib.kbit_io_writer_add_quant(w, C.pointer(bad)) == INVALID and message in lib.kbit_io_last_error_message(),
          what)


refused_layer("a 4-bit layer with blocksize 48", b"blocksize 48 is not", blocksize=48)
refused_layer("a NaN nested_offset", b"nested_offset is not finite", nested_offset=float("nan"))
refused_layer("an unknown format", b"format 7", format=7)
bad = Quant.from_buffer_copy(nested.contents)
bad.prefix = b"a"  # names a.weight, a.weight.absmax ...: none of them is the plain tensor "a"
check(lib.kbit_io_writer_add_quant(w, C.pointer(bad)) == SUCCESS, "a layer beside a plain tensor")
check(lib.kbit_io_writer_add_quant(w, C.pointer(bad)) == INVALID and b"a.weight' was already added" in
      lib.kbit_io_last_error_message(), "the same layer twice")
# io 1.3: `parameter` writes the layer under its own key; a caller of an older size is not read for it.
param = Quant.from_buffer_copy(nested.contents)
param.prefix, param.parameter = b"e.experts.w", True
check(lib.kbit_io_writer_add_quant(w, C.pointer(param)) == SUCCESS, "a 4-bit parameter")
check(lib.kbit_io_writer_add_quant(w, C.pointer(param)) == INVALID and b"tensor 'e.experts.w' was already added" in
      lib.kbit_io_last_error_message(), "a 4-bit parameter is written under its own key")
param.prefix, param.size = b"old", Quant.parameter.offset
check(lib.kbit_io_writer_add_quant(w, C.pointer(param)) == SUCCESS, "an io 1.2 caller's layer")
check(lib.kbit_io_writer_add_quant(w, C.pointer(param)) == INVALID and b"tensor 'old.weight' was already added" in
      lib.kbit_io_last_error_message(), "parameter is not read beyond the caller's size: old.weight")
int8 = Quant.from_buffer_copy(nested.contents)
int8.format, int8.parameter, int8.prefix = 2, True, b"i8"
check(lib.kbit_io_writer_add_quant(w, C.pointer(int8)) == INVALID and b"layer 'i8': an INT8 layer cannot be a parameter"
      in lib.kbit_io_last_error_message(), "an INT8 parameter is refused")
check(not out.exists() and not leftovers(tmp) and len(unnamed(tmp)) == 2,
      "before finish nothing has a name: the temporary and scratch files are unnamed")
lib.kbit_io_writer_discard(w)
check(not out.exists() and not leftovers(tmp) and not unnamed(tmp), "discard leaves nothing")
lib.kbit_io_close(ck)
check(lib.kbit_io_writer_finish(None) == INVALID, "finish(NULL)")
# A failed finish (the destination turned into a directory) leaves no temporary file.
out.mkdir()
assert lib.kbit_io_writer_create(str(tmp / "later.safetensors").encode(), C.byref(w)) == SUCCESS
(tmp / "later.safetensors").mkdir()
(tmp / "later.safetensors" / "x").write_text("x")
check(lib.kbit_io_writer_finish(w) == INVALID and b"cannot rename" in lib.kbit_io_last_error_message() and
      not leftovers(tmp), "failed rename: status, message, no temporary file")

# -- declarations (io 1.2): the layout is fixed by the first add; misuse is refused, the writer unchanged
def msg():
    return lib.kbit_io_last_error_message().decode()


f32, two, three = IO_DTYPE["float32"], (C.c_int64 * 1)(2), (C.c_int64 * 1)(3)
ck = P()
assert lib.kbit_io_open(str(DATA / "good" / "mixed.safetensors").encode(), C.byref(ck)) == SUCCESS
for i in range(lib.kbit_io_quant_count(ck)):
    q = C.POINTER(Quant)()
    lib.kbit_io_quant_describe(ck, i, C.byref(q))
    if q.contents.nested and not q.contents.parameter:  # a linear layer: its keys are P.weight...
        nested = q
dec = tmp / "declared.safetensors"
assert lib.kbit_io_writer_create(str(dec).encode(), C.byref(w)) == SUCCESS
check(lib.kbit_io_writer_declare(w, b"a", f32, 1, two) == SUCCESS, "declare a")
check(lib.kbit_io_writer_declare(w, b"a", f32, 1, two) == INVALID and "tensor 'a' was already declared" in msg(),
      "a name declared twice")
check(lib.kbit_io_writer_declare(w, b"b", 99, 1, two) == INVALID and "unknown dtype 99" in msg(), "declare: bad dtype")
check(lib.kbit_io_writer_declare(w, b"b", f32, 1, two) == SUCCESS, "declare b")
nd = no_data(nested)
nd.contents.prefix = b"L"
check(lib.kbit_io_writer_declare_quant(w, nd) == SUCCESS, "declare a nested layer without its data")
check(lib.kbit_io_writer_declare_quant(w, nd) == INVALID and "tensor 'L.weight' was already declared" in msg(),
      "a layer declared twice")
check(not leftovers(tmp) and unnamed(tmp) == [0, 0], "nothing is written before the first add")
check(lib.kbit_io_writer_add(w, b"c", f32, 1, two, one.ctypes.data) == INVALID and
      "tensor 'c' was not declared" in msg(), "an add of a name not declared")
check(lib.kbit_io_writer_add(w, b"a", f32, 1, three, np.ones(3, np.float32).ctypes.data) == INVALID and
      "tensor 'a' was declared as F32 [2], added as F32 [3]" in msg(), "an add with another shape")
check(lib.kbit_io_writer_add(w, b"a", IO_DTYPE["int32"], 1, two, one.ctypes.data) == INVALID and
      "declared as F32 [2], added as I32 [2]" in msg(), "an add with another dtype")
check(unnamed(tmp) == [0, 0], "refused adds write nothing")
check(lib.kbit_io_writer_add(w, b"b", f32, 1, two, (one * 7).ctypes.data) == SUCCESS, "add b (fixes the layout)")
check(sorted(unnamed(tmp))[0] == 0 and sorted(unnamed(tmp))[1] > 8 + 100,
      "the first add writes the header and its tensor at once, into the temporary file (the scratch file stays empty)")
check(lib.kbit_io_writer_declare(w, b"d", f32, 1, two) == INVALID and "declared after the first add" in msg(),
      "a declaration after the first add")
check(lib.kbit_io_writer_metadata(w, b"k", b"v") == INVALID and "set metadata before it" in msg(),
      "metadata after the layout is fixed")
check(lib.kbit_io_writer_add(w, b"b", f32, 1, two, one.ctypes.data) == INVALID and "tensor 'b' was already added" in msg(),
      "a declared tensor added twice")
longer = Quant.from_buffer_copy(nested.contents)
longer.prefix = b"L"
longer.nested_offset = float(np.float32(nested.contents.nested_offset) * np.float32(1.0000001)) * 1e-30
check(lib.kbit_io_writer_add_quant(w, C.pointer(longer)) == INVALID and
      "tensor 'L.weight.quant_state.bitsandbytes__" in msg() and "was declared as U8 [" in msg(),
      "a nested layer whose offset prints longer than declared")
same = Quant.from_buffer_copy(nested.contents)
same.prefix = b"L"
check(lib.kbit_io_writer_add_quant(w, C.pointer(same)) == SUCCESS, "add the declared layer")
check(lib.kbit_io_writer_finish(w) == INVALID and "tensor 'a' was declared but never added" in msg() and
      not dec.exists() and not leftovers(tmp), "finish with a declared tensor missing: status, message, no file")
# The same writer completed: the file the Python package writes from the same tensors.
assert lib.kbit_io_writer_create(str(dec).encode(), C.byref(w)) == SUCCESS
for n in (b"a", b"b"):
    assert lib.kbit_io_writer_declare(w, n, f32, 1, two) == SUCCESS
assert lib.kbit_io_writer_declare_quant(w, nd) == SUCCESS
assert lib.kbit_io_writer_add_quant(w, C.pointer(same)) == SUCCESS
assert lib.kbit_io_writer_add(w, b"b", f32, 1, two, (one * 7).ctypes.data) == SUCCESS
assert lib.kbit_io_writer_add(w, b"a", f32, 1, two, one.ctypes.data) == SUCCESS
check(lib.kbit_io_writer_finish(w) == SUCCESS, "finish a declared writer")
c_write(tmp / "undeclared.safetensors", {"a": one, "b": one * 7}, None, [C.pointer(same)])
check(dec.read_bytes() == (tmp / "undeclared.safetensors").read_bytes(), "declared and added in another order: same bytes")
# Declared, nothing added: an empty file only when nothing was declared.
assert lib.kbit_io_writer_create(str(dec).encode(), C.byref(w)) == SUCCESS
assert lib.kbit_io_writer_declare(w, b"z", f32, 1, (C.c_int64 * 1)(0)) == SUCCESS
check(lib.kbit_io_writer_declare(None, b"a", f32, 1, two) == INVALID and lib.kbit_io_writer_declare_quant(w, None) == INVALID
      and lib.kbit_io_writer_declare(w, None, f32, 1, two) == INVALID, "declare with NULL arguments")
check(lib.kbit_io_writer_finish(w) == INVALID and "tensor 'z' was declared but never added" in msg(),
      "an empty declared tensor must be added too")
lib.kbit_io_close(ck)

# A header past the 100 MB the safetensors library reads (1001 empty tensors with 100 kB names) is
# refused at finish: the status, the message, no file.
big = tmp / "big_header.safetensors"
assert lib.kbit_io_writer_create(str(big).encode(), C.byref(w)) == SUCCESS
zero = (C.c_int64 * 1)(0)
for i in range(1001):
    assert lib.kbit_io_writer_add(w, (f"{i:04d}" + "x" * 100_000).encode(), IO_DTYPE["float32"], 1, zero, None) == SUCCESS
check(lib.kbit_io_writer_finish(w) == INVALID and b"more than the 100000000 safetensors reads" in
      lib.kbit_io_last_error_message() and not big.exists() and not leftovers(tmp),
      "a header over 100 MB: status, message, no file")

check.finish(tmp, f"{len(offsets)} offsets")
