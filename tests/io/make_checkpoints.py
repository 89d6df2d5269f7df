#!/usr/bin/env python3
"""ctest fixture io.make_checkpoints: writes the checkpoints tests/io/test_io.cpp reads, with the Python
package (kbit.functional.quantize_4bit, kbit.checkpoint.tensors_4bit / tensors_int8 / save), into OUT:

  good/mixed.safetensors   nf4 fp32 plain, fp4 bf16 nested, nf4 fp16 nested with an odd element count,
                           nf4 with quant_storage uint16, fp4 fp32 blocksize 4096, an LLM.int8 layer,
                           two 4-bit fused-experts parameters [E, N, K] (nf4 bf16 nested, fp4 fp32),
                           and plain tensors (a bias, an fp16 embedding, a scalar)
  good/sharded/            the same layers split over two shards with model.safetensors.index.json
  good/misaligned.safetensors   q_proj with its float tensors not 4-byte aligned (valid)
  good/deep_keys.safetensors    q_proj with its absmax and quant_map at deeper keys (valid)
  good/expected.json       every tensor (name, dtype, shape, hex of its bytes) and every layer (each
                           field kbit_io_quant describes, hex of each companion tensor, and of the 4-bit
                           weight dequantized by kbit.functional.dequantize_4bit) as Python sees them
  bad/*.safetensors, bad/<dir>/   one broken file per case; bad/cases.json lists, per case, where it
                           fails ("open" or the layer prefix), the status and a substring of the message.

Each bad case is also loaded with the Python package (kbit.checkpoint.load, load_4bit, load_int8),
which must reject it too: the C reader follows the same rules.
Usage: make_checkpoints.py OUT"""
import json
import shutil
import struct
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

import kbit.checkpoint as ckpt
from kbit.functional import dequantize_4bit, quantize_4bit

OUT = Path(sys.argv[1])
rng = np.random.default_rng(7)
INVALID = 1  # KBIT_STATUS_INVALID_ARGUMENT


def weight(shape, dtype):
    return (rng.standard_normal(shape).astype(np.float32) * 0.5).astype(dtype)


def layers():
    """{prefix: tensors} of the test layers."""
    out = {}

    def four(prefix, shape, dtype, quant_type, blocksize, nested, storage=np.uint8, parameter=False):
        packed, state = quantize_4bit(weight(shape, dtype), blocksize=blocksize, compress_statistics=nested,
                                      quant_type=quant_type, quant_storage=storage)
        out[prefix] = ckpt.tensors_4bit(prefix, packed, state, parameter=parameter)

    four("model.layers.0.q_proj", (8, 32), np.float32, "nf4", 64, False)
    four("model.layers.0.k_proj", (16, 64), ml_dtypes.bfloat16, "fp4", 128, True)
    four("model.layers.1.odd", (3, 11), np.float16, "nf4", 32, True)
    four("model.layers.1.storage", (4, 16), np.float32, "nf4", 64, False, np.uint16)
    four("model.layers.2.big", (2, 5000), np.float32, "fp4", 4096, False)
    four("model.layers.3.mlp.experts.gate_up_proj", (4, 16, 32), ml_dtypes.bfloat16, "nf4", 64, True, parameter=True)
    four("model.layers.3.mlp.experts.down_proj", (4, 32, 8), np.float32, "fp4", 32, False, parameter=True)
    w = weight((6, 10), np.float32)
    scb = np.abs(w).max(axis=1).astype(np.float32)
    cb = np.round(w * (127 / scb[:, None])).astype(np.int8)
    out["model.layers.2.int8"] = ckpt.tensors_int8("model.layers.2.int8", cb, scb)
    out["model.layers.0.q_proj"]["model.layers.0.q_proj.bias"] = weight((8,), np.float32)
    out["plain"] = {"model.embed.weight": weight((5, 4), np.float16), "model.scale": np.array(2.5, np.float32)}
    return out


def hexof(a):
    return np.ascontiguousarray(a).tobytes().hex() if a.ndim else a.tobytes().hex()


def expected(groups):
    tensors = {}
    for g in groups.values():
        tensors.update(g)
    exp = {"tensors": {}, "layers": {}}
    for name, a in tensors.items():
        exp["tensors"][name] = {"dtype": str(a.dtype), "shape": list(a.shape), "hex": hexof(a)}
    prefixes = ckpt.quantized_prefixes(tensors)
    for p in prefixes["4bit"]:
        packed, state = ckpt.load_4bit(tensors, p)
        parameter = ckpt.is_parameter_4bit(tensors, p)
        e = {"weight_name": p if parameter else p + ".weight", "parameter": parameter,
             "experts": state.shape[0] if parameter and len(state.shape) == 3 else 0, "format": state.quant_type, "blocksize": state.blocksize, "shape": list(state.shape),
             "dtype": state.dtype.name, "nested": state.nested, "storage": str(packed.dtype),
             "weight": hexof(packed), "absmax": hexof(state.absmax), "quant_map": hexof(state.code),
             "dequantized": hexof(dequantize_4bit(packed.view(np.uint8).reshape(-1, 1), state))}
        if state.nested:
            e.update({"nested_absmax": hexof(state.state2.absmax), "nested_quant_map": hexof(state.state2.code),
                      "nested_blocksize": state.state2.blocksize,
                      "nested_offset_bits": int(np.float32(state.offset).view(np.uint32))})
        exp["layers"][p] = e
    for p in prefixes["int8"]:
        cb, scb = ckpt.load_int8(tensors, p)
        exp["layers"][p] = {"format": "int8", "shape": list(cb.shape), "weight": hexof(cb), "scb": hexof(scb),
                            "weight_name": p + ".weight", "parameter": False, "experts": 0}
    exp["order"] = prefixes["4bit"] + prefixes["int8"]
    return tensors, exp


# ---- raw safetensors, for the broken files ---------------------------------------------------------

def raw_file(path, header, data, header_len=None, pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    n = len(h) if header_len is None else header_len
    Path(path).write_bytes(struct.pack("<Q", n) + h + data)


def tensors_file(path, tensors, metadata=None, order=None):
    """A safetensors file of numpy arrays written by hand (so that tests can break any part); `order`:
    the names in data order (default: by descending element size, as safetensors writes them)."""
    header, data = {}, b""
    for name in order or sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k)):
        b = tensors[name].tobytes()
        header[name] = {"dtype": SAFE_DTYPE[tensors[name].dtype.str[1:]], "shape": list(tensors[name].shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    if metadata is not None:
        header["__metadata__"] = metadata
    raw_file(path, header, data)
    return header, data


SAFE_DTYPE = {"f4": "F32", "f2": "F16", "u1": "U8", "i1": "I8", "u2": "U16", "i4": "I32"}


def qs_json(tensors, prefix, suffix="nf4"):
    return json.loads(bytes(tensors[f"{prefix}.weight.quant_state.bitsandbytes__{suffix}"]).decode())


def set_qs(tensors, prefix, fields, suffix="nf4", raw=None):
    key = f"{prefix}.weight.quant_state.bitsandbytes__{suffix}"
    text = raw if raw is not None else json.dumps(fields).encode()
    tensors[key] = np.frombuffer(text, dtype=np.uint8).copy()


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "good" / "sharded").mkdir(parents=True)
    (OUT / "bad").mkdir()
    groups = layers()
    tensors, exp = expected(groups)
    ckpt.save(OUT / "good" / "mixed.safetensors", tensors)
    # Shards: the 4-bit layers in one, the rest in the other.
    shard_a = {k: v for g in groups.values() if any(".weight.quant_state." in k for k in g) for k, v in g.items()}
    shard_b = {k: v for k, v in tensors.items() if k not in shard_a}
    names = {"model-00001-of-00002.safetensors": shard_a, "model-00002-of-00002.safetensors": shard_b}
    weight_map = {}
    for fname, part in names.items():
        ckpt.save(OUT / "good" / "sharded" / fname, part)
        weight_map.update({k: fname for k in part})
    (OUT / "good" / "sharded" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": sum(a.nbytes for a in tensors.values())}, "weight_map": weight_map}))
    exp["shards"] = sorted(names)
    (OUT / "good" / "expected.json").write_text(json.dumps(exp, indent=1))
    # A valid file whose float tensors are not 4-byte aligned (a 3-byte tensor first): the Python
    # package reads it (it copies), the C reader describes it with aligned = false.
    odd = {**groups["model.layers.0.q_proj"], "note": np.zeros(3, np.uint8)}
    tensors_file(OUT / "good" / "misaligned.safetensors", odd, order=["note"] + sorted(k for k in odd if k != "note"))
    ckpt.load_4bit(ckpt.load(OUT / "good" / "misaligned.safetensors"), "model.layers.0.q_proj")
    # A valid file whose companion tensors sit at deeper keys under P.weight. (from_dict keeps each key's
    # last component): the absmax and quant_map of model.layers.0.q_proj renamed below an extra level.
    P = "model.layers.0.q_proj.weight"
    deep = {(k.replace(P + ".", P + ".extra.") if k in (P + ".absmax", P + ".quant_map") else k): v
            for k, v in groups["model.layers.0.q_proj"].items()}
    tensors_file(OUT / "good" / "deep_keys.safetensors", deep)
    ckpt.load_4bit(ckpt.load(OUT / "good" / "deep_keys.safetensors"), "model.layers.0.q_proj")
    bad_cases()


def bad_cases():
    cases = []
    bad = OUT / "bad"
    nf4, nf4_state = quantize_4bit(weight((8, 32), np.float32), blocksize=64, quant_type="nf4")
    nested, nested_state = quantize_4bit(weight((8, 32), np.float32), blocksize=64, quant_type="nf4",
                                         compress_statistics=True)
    P = "m.l"

    def base(kind="nf4"):
        if kind == "nested":
            return dict(ckpt.tensors_4bit(P, nested, nested_state))
        if kind == "int8":
            cb = rng.integers(-127, 128, (4, 6), dtype=np.int8)
            return dict(ckpt.tensors_int8(P, cb, np.ones(4, np.float32)))
        return dict(ckpt.tensors_4bit(P, nf4, nf4_state))

    def python_rejects(path, where):
        try:
            t = ckpt.load(path)
            if where != "open":
                if f"{where}.SCB" in t:
                    ckpt.load_int8(t, where)
                else:
                    ckpt.load_4bit(t, where)
        except Exception:  # ValueError, TypeError, KeyError, and safetensors' own error types
            return True
        return False

    def case(name, where, message, tensors=None, writer=None, check_python=True):
        path = bad / name
        if writer is not None:
            writer(path)
        else:
            tensors_file(path, tensors)
        if check_python and path.is_file() and not python_rejects(path, where):
            raise SystemExit(f"make_checkpoints: the Python package accepts bad case {name}")
        cases.append({"file": name, "where": where, "status": INVALID, "message": message})

    # -- the container
    good = bad / "_good.safetensors"
    tensors_file(good, base())
    g = good.read_bytes()
    case("short.safetensors", "open", "too short for the 8-byte header length", writer=lambda p: p.write_bytes(g[:5]))
    case("truncated.safetensors", "open", "run past the end of the data",
         writer=lambda p: p.write_bytes(g[:len(g) - 7]))
    case("header_past_end.safetensors", "open", "runs past the end of the file",
         writer=lambda p: p.write_bytes(struct.pack("<Q", len(g)) + g[8:]))
    case("header_huge.safetensors", "open", "larger than the limit",
         writer=lambda p: p.write_bytes(struct.pack("<Q", 1 << 40) + g[8:]))
    case("bad_json.safetensors", "open", "the header is not valid JSON",
         writer=lambda p: p.write_bytes(struct.pack("<Q", 9) + b'{"a": 1,}'))
    case("not_object.safetensors", "open", "does not start with '{'",
         writer=lambda p: p.write_bytes(struct.pack("<Q", 2) + b"[]"))
    f32 = np.arange(4, dtype=np.float32).tobytes()
    case("offsets_past_end.safetensors", "open", "run past the end of the data",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}, f32))
    case("overlap.safetensors", "open", "without gap or overlap",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, f32))
    case("gap.safetensors", "open", "without gap or overlap",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, f32))
    case("unordered.safetensors", "open", "end before they begin",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [0], "data_offsets": [16, 0]}}, f32))
    case("size_mismatch.safetensors", "open", "hold 16 bytes, shape [3] of F32 needs 12",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, f32))
    case("unknown_dtype.safetensors", "open", "unknown dtype \"F128\"",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}, f32))
    case("negative_shape.safetensors", "open", "is not a list of non-negative integers",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, f32))
    case("minus_zero_shape.safetensors", "open", "is not a list of non-negative integers",  # serde: -0.0
         writer=lambda p: p.write_bytes(struct.pack("<Q", 55) +
                                        b'{"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}'))
    case("trailing_data.safetensors", "open", "the file has 20 after the header",
         writer=lambda p: raw_file(p, {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, f32 + b"xxxx"))
    case("metadata_value.safetensors", "open", "__metadata__ 'format' is",
         writer=lambda p: raw_file(p, {"__metadata__": {"format": 1},
                                       "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, f32))

    # -- 4-bit layers
    def qs_case(name, message, edit, kind="nf4", suffix="nf4", raw=None):
        t = base(kind)
        fields = qs_json(t, P, suffix)
        edit(fields)
        del t[f"{P}.weight.quant_state.bitsandbytes__{suffix}"]
        set_qs(t, P, fields, suffix, raw)
        case(name, P, message, t)

    qs_case("qs_bad_json.safetensors", "is not a JSON object", lambda f: None, raw=b'{"quant_type": "nf4",')
    qs_case("qs_list.safetensors", "is not a JSON object but array", lambda f: None, raw=b'[1, 2]')
    qs_case("qs_type_mismatch.safetensors", "quant_type \"fp4\" does not match the key's 'nf4'",
            lambda f: f.update(quant_type="fp4"))
    qs_case("qs_blocksize_48.safetensors", "blocksize 48 is not one of 32, 64, 128", lambda f: f.update(blocksize=48))
    qs_case("qs_blocksize_str.safetensors", "blocksize \"64\" is not one of", lambda f: f.update(blocksize="64"))
    qs_case("qs_blocksize_float.safetensors", "blocksize 64.0 is not one of", lambda f: f.update(blocksize=64.0))
    qs_case("qs_dtype.safetensors", "dtype \"int8\" is not one of float32, float16, bfloat16",
            lambda f: f.update(dtype="int8"))
    qs_case("qs_shape.safetensors", "shape \"8x32\" is not a list of non-negative integers",
            lambda f: f.update(shape="8x32"))
    qs_case("qs_missing_shape.safetensors", "missing shape", lambda f: f.pop("shape"))
    qs_case("qs_absmax_count.safetensors", "the shape [8, 64] with blocksize 64 needs 8",
            lambda f: f.update(shape=[8, 64]))
    qs_case("qs_offset_inf.safetensors", "nested_offset 1e+39 is not a finite float32 number",
            lambda f: f.update(nested_offset=1e39), kind="nested")
    qs_case("qs_offset_nan.safetensors", "is not a JSON object",
            lambda f: None, kind="nested",
            raw=json.dumps({**qs_json(base("nested"), P), "nested_offset": float("nan")}).encode())
    qs_case("qs_offset_str.safetensors", "nested_offset \"0.1\" is not a finite float32 number",
            lambda f: f.update(nested_offset="0.1"), kind="nested")
    qs_case("qs_nested_blocksize.safetensors", "nested_blocksize 100 is not one of",
            lambda f: f.update(nested_blocksize=100), kind="nested")
    qs_case("qs_nested_missing.safetensors", "missing nested_blocksize", lambda f: f.pop("nested_blocksize"),
            kind="nested")

    t = base()
    t[f"{P}.weight.quant_state.bitsandbytes__int3"] = t.pop(f"{P}.weight.quant_state.bitsandbytes__nf4")
    case("qs_unknown_type.safetensors", P, "expected one quant_state item ending in one of", t)
    t = base()
    del t[f"{P}.weight.absmax"]
    case("missing_absmax.safetensors", P, "missing absmax", t)
    t = base()
    del t[f"{P}.weight"]
    case("missing_weight.safetensors", P, "load_4bit: m.l.weight not in the checkpoint", t)
    t = base("nested")
    del t[f"{P}.weight.nested_quant_map"]
    case("missing_nested_map.safetensors", P, "missing nested_quant_map", t)
    t = base()
    t[f"{P}.weight.absmax"] = t[f"{P}.weight.absmax"][:-1].copy()
    case("absmax_short.safetensors", P, "m.l.weight.absmax has 3 elements, the shape [8, 32] with blocksize 64 needs 4",
         t)
    t = base("nested")
    t[f"{P}.weight.absmax"] = t[f"{P}.weight.absmax"].astype(np.float32)
    case("nested_absmax_dtype.safetensors", P, "m.l.weight.absmax has dtype F32, expected U8", t)
    t = base()
    t[f"{P}.weight.quant_map"] = t[f"{P}.weight.quant_map"][:8].copy()
    case("quant_map_short.safetensors", P, "quant_map has 8 elements, expected 16", t)
    t = base()
    t[f"{P}.weight"] = t[f"{P}.weight"][:-1].copy()
    case("packed_short.safetensors", P, "load_4bit: m.l.weight holds 127 bytes", t)
    t = base()
    t[f"{P}.bias"] = np.zeros(32, np.float32)
    case("bias_mismatch.safetensors", P, "m.l.bias has 32 elements", t)
    t = base()
    t[f"{P}.weight.quant_state.bitsandbytes__nf4"] = t[f"{P}.weight.quant_state.bitsandbytes__nf4"].view(np.int8)
    case("qs_dtype_i8.safetensors", P, "has dtype I8, expected U8", t)

    # -- LLM.int8
    # -- 4-bit parameters (fused experts [E, N, K] under their own key X)
    X = "m.experts.w"
    xw, xs = quantize_4bit(weight((4, 8, 64), np.float32), blocksize=64, quant_type="nf4")
    xt = ckpt.tensors_4bit(X, xw, xs, parameter=True)
    t = dict(xt)
    t[X] = t[X][:-1].copy()
    case("experts_packed_short.safetensors", X, "load_4bit: m.experts.w holds 1023 bytes, its quant_state shape "
         "[4, 8, 64] needs 1024", t)
    t = dict(xt)
    t[f"{X}.quant_state.bitsandbytes__nf4"] = np.frombuffer(json.dumps(
        {**json.loads(bytes(t[f"{X}.quant_state.bitsandbytes__nf4"]).decode()), "shape": [4, 8, 32]}).encode(),
        dtype=np.uint8).copy()
    case("experts_shape.safetensors", X, "m.experts.w.absmax has 32 elements, the shape [4, 8, 32] with blocksize 64 "
         "needs 16", t)
    t = dict(xt)
    del t[X]
    case("experts_missing.safetensors", X, "load_4bit: m.experts.w not in the checkpoint", t)

    t = base("int8")
    t[f"{P}.SCB"] = np.ones(3, np.float32)
    case("scb_count.safetensors", P, "m.l.SCB has 3 elements, the weight's 4 rows need 4", t)
    t = base("int8")
    t[f"{P}.weight_format"] = np.array(1, np.uint8)
    case("weight_format.safetensors", P, "m.l.weight_format is 1; only 0 (row) is supported", t)
    t = base("int8")
    t[f"{P}.weight"] = t[f"{P}.weight"].astype(np.float16)
    case("int8_dtype.safetensors", P, "m.l.weight has dtype F16, expected I8", t)
    t = base("int8")
    t[f"{P}.weight"] = t[f"{P}.weight"].reshape(-1)
    t[f"{P}.SCB"] = np.ones(24, np.float32)
    case("int8_1d.safetensors", P, "must be 2-D [out, in], not [24]", t)

    # -- sharded directories
    def sharded(name, message, weight_map, shards):
        d = bad / name
        d.mkdir()
        for fname, part in shards.items():
            tensors_file(d / fname, part)
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        cases.append({"file": name, "where": "open", "status": INVALID, "message": message})

    a = {"x": np.ones(2, np.float32)}
    b = {"y": np.ones(2, np.float32)}
    sharded("shard_missing", "cannot open", {"x": "a.safetensors", "y": "b.safetensors"}, {"a.safetensors": a})
    sharded("shard_outside", "outside the directory", {"x": "../a.safetensors"}, {"a.safetensors": a})
    sharded("shard_not_holding", "which does not hold it", {"x": "a.safetensors", "y": "a.safetensors"},
            {"a.safetensors": a, "b.safetensors": b})
    sharded("shard_duplicate", "tensor 'x' is also in", {"x": "a.safetensors", "y": "b.safetensors"},
            {"a.safetensors": a, "b.safetensors": {**b, **a}})
    sharded("shard_bad_index", "weight_map: missing or not a JSON object", None, {"a.safetensors": a})
    good.unlink()
    (bad / "cases.json").write_text(json.dumps(cases, indent=1))


if __name__ == "__main__":
    main()
