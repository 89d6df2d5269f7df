"""Checkpoints in transformers' / bitsandbytes' safetensors layout (semantics §2.6), read back by an
independent reader written here from the spec's rules (not the package's loader)."""
import json
import struct

import ml_dtypes
import numpy as np
import pytest

import kbit
from kbit import checkpoint

safetensors_numpy = pytest.importorskip("safetensors.numpy")

P = "model.layers.0.mlp.down_proj"


def read_safetensors_raw(path):
    """The file's header and raw tensors, parsed by hand (8-byte length, JSON header, data)."""
    blob = open(path, "rb").read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    data = blob[8 + length:]
    dtypes = {"U8": np.uint8, "I8": np.int8, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}
    tensors = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[key] = (info["dtype"], info["shape"], np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]])
                        .reshape(info["shape"]))
    return header, tensors


def transformers_reader(tensors, prefix):
    """What transformers/bitsandbytes do with the keys of one 4-bit weight: collect P.weight.*, unpack
    the one quant_state.bitsandbytes__<type> entry (JSON bytes), strip key prefixes to their last
    dotted component, rebuild absmax (nested: code[q] * nested_absmax[b // nested_blocksize], then
    + nested_offset, two fp32 roundings), and dequantize nibble * absmax (high nibble first)."""
    name = prefix + ".weight"
    items = {k[len(name) + 1:]: v for k, v in tensors.items() if k.startswith(name + ".")}
    qs = [k for k in items if "quant_state" in k]
    assert len(qs) == 1 and qs[0].split(".")[-1] in ("bitsandbytes__nf4", "bitsandbytes__fp4")
    fields = json.loads(bytes(items.pop(qs[0]).astype(np.uint8)).decode("utf-8"))
    items = {k.split(".")[-1]: v for k, v in items.items()}
    items.update(fields)
    absmax = items["absmax"]
    if "nested_absmax" in items:
        nb = items["nested_blocksize"]
        scale = np.repeat(items["nested_absmax"], nb)[: absmax.size]
        absmax = (items["nested_quant_map"][absmax] * scale).astype(np.float32)
        absmax = (absmax + np.float32(items["nested_offset"])).astype(np.float32)
    n = int(np.prod(items["shape"]))
    packed = tensors[name].reshape(-1)
    nibbles = np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[:n]
    values = items["quant_map"][nibbles] * np.repeat(absmax, items["blocksize"])[:n]
    dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[items["dtype"]]
    return values.astype(np.float32).astype(dtype).reshape(items["shape"]), items


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "plain"])
@pytest.mark.parametrize("q", ["nf4", "fp4"])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16, np.float32])
def test_4bit_checkpoint_layout_and_independent_read(tmp_path, rng, nested, q, dtype):
    N, K = 96, 320
    W = (rng.standard_normal((N, K)) * 0.05).astype(dtype)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type=q, compress_statistics=nested)
    path = tmp_path / "model.safetensors"
    tensors = checkpoint.tensors_4bit(P, packed, state)
    tensors[P + ".bias"] = np.zeros(N, dtype)
    checkpoint.save(path, tensors)

    header, raw = read_safetensors_raw(path)
    assert header["__metadata__"] == {"format": "pt"}
    blocks = N * K // 64
    expected = {P + ".weight": ("U8", [N * K // 2, 1]), P + ".weight.quant_map": ("F32", [16]),
                P + ".bias": ({np.float32: "F32", np.float16: "F16", ml_dtypes.bfloat16: "BF16"}[dtype], [N])}
    if nested:
        expected.update({P + ".weight.absmax": ("U8", [blocks]), P + ".weight.nested_absmax": ("F32", [-(-blocks // 256)]),
                         P + ".weight.nested_quant_map": ("F32", [256])})
    else:
        expected[P + ".weight.absmax"] = ("F32", [blocks])
    json_key = f"{P}.weight.quant_state.bitsandbytes__{q}"
    assert set(raw) == set(expected) | {json_key}
    for k, (dt, shape) in expected.items():
        assert (raw[k][0], raw[k][1]) == (dt, shape), k
    assert raw[json_key][0] == "U8" and len(raw[json_key][1]) == 1
    name = {np.float32: "float32", np.float16: "float16", ml_dtypes.bfloat16: "bfloat16"}[dtype]
    text = f'{{"quant_type": "{q}", "blocksize": 64, "dtype": "{name}", "shape": [{N}, {K}]'
    if nested:
        text += f', "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": {float(state.offset)!r}'
    assert bytes(raw[json_key][2]).decode() == text + "}"

    values, fields = transformers_reader({k: v[2] for k, v in raw.items()}, P)
    # Equal values; for FP4 the quant_map's +0.0 at nibble 1000 meets the kernels' -0.0 (§2.2).
    assert np.array_equal(values.astype(np.float32), kbit.dequantize_4bit(packed, state).astype(np.float32))
    assert fields["shape"] == [N, K]

    # And the package's own loader gives back the same state.
    packed2, state2 = checkpoint.load_4bit(checkpoint.load(path), P)
    assert np.array_equal(packed2, packed) and state2.nested == nested and state2.shape == (N, K)
    assert np.array_equal(kbit.dequantize_4bit(packed2, state2).view(np.uint8),
                          kbit.dequantize_4bit(packed, state).view(np.uint8))
    assert checkpoint.quantized_prefixes(checkpoint.load(path)) == {"4bit": [P], "int8": []}


def test_int8_checkpoint_layout(tmp_path, rng):
    W = (rng.standard_normal((48, 80)) * 0.1).astype(np.float16)
    CB, SCB, _ = kbit.int8_vectorwise_quant(W)
    path = tmp_path / "int8.safetensors"
    checkpoint.save(path, checkpoint.tensors_int8(P, CB, SCB))
    _, raw = read_safetensors_raw(path)
    assert {k: (v[0], v[1]) for k, v in raw.items()} == {P + ".weight": ("I8", [48, 80]), P + ".SCB": ("F32", [48]),
                                                         P + ".weight_format": ("U8", [])}
    assert raw[P + ".weight_format"][2] == 0
    assert np.array_equal(raw[P + ".weight"][2], CB) and np.array_equal(raw[P + ".SCB"][2], SCB)
    CB2, SCB2 = checkpoint.load_int8(checkpoint.load(path), P)
    assert np.array_equal(CB2, CB) and np.array_equal(SCB2, SCB)
    # Dequantized as bitsandbytes does: CB * SCB / 127.
    deq = CB2.astype(np.float32) * (SCB2[:, None] * np.float32(7.874015718698502e-3))
    assert np.abs(deq - W.astype(np.float32)).max() <= SCB.max() / 127 / 2 + 1e-3
    bad = dict(checkpoint.load(path), **{P + ".weight_format": np.array(1, np.uint8)})
    with pytest.raises(ValueError, match="weight_format is 1; only 0"):
        checkpoint.load_int8(bad, P)


def test_from_dict_accepts_unpacked_and_prefixed_packed_forms(rng):
    W = rng.standard_normal((8, 64)).astype(np.float32)
    packed, state = kbit.quantize_4bit(W, quant_type="nf4", compress_statistics=True)
    expected = kbit.dequantize_4bit(packed, state)
    s1 = kbit.QuantState.from_dict(state.as_dict(packed=False))  # plain quant_type, blocksize, ... entries
    assert s1.nested and s1.offset == state.offset and s1.shape == (8, 64) and s1.dtype == np.float32
    assert np.array_equal(kbit.dequantize_4bit(packed, s1), expected)
    prefixed = {"weight." + k: v for k, v in state.as_dict(packed=True).items()}  # as in a state_dict
    s2 = kbit.QuantState.from_dict(prefixed)
    assert s2.blocksize == 64 and s2.quant_type == "nf4" and s2.state2.blocksize == 256
    assert np.array_equal(kbit.dequantize_4bit(packed, s2), expected)
    with pytest.raises(ValueError, match="found neither"):
        kbit.QuantState.from_dict({"absmax": state.absmax})
    packed_form = state.as_dict(packed=True)
    packed_form["quant_state.bitsandbytes__int4"] = packed_form.pop("quant_state.bitsandbytes__nf4")
    with pytest.raises(ValueError, match="expected one quant_state item"):
        kbit.QuantState.from_dict(packed_form)
