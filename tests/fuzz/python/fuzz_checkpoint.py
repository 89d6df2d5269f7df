#!/usr/bin/env python3
"""atheris fuzz target: the checkpoint / quant_state parser.

    PYTHONPATH=python python tests/fuzz/python/fuzz_checkpoint.py -max_total_time=20 CORPUSDIR

Each input builds valid checkpoint entries (kbit.quantize_4bit + kbit.checkpoint.tensors_4bit, or
kbit.int8_vectorwise_quant + tensors_int8; shape, dtype, blocksize, nesting, storage dtype, prefix
from the input), then applies up to 6 mutations taken from the input: the quant_state JSON as
arbitrary bytes, as JSON with fields replaced / deleted / retyped, or as edited text; the key's
bitsandbytes__<type> suffix; any tensor (absmax, quant_map, nested_absmax, nested_quant_map, weight,
bias, SCB, weight_format, the quant_state bytes) as another dtype, length, shape, stride, flag
(read-only, misaligned) or value, or as no array at all; keys renamed, deleted or added. It then calls
one of load_4bit(tensors, prefix), QuantState.from_dict (packed entries with full or relative keys,
or the unpacked as_dict() fields) and load_int8(tensors, prefix).

The contract checked (any violation raises, which atheris reports as a finding with the input):
  * a refusal is a ValueError, TypeError or KeyError whose message starts with the function's name
    ("load_4bit:", "QuantState.from_dict:", "load_int8:") and names a key or field; any other
    exception is a finding, and so is a crash or a hang (libFuzzer's -timeout);
  * an accepted 4-bit state dequantizes: kbit.dequantize_4bit(packed, state) succeeds and returns an
    array of state.shape and state.dtype (and kbit.gemv_4bit on 2-D states either works or refuses
    with its own ValueError/TypeError), so that nothing the loader accepts reaches the C library with
    buffers shorter than the sizes it is given;
  * accepted int8 entries multiply: int8_linear_matmul(A, CB) and int8_mm_dequant(.., SCB) work;
  * the unmutated entries always load, and give exactly the dequantization of the quantized weight;
  * every accepted set of plain numpy entries survives kbit.checkpoint.save to a safetensors file and
    kbit.checkpoint.load: the same keys, dtypes, shapes and bytes, loading and dequantizing the same.

Run with KBIT_LIBRARY_DIR=build-asan/lib and LD_PRELOAD=libasan.so (see run.sh, KBIT_FUZZ_ASAN=1) to
have ASan/UBSan check the C side's reads and writes too.
"""
import json
import math
import os
import sys
import tempfile

import _fuzzcommon as fc
from _fuzzcommon import any_value, describe, message, mutate_array, pick

import atheris
import numpy as np

kbit = fc.import_kbit()
from kbit import QuantState, checkpoint  # noqa: E402

FLOAT = [np.dtype(np.float32), np.dtype(np.float16), fc.BF16]
BLOCKSIZES = list(kbit.functional.BLOCKSIZES)
PREFIXES = ["model.layers.0.mlp.down_proj", "w", "lm_head", "a.b.c.d", "model.quant_state_proj"]
FIELDS = list(QuantState.valid_qs_keys) + ["weight", "bias", "SCB", "weight_format"]
SAVABLE = {"bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
           "float32", "float64", "bfloat16", "complex64"}  # (float8_e4m3fn: safetensors' numpy API lacks it)
MAX_DEQUANT = 1 << 24  # element count above which an accepted state is not dequantized (memory / time)
# The round trip's file, removed after each load (libFuzzer exits without running Python's atexit).
ST_PATH = os.path.join(tempfile.gettempdir(), f"kbit-fuzz-ckpt-{os.getpid()}.safetensors")


class Finding(AssertionError):
    pass


def fail(log, what):
    raise Finding(what + "\n  mutations: " + ("; ".join(log) or "none"))


# ---- valid entries ------------------------------------------------------------------------------

def make_shape(fdp):
    ndim = fdp.ConsumeIntInRange(1, 3)
    if ndim == 1:
        return (fdp.ConsumeIntInRange(1, 5000),)
    return tuple(fdp.ConsumeIntInRange(1, 40) for _ in range(ndim))


def base_4bit(fdp):
    qt = pick(fdp, ["nf4", "fp4"])
    dtype = pick(fdp, FLOAT)
    nested = fdp.ConsumeBool()
    bs = pick(fdp, BLOCKSIZES)
    shape = make_shape(fdp)
    n = math.prod(shape)
    storage = pick(fdp, [np.uint8, np.uint8, np.float16, np.float32, np.int8])
    if ((n + 1) // 2) % np.dtype(storage).itemsize:
        storage = np.uint8
    rng = np.random.default_rng(fdp.ConsumeIntInRange(0, 1 << 16))
    # Finite weights: a float16 weight of 1e30 would be inf, and so its nested_offset, which loading refuses.
    scale = pick(fdp, [1.0, 0.05, 1e-30, 1e4] + ([1e30] if dtype != np.float16 else []))
    W = (rng.standard_normal(shape) * scale).astype(dtype)
    packed, state = kbit.quantize_4bit(W, blocksize=bs, quant_type=qt, compress_statistics=nested,
                                       quant_storage=storage)
    expected = kbit.dequantize_4bit(packed, state)
    return packed, state, expected


def base_int8(fdp):
    rows, cols = fdp.ConsumeIntInRange(1, 40), fdp.ConsumeIntInRange(1, 40)
    rng = np.random.default_rng(fdp.ConsumeIntInRange(0, 1 << 16))
    CB, SCB, _ = kbit.int8_vectorwise_quant((rng.standard_normal((rows, cols)) * 3).astype(np.float16))
    return CB, SCB


# ---- mutations ----------------------------------------------------------------------------------

def qs_key_of(tensors):
    keys = [k for k in tensors if ".quant_state.bitsandbytes__" in k]
    return keys[0] if keys else None


def json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (bytes, bytearray, memoryview)):
        return list(bytes(o))
    return str(o)


def shape_variant(fdp, shape):
    s = [d if isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**20 else 1 for d in
         (shape if isinstance(shape, (list, tuple)) else [1])] or [1]
    options = [s[::-1], [math.prod(s)], s + [1], [1] + s, [0], [], [2**62, 0], [0, 2**62], [2**31, 0],
               [2**63 - 1, 0], [2**64, 0], [-1] * len(s), [d + 1 for d in s], s[:-1] + [s[-1] - 1],
               [math.prod(s) + 1], [True] * len(s), [float(d) for d in s], [str(d) for d in s], [s],
               [2**32 + d for d in s[:1]] + s[1:], [math.prod(s) * 2, 0]]
    return pick(fdp, options)


def mutate_json(fdp, raw, log):
    """New quant_state bytes from the old ones."""
    kind = fdp.ConsumeIntInRange(0, 5)
    if kind == 0:
        log.append("json=arbitrary bytes")
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 300))
    try:
        fields = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        fields = None
    if kind == 5 or not isinstance(fields, dict):  # text edits
        how = fdp.ConsumeIntInRange(0, 6)
        b = bytearray(raw)
        if how == 0 and b:
            del b[fdp.ConsumeIntInRange(0, len(b) - 1):]
        elif how == 1:
            b.insert(fdp.ConsumeIntInRange(0, len(b)), fdp.ConsumeIntInRange(0, 255))
        elif how == 2 and b:
            b[fdp.ConsumeIntInRange(0, len(b) - 1)] ^= 1 << fdp.ConsumeIntInRange(0, 7)
        elif how == 3:
            b[:0] = b"\xef\xbb\xbf"
        elif how == 4:
            b += pick(fdp, [b" ", b"x", b"\x00", b"}", b",{}"])
        elif how == 5:  # a duplicate key (JSON's last one wins)
            b[:1] = b'{"' + pick(fdp, ["quant_type", "blocksize", "shape", "dtype"]).encode() + b'": ' + \
                json.dumps(any_value(fdp), default=json_default).encode() + b", "
        else:
            b = bytearray(b"[" * fdp.ConsumeIntInRange(1, 100000) + b"]")
        log.append(f"json text edit {how}")
        return bytes(b)
    if kind == 1:
        field = pick(fdp, FIELDS + ["junk"])
        fields[field] = any_value(fdp)
        log.append(f"json[{field!r}]={describe(fields[field])}")
    elif kind == 2 and fields:
        field = pick(fdp, sorted(fields))
        del fields[field]
        log.append(f"del json[{field!r}]")
    elif kind == 3:
        fields["shape"] = shape_variant(fdp, fields.get("shape") or [1])
        log.append(f"json['shape']={fields['shape']!r}")
    elif kind == 4:
        field = pick(fdp, ["blocksize", "nested_blocksize", "nested_offset", "quant_type", "dtype", "nested_dtype"])
        fields[field] = pick(fdp, BLOCKSIZES + [16, 8192, 0, -64, 64.0, "64", None, float("nan"), float("inf"),
                                                1e39, -0.0, "nf4", "fp4", "float32", "bfloat16", "float64"])
        log.append(f"json[{field!r}]={fields[field]!r}")
    indent = pick(fdp, [None, None, 1])
    return json.dumps(fields, default=json_default, indent=indent,
                      ensure_ascii=fdp.ConsumeBool()).encode("utf-8")


def _count(shape):
    try:
        return math.prod(int(d) for d in shape) if isinstance(shape, (list, tuple)) else None
    except (TypeError, ValueError, OverflowError):
        return None


def consistent_change(fdp, tensors, prefix, log):
    """New shape / blocksize / nested_blocksize in the JSON with absmax, nested_absmax and the packed
    weight resized to agree, so that the state passes the loader's size checks and reaches the C
    library with unusual sizes (zero elements, odd counts, one block, many dimensions)."""
    name = prefix + ".weight"
    qs = qs_key_of(tensors)
    try:
        fields = json.loads(np.ascontiguousarray(tensors[qs]).tobytes().decode("utf-8"))
    except (KeyError, TypeError, ValueError, RecursionError, AttributeError):
        return
    if not isinstance(fields, dict):
        return
    what = fdp.ConsumeIntInRange(0, 3)
    if what in (0, 3):
        fields["shape"] = shape_variant(fdp, fields.get("shape") or [1])
    if what in (1, 3):
        fields["blocksize"] = pick(fdp, BLOCKSIZES)
    if what == 2 or (what == 3 and "nested_blocksize" in fields):
        fields["nested_blocksize"] = pick(fdp, BLOCKSIZES)
    n = _count(fields.get("shape"))
    bs = fields.get("blocksize")
    if n is None or not 0 <= n <= 1 << 22 or not isinstance(bs, int) or bs <= 0:
        return
    blocks = -(-n // bs)
    log.append(f"consistent shape={fields.get('shape')!r} blocksize={bs} "
               f"nested_blocksize={fields.get('nested_blocksize')!r}")
    tensors[qs] = np.frombuffer(json.dumps(fields).encode("utf-8"), np.uint8).copy()
    for key, count in ((name, (n + 1) // 2), (name + ".absmax", blocks)):
        old = tensors.get(key)
        dt = old.dtype if isinstance(old, np.ndarray) and old.dtype.kind in "biufc" else np.dtype(np.uint8)
        if key == name:  # the packed bytes, in the storage dtype where the byte count allows it
            dt = dt if count % dt.itemsize == 0 else np.dtype(np.uint8)
            count //= dt.itemsize
        new = np.zeros(count, dt)
        if new.nbytes:  # bytes from the input, repeated
            fill = np.frombuffer(fdp.ConsumeBytes(64) or b"\x11", np.uint8)
            new.view(np.uint8)[:] = np.resize(fill, new.nbytes)
        if key.endswith(".absmax") and dt == np.float32:
            new[:] = np.nan_to_num(np.abs(new) % 8 + 0.5, nan=1.0)
        tensors[key] = new.reshape(-1, 1) if key == name else new
    nb = fields.get("nested_blocksize")
    if isinstance(nb, int) and nb > 0 and name + ".nested_absmax" in tensors:
        tensors[name + ".nested_absmax"] = np.full(-(-blocks // nb), 0.25, np.float32)


def rename(fdp, key, prefix):
    head, _, last = key.rpartition(".")
    options = [f"{head}.{pick(fdp, FIELDS + ['junk', 'quant_state'])}", f"{head}.x.{last}", f"{head}.{last.upper()}",
               f"{head}{last}", f"{key}.0", "other" + key[len(prefix):] if prefix else "other." + key,
               key.replace("__nf4", "__fp4") if "__nf4" in key else key.replace("__fp4", "__nf4"),
               key.replace("bitsandbytes__", "bitsandbytes__int8_"), key.replace("bitsandbytes__", ""),
               last, "quant_state." + key]
    return pick(fdp, options)


def mutate_tensors(fdp, tensors, prefix, log, int8=False):
    for _ in range(fdp.ConsumeIntInRange(0, 6)):
        if not tensors:
            break
        keys = sorted(tensors)
        kind = fdp.ConsumeIntInRange(0, 6)
        qs = qs_key_of(tensors)
        if kind == 6:
            if not int8:
                consistent_change(fdp, tensors, prefix, log)
            continue
        if kind == 0 and qs is not None and isinstance(tensors[qs], np.ndarray) and tensors[qs].dtype == np.uint8:
            tensors[qs] = np.frombuffer(mutate_json(fdp, np.ascontiguousarray(tensors[qs]).tobytes(), log),
                                        np.uint8).copy()
        elif kind <= 2:
            k = pick(fdp, keys)
            tensors[k] = mutate_array(fdp, tensors[k]) if isinstance(tensors[k], np.ndarray) else any_value(fdp)
            log.append(f"{k}={describe(tensors[k])}")
        elif kind == 3:
            k = pick(fdp, keys)
            new = rename(fdp, k, prefix)
            tensors[new] = tensors.pop(k)
            log.append(f"rename {k} -> {new}")
        elif kind == 4:
            k = pick(fdp, keys)
            del tensors[k]
            log.append(f"del {k}")
        else:
            name = prefix + pick(fdp, [".weight.", ".weight.", ".", ".weight.quant_state."])
            name += pick(fdp, FIELDS + ["junk", "bitsandbytes__nf4", "bitsandbytes__fp4", "bitsandbytes__int8"])
            how = fdp.ConsumeIntInRange(0, 2)
            if how == 0:
                value = any_value(fdp)
            elif how == 1:
                value = mutate_array(fdp, tensors[pick(fdp, keys)])
            else:
                value = kbit.functional.pack_dict_to_tensor(
                    {"quant_type": pick(fdp, ["nf4", "fp4", "int8"]), "blocksize": 64, "dtype": "float32",
                     "shape": [fdp.ConsumeIntInRange(0, 100)]})
            tensors[name] = value
            log.append(f"add {name}={describe(value)}")
    return tensors


# ---- checks -------------------------------------------------------------------------------------

def check_refusal(e, prefixes, inputs, log):
    """A refusal must be ValueError/TypeError/KeyError, start with the function's name and name a key."""
    if not isinstance(e, (ValueError, TypeError, KeyError)):
        fail(log, f"unexpected exception {type(e).__name__}: {e}")
    msg = message(e)
    if not msg.startswith(prefixes):
        fail(log, f"refusal without the function's name: {type(e).__name__}: {msg}")
    keys = [k if isinstance(k, str) else repr(k) for k in inputs]
    keys = [k for k in keys if k]
    if not any(k in msg for k in keys) and not any(f in msg for f in FIELDS):
        fail(log, f"refusal naming no key or field: {type(e).__name__}: {msg}")


REFUSED = object()


def loaded(what, load, prefixes, inputs, log, valid_must_load=True):
    """load()'s result, counted as `what` accepted; or REFUSED, counted, once check_refusal passed it.
    Entries nothing mutated (an empty log) must load, unless valid_must_load is False."""
    try:
        got = load()
    except Exception as e:
        if valid_must_load and not log:
            fail(log, f"valid entries refused: {type(e).__name__}: {e}")
        fc.count(f"{what} refused {type(e).__name__}")
        check_refusal(e, prefixes, inputs, log)
        return REFUSED
    fc.count(f"{what} accepted" + (" mutated" if log else ""))
    return got


def check_4bit(packed, state, log, expected=None):
    if not isinstance(state, QuantState):
        fail(log, f"load returned {type(state).__name__}, not a QuantState")
    n = math.prod(state.shape)
    if n > MAX_DEQUANT:
        return None
    try:
        out = kbit.dequantize_4bit(packed, state)
    except Exception as e:
        fail(log, f"accepted state {state!r} does not dequantize: {type(e).__name__}: {e}")
    if not isinstance(out, np.ndarray) or out.shape != state.shape or out.dtype != state.dtype:
        fail(log, f"dequantize_4bit gave {describe(out)} for {state!r}")
    if expected is not None and out.tobytes() != expected.tobytes():
        fail(log, "the unmutated checkpoint does not dequantize to the quantized weight")
    if len(state.shape) == 2 and state.shape[1] % 2 == 0 and state.shape[1]:
        A = np.ones((1, state.shape[1]), state.dtype)
        try:
            y = kbit.gemv_4bit(A, packed, state=state)
        except (ValueError, TypeError) as e:
            if not message(e).startswith("gemv_4bit:"):
                fail(log, f"gemv_4bit refused without its name: {type(e).__name__}: {e}")
        except Exception as e:
            fail(log, f"gemv_4bit on an accepted state raised {type(e).__name__}: {e}")
        else:
            if y.shape != (1, state.shape[0]):
                fail(log, f"gemv_4bit gave shape {y.shape}")
    return out


def check_int8(CB, SCB, log):
    try:
        rows, cols = CB.shape
        acc = kbit.int8_linear_matmul(np.ones((1, cols), np.int8), CB)
        out = kbit.int8_mm_dequant(acc, np.ones(1, np.float32), SCB)
    except Exception as e:
        fail(log, f"accepted int8 entries CB {describe(CB)}, SCB {describe(SCB)} do not multiply: "
                  f"{type(e).__name__}: {e}")
    if out.shape != (1, rows) or out.dtype != np.float16:
        fail(log, f"int8_mm_dequant gave {describe(out)}")


def savable(tensors):
    return all(isinstance(k, str) and k and k != "__metadata__" for k in tensors) and \
        all(type(v) is np.ndarray and v.dtype.name in SAVABLE for v in tensors.values())


def round_trip(tensors, prefix, log, int8):
    """save -> load gives the same entries, and they load (and dequantize) as before."""
    if not savable(tensors):
        return
    try:
        checkpoint.save(ST_PATH, tensors)
        back = checkpoint.load(ST_PATH)
    except Exception as e:
        fail(log, f"save/load of accepted entries failed: {type(e).__name__}: {e}")
    finally:
        if os.path.exists(ST_PATH):
            os.remove(ST_PATH)
    if sorted(back) != sorted(tensors):
        fail(log, f"round trip keys {sorted(back)} != {sorted(tensors)}")
    for k, v in tensors.items():
        b = back[k]
        v = v.astype(v.dtype.newbyteorder("="))  # safetensors stores little-endian, in native order
        if b.dtype != v.dtype or b.shape != v.shape or b.tobytes() != np.ascontiguousarray(v).tobytes():
            fail(log, f"round trip changed {k}: {describe(v)} -> {describe(b)}")
    try:
        if int8:
            CB, SCB = checkpoint.load_int8(back, prefix)
            return check_int8(CB, SCB, log)
        packed, state = checkpoint.load_4bit(back, prefix)
    except Exception as e:
        fail(log, f"entries accepted before saving are refused after loading: {type(e).__name__}: {e}")
    return check_4bit(packed, state, log)


# ---- the target ---------------------------------------------------------------------------------

def one_4bit(fdp, mode, log):
    packed, state, expected = base_4bit(fdp)
    prefix = pick(fdp, PREFIXES)
    tensors = checkpoint.tensors_4bit(prefix, packed, state)
    if len(state.shape) == 2 and fdp.ConsumeBool():
        tensors[prefix + ".bias"] = np.zeros(state.shape[0], state.dtype)
    name = prefix + ".weight"
    if mode == 2:  # the unpacked fields of as_dict(), keys without prefixes
        d = state.as_dict(packed=False)
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            k = pick(fdp, sorted(d, key=repr) + ["junk", "quant_state", 0, None, b"absmax", ("shape",)])
            how = fdp.ConsumeIntInRange(0, 2)
            if how == 0 and k in d:
                del d[k]
                log.append(f"del {k!r}")
            elif how == 1 and isinstance(d.get(k), np.ndarray):
                d[k] = mutate_array(fdp, d[k])
                log.append(f"{k!r}={describe(d[k])}")
            else:
                d[k] = shape_variant(fdp, state.shape) if k == "shape" and fdp.ConsumeBool() else any_value(fdp)
                log.append(f"{k!r}={describe(d[k])}")
        inputs = d
        got = loaded("from_dict(unpacked)", lambda: QuantState.from_dict(d), ("QuantState.from_dict:",), inputs, log,
                     valid_must_load=False)
        if got is REFUSED:
            return None
        return check_4bit(_packed_for(got, packed), got, log, expected if not log else None)
    mutate_tensors(fdp, tensors, prefix, log)
    load_prefix = prefix if fdp.ConsumeIntInRange(0, 7) else pick(fdp, PREFIXES + ["", prefix + ".weight"])
    if load_prefix != prefix:
        log.append(f"load prefix {load_prefix!r}")
    if mode == 0:
        got = loaded("load_4bit", lambda: checkpoint.load_4bit(tensors, load_prefix),
                     ("load_4bit:", "QuantState.from_dict:"), tensors, log)
        if got is REFUSED:
            return None
        got_packed, got = got
        check_4bit(got_packed, got, log, expected if not log else None)
        return round_trip(tensors, load_prefix, log, int8=False)
    # mode 1: from_dict over the entries under P.weight., with full or relative keys
    lname = load_prefix + ".weight"
    sub = {k: v for k, v in tensors.items() if k.startswith(lname + ".")}
    if fdp.ConsumeBool():
        sub = {k[len(lname) + 1:]: v for k, v in sub.items()}
        log.append("relative keys")
    got = loaded("from_dict", lambda: QuantState.from_dict(sub), ("QuantState.from_dict:",), sub, log)
    if got is REFUSED:
        return None
    check_4bit(_packed_for(got, tensors.get(name, packed)), got, log, expected if not log else None)


def _packed_for(state, packed):
    """The packed bytes to dequantize a state from_dict accepted: `packed` where its size fits the
    state's shape, zeros otherwise (from_dict never sees the packed weight)."""
    n = math.prod(state.shape) if state.shape is not None else 0
    need = (n + 1) // 2
    if isinstance(packed, np.ndarray) and packed.flags.c_contiguous and packed.nbytes == need:
        return packed
    return np.zeros((need, 1), np.uint8) if n <= MAX_DEQUANT else None


def one_int8(fdp, log):
    CB, SCB = base_int8(fdp)
    prefix = pick(fdp, PREFIXES)
    tensors = checkpoint.tensors_int8(prefix, CB, SCB)
    if fdp.ConsumeBool():
        tensors[f"{prefix}.weight_format"] = pick(fdp, [np.array(0, np.uint8), np.array([0], np.int64),
                                                         np.array(1, np.uint8), np.array(0.0), "row", 0,
                                                         np.array([[0]], np.int8), np.array([], np.uint8),
                                                         np.array(2**64 - 1, np.uint64), np.array(True),
                                                         np.array(-1, np.int8), [0], [[0], [0, 1]], None])
        log.append(f"weight_format={describe(tensors[prefix + '.weight_format'])}")
    mutate_tensors(fdp, tensors, prefix, log, int8=True)
    got = loaded("load_int8", lambda: checkpoint.load_int8(tensors, prefix), ("load_int8:",), tensors, log)
    if got is REFUSED:
        return None
    got_CB, got_SCB = got
    check_int8(got_CB, got_SCB, log)
    round_trip(tensors, prefix, log, int8=True)


def TestOneInput(data):
    fc.tick(data)
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 3)
    log = []
    if mode == 3:
        one_int8(fdp, log)
    else:
        one_4bit(fdp, mode, log)


def main():
    atheris.Setup(sys.argv, fc.keep_going(TestOneInput))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
