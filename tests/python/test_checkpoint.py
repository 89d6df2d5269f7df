"""Checkpoints in transformers' / bitsandbytes' safetensors layout (docs/behaviour.md §11), read back by an
independent reader written here from the spec's rules (not the package's loader)."""
import json
import math
import re
import struct

import ml_dtypes
import numpy as np
import pytest

import kbit
from kbit import checkpoint
from conftest import misaligned

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


# ---- load_4bit / load_int8 / from_dict refuse inconsistent entries before any C call ---------------

JSON_KEY = P + ".weight.quant_state.bitsandbytes__nf4"


@pytest.fixture
def saved_4bit(rng):
    """Checkpoint entries of a nested NF4 weight [96, 320] (blocksize 64, 480 blocks) with its bias."""
    W = (rng.standard_normal((96, 320)) * 0.05).astype(np.float16)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=True)
    tensors = checkpoint.tensors_4bit(P, packed, state)
    tensors[P + ".bias"] = np.zeros(96, np.float16)
    return tensors


def with_json(tensors, text=None, key=JSON_KEY, **fields):
    """A copy of the entries with the quant_state JSON replaced by `text`, or with `fields` changed in
    it (a value of KeyError removes the field)."""
    out = dict(tensors)
    old = out.pop(JSON_KEY)
    if text is None:
        d = json.loads(bytes(old).decode())
        for k, v in fields.items():
            if v is KeyError:
                del d[k]
            else:
                d[k] = v
        text = json.dumps(d)
    out[key] = np.frombuffer(text.encode() if isinstance(text, str) else text, np.uint8).copy()
    return out


def refused(exc, msg, tensors):
    with pytest.raises(exc, match=r"^" + msg):
        checkpoint.load_4bit(tensors, P)


def test_load_4bit_json_quant_type_must_match_the_key(saved_4bit):
    # The __fp4 key with an "nf4" JSON (and the other way round) was loaded as whatever the JSON said.
    fp4_key = P + ".weight.quant_state.bitsandbytes__fp4"
    refused(ValueError, re.escape(f"QuantState.from_dict: {fp4_key}: quant_type 'nf4' does not match the key's "
                                  "'fp4'"), with_json(saved_4bit, key=fp4_key))
    refused(ValueError, re.escape(f"QuantState.from_dict: {JSON_KEY}: quant_type 'fp4' does not match the key's "
                                  "'nf4'"), with_json(saved_4bit, quant_type="fp4"))
    refused(ValueError, re.escape(f"QuantState.from_dict: {JSON_KEY}: quant_type 'int4' does not match"),
            with_json(saved_4bit, quant_type="int4"))


def test_load_4bit_shape_must_match_the_bytes_and_scales(saved_4bit):
    # 30718 elements: the same 480 blocks of 64, one byte fewer than the stored 15360.
    refused(ValueError, re.escape(f"load_4bit: {P}.weight holds 15360 bytes, its quant_state shape [30718] needs "
                                  "15359"), with_json(saved_4bit, shape=[30718]))
    refused(ValueError, re.escape(f"QuantState.from_dict: {P}.weight.absmax has 480 elements, the shape [96, 640] "
                                  "with blocksize 64 needs 960"), with_json(saved_4bit, shape=[96, 640]))
    refused(ValueError, re.escape(f"QuantState.from_dict: {P}.weight.absmax has 480 elements, the shape [96, 320] "
                                  "with blocksize 128 needs 240"), with_json(saved_4bit, blocksize=128))
    # Transposed: same bytes and scales; the bias [96] of the Linear4bit [96, 320] still tells.
    transposed = with_json(saved_4bit, shape=[320, 96])
    refused(ValueError, re.escape(f"load_4bit: {P}.bias has 96 elements, the quant_state shape [320, 96] of "
                                  f"{P}.weight needs 320"), transposed)
    del transposed[P + ".bias"]
    assert checkpoint.load_4bit(transposed, P)[1].shape == (320, 96)  # nothing else records the orientation


MALFORMED = [  # field of the JSON, its bad value (KeyError: left out), message after the JSON's key
    ("nested_offset", float("nan"), "nested_offset nan is not a finite float32 number"),
    ("nested_offset", float("inf"), "nested_offset inf is not a finite float32 number"),
    ("nested_offset", 1e39, r"nested_offset 1e\+39 is not a finite float32 number"),
    ("nested_offset", "0.5", "nested_offset '0.5' is not a finite float32 number"),
    ("nested_offset", True, "nested_offset True is not a finite float32 number"),
    ("nested_offset", None, "nested_offset None is not a finite float32 number"),
    ("blocksize", "64", "blocksize '64' is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096"),
    ("blocksize", 48, "blocksize 48 is not one of 32, 64"),
    ("blocksize", 64.0, "blocksize 64.0 is not one of 32, 64"),
    ("blocksize", 8192, "blocksize 8192 is not one of 32, 64"),
    ("nested_blocksize", 16, "nested_blocksize 16 is not one of 32, 64"),
    ("dtype", "float64", "dtype 'float64' is not one of float32, float16, bfloat16"),
    ("dtype", "nonsense", "dtype 'nonsense' is not one of float32, float16, bfloat16"),
    ("dtype", 3, "dtype 3 is not one of float32"),
    ("nested_dtype", "float16", "nested_dtype 'float16' is not one of float32"),
    ("shape", "96x320", "shape '96x320' is not a list of non-negative integers"),
    ("shape", [96, -320], r"shape \[96, -320\] is not a list of non-negative integers"),
    ("shape", [96.0, 320], r"shape \[96.0, 320\] is not a list of non-negative integers"),
    ("shape", None, "shape None is not a list of non-negative integers"),
    ("blocksize", KeyError, "missing blocksize"),
    ("shape", KeyError, "missing shape"),
    ("nested_offset", KeyError, "missing nested_offset"),
]


@pytest.mark.parametrize("field,value,msg", MALFORMED, ids=[f"{m[0]}-{i}" for i, m in enumerate(MALFORMED)])
def test_load_4bit_malformed_json_fields(saved_4bit, field, value, msg):
    # Each one was a KeyError/TypeError naming no key, a silently wrong state, or a NaN spread over
    # every scale.
    refused(ValueError, re.escape(f"QuantState.from_dict: {JSON_KEY}: ") + msg,
            with_json(saved_4bit, **{field: value}))


@pytest.mark.parametrize("text,msg", ids=["text", "not-utf8", "list", "str"], argvalues=[
    ("not json", r"is not a JSON object \(Expecting value"),
    (b"\xff\xfe", r"is not a JSON object \('utf-8' codec can't decode"),
    ("[1, 2]", "is not a JSON object but list"),
    ('"nf4"', "is not a JSON object but str"),
])
def test_load_4bit_json_that_is_not_an_object(saved_4bit, text, msg):
    refused(ValueError, re.escape(f"QuantState.from_dict: {JSON_KEY} ") + msg, with_json(saved_4bit, text))


def test_load_4bit_checks_the_tensors(saved_4bit):
    def changed(key, value):
        return dict(saved_4bit, **{f"{P}.weight.{key}": value})

    w = f"QuantState.from_dict: {P}.weight"
    refused(ValueError, re.escape(f"{w}.absmax has 479 elements, the shape [96, 320] with blocksize 64 needs 480"),
            changed("absmax", np.zeros(479, np.uint8)))
    refused(TypeError, re.escape(f"{w}.absmax has dtype float32, expected uint8"),  # nested: uint8 codes
            changed("absmax", np.zeros(480, np.float32)))
    refused(ValueError, re.escape(f"{w}.nested_absmax has 1 elements, 480 blocks of absmax need 2"),
            changed("nested_absmax", np.zeros(1, np.float32)))
    refused(ValueError, re.escape(f"{w}.quant_map has 15 elements, expected 16"),
            changed("quant_map", np.zeros(15, np.float32)))
    refused(ValueError, re.escape(f"{w}.nested_quant_map has 16 elements, expected 256"),
            changed("nested_quant_map", np.zeros(16, np.float32)))
    refused(TypeError, re.escape(f"{w}.nested_quant_map must be an array, not list"),
            changed("nested_quant_map", [0.0] * 256))
    refused(TypeError, re.escape(f"QuantState.from_dict: {JSON_KEY} has dtype float32, expected uint8"),
            dict(saved_4bit, **{JSON_KEY: saved_4bit[JSON_KEY].astype(np.float32)}))
    # The JSON's nested fields without the nested tensors.
    plain = {k: v for k, v in saved_4bit.items() if "nested" not in k}
    refused(ValueError, re.escape(f"QuantState.from_dict: {JSON_KEY}: missing nested_absmax, nested_quant_map"),
            plain)
    refused(TypeError, re.escape(f"load_4bit: {P}.weight must be an array, not bytes"),
            dict(saved_4bit, **{P + ".weight": bytes(15360)}))


def test_from_dict_unpacked_form_is_checked_too(rng):
    W = rng.standard_normal((8, 64)).astype(np.float32)
    _, state = kbit.quantize_4bit(W, quant_type="fp4")
    d = state.as_dict(packed=False)
    with pytest.raises(ValueError, match=r"^QuantState.from_dict: quant_state: quant_type 'int4' is not one of "
                                         r"fp4, nf4$"):
        kbit.QuantState.from_dict(dict(d, quant_type="int4"))
    with pytest.raises(ValueError, match=r"^QuantState.from_dict: quant_state: quant_type \['nf4'\] is not one of"):
        kbit.QuantState.from_dict(dict(d, quant_type=["nf4"]))
    with pytest.raises(ValueError, match=r"^QuantState.from_dict: absmax has 8 elements, the shape \[8, 65\] "
                                         r"with blocksize 64 needs 9$"):
        kbit.QuantState.from_dict(dict(d, shape=[8, 65]))
    s = kbit.QuantState.from_dict(dict(d, shape=np.array([8, 64]).tolist(), blocksize=np.int64(64)))
    assert s.shape == (8, 64) and s.blocksize == 64 and type(s.blocksize) is int
    _, nested = kbit.quantize_4bit(W, quant_type="fp4", compress_statistics=True)
    s = kbit.QuantState.from_dict(dict(nested.as_dict(packed=False), nested_offset=nested.offset))  # np.float32
    assert s.offset == nested.offset
    with pytest.raises(ValueError, match=r"^QuantState.from_dict: quant_state: nested_offset (np\.float32\()?nan\)? "
                                         r"is not a finite float32 number$"):  # the repr of numpy 1 or 2
        kbit.QuantState.from_dict(dict(nested.as_dict(packed=False), nested_offset=np.float32("nan")))


@pytest.fixture
def saved_int8(rng):
    CB, SCB, _ = kbit.int8_vectorwise_quant((rng.standard_normal((48, 80)) * 0.1).astype(np.float16))
    return checkpoint.tensors_int8(P, CB, SCB)


def test_load_int8_checks_scb_against_the_rows(saved_int8):
    def refused_int8(exc, msg, **changes):
        with pytest.raises(exc, match=r"^" + re.escape(msg) + "$"):
            checkpoint.load_int8(dict(saved_int8, **{P + k: v for k, v in changes.items()}), P)

    # An SCB of 47 (or 4800) scales for 48 rows was returned as is.
    refused_int8(ValueError, f"load_int8: {P}.SCB has 47 elements, the weight's 48 rows need 48",
                 **{".SCB": np.ones(47, np.float32)})
    refused_int8(ValueError, f"load_int8: {P}.SCB has 4800 elements, the weight's 48 rows need 48",
                 **{".SCB": np.ones(4800, np.float32)})
    refused_int8(ValueError, f"load_int8: {P}.SCB must be 1-D [48], not [48, 1]",
                 **{".SCB": np.ones((48, 1), np.float32)})
    refused_int8(TypeError, f"load_int8: {P}.SCB has dtype float16, expected float32",
                 **{".SCB": np.ones(48, np.float16)})
    refused_int8(ValueError, f"load_int8: {P}.weight must be 2-D [out, in], not [3840]",
                 **{".weight": np.zeros(3840, np.int8)})
    refused_int8(TypeError, f"load_int8: {P}.weight has dtype uint8, expected int8",
                 **{".weight": np.zeros((48, 80), np.uint8)})
    refused_int8(ValueError, f"load_int8: {P}.weight_format must be one integer, not float32 ()",
                 **{".weight_format": np.array(0, np.float32)})
    refused_int8(ValueError, f"load_int8: {P}.weight_format must be one integer, not uint8 (0,)",
                 **{".weight_format": np.zeros(0, np.uint8)})
    with pytest.raises(KeyError, match=re.escape(f"load_int8: {P}.SCB not in the checkpoint")):
        checkpoint.load_int8({k: v for k, v in saved_int8.items() if not k.endswith("SCB")}, P)


# ---- found by tests/fuzz/python/fuzz_checkpoint.py -------------------------------------------------

def test_load_4bit_refuses_shapes_no_array_can_have(saved_4bit):
    # Zero elements, so no bytes and no scales to disagree with: [2**62, 0] was loaded and then
    # dequantize_4bit failed in numpy ("array is too big"); likewise more than 64 dimensions.
    def sized(n):
        """The entries resized for n elements (so that only the shape itself can be wrong)."""
        blocks = -(-n // 64)
        out = dict(saved_4bit, **{P + ".weight": np.zeros(((n + 1) // 2, 1), np.uint8),
                                  P + ".weight.absmax": np.zeros(blocks, np.uint8),
                                  P + ".weight.nested_absmax": np.zeros(-(-blocks // 256), np.float32)})
        del out[P + ".bias"]
        return out

    for shape in ([2**62, 0], [0, 2**63], [2**64, 0], [1] * 65 + [0], [1] * 65):
        refused(ValueError, re.escape(f"QuantState.from_dict: {JSON_KEY}: shape {shape} is not the shape of a "
                                      "possible float16 array ("), with_json(sized(math.prod(shape)), shape=shape))
    for shape in ([2**31, 0], [0], [1] * 64, [3, 1]):  # possible shapes load and dequantize
        packed, state = checkpoint.load_4bit(with_json(sized(math.prod(shape)), shape=shape), P)
        assert kbit.dequantize_4bit(packed, state).shape == tuple(shape)


def test_load_4bit_of_a_prefix_containing_quant_state(rng):
    # Every key of "model.quant_state_proj" contains "quant_state": each was taken for the JSON item,
    # and the checkpoint tensors_4bit wrote was refused ("expected one quant_state item").
    prefix = "model.quant_state_proj"
    W = rng.standard_normal((16, 64)).astype(np.float32)
    for nested in (False, True):
        packed, state = kbit.quantize_4bit(W, quant_type="nf4", compress_statistics=nested)
        got_packed, got = checkpoint.load_4bit(checkpoint.tensors_4bit(prefix, packed, state), prefix)
        assert np.array_equal(kbit.dequantize_4bit(got_packed, got), kbit.dequantize_4bit(packed, state))


def test_load_4bit_refuses_misaligned_scales(saved_4bit):
    # A float32 table one byte off its alignment was loaded and read by the C library as float*
    # (undefined: UBSan's "load of misaligned address" in kbit_nested_absmax_dequantize).
    for key in (".weight.nested_absmax", ".weight.nested_quant_map", ".weight.quant_map"):
        bad = dict(saved_4bit, **{P + key: misaligned(saved_4bit[P + key])})
        refused(ValueError, re.escape(f"QuantState.from_dict: {P}{key} is not aligned to its 4-byte float32 "
                                      "elements"), bad)
    _, state = checkpoint.load_4bit(saved_4bit, P)
    state.code = misaligned(state.code)  # the call itself checks too, for states made by hand
    with pytest.raises(ValueError, match=r"^gemv_4bit: state.code is not aligned to its 4-byte float32 elements$"):
        kbit.gemv_4bit(np.ones((1, 320), np.float16), saved_4bit[P + ".weight"], state=state)


def test_from_dict_and_load_int8_name_the_key_for_non_arrays(saved_4bit, saved_int8):
    # A key that is no str failed with AttributeError / "argument of type 'int' is not iterable".
    with pytest.raises(TypeError, match=r"^QuantState.from_dict: keys must be str, not int \(0\)$"):
        kbit.QuantState.from_dict({**saved_4bit, 0: np.zeros(1)})
    assert checkpoint.load_4bit({**saved_4bit, 0: np.zeros(1)}, P)[1].shape == (96, 320)  # not under P.weight.
    # A ragged list for weight_format failed in numpy ("setting an array element with a sequence").
    with pytest.raises(ValueError, match=r"^" + re.escape(f"load_int8: {P}.weight_format must be one integer, "
                                                          "not list") + "$"):
        checkpoint.load_int8(dict(saved_int8, **{P + ".weight_format": [[0], [0, 1]]}), P)


def test_load_4bit_takes_keys_in_name_order_whatever_the_dict_order(saved_4bit, tmp_path):
    # Two keys under P.weight. strip to the same field ("absmax"): the later name wins, as in a loaded
    # file. Taken in the dict's order, an extra P.weight.x.absmax inserted before P.weight.absmax was
    # accepted, and refused once the entries were saved and loaded again (a fuzz finding).
    wrong = np.zeros(7, np.uint8)  # the layer is nested: its absmax is uint8 codes
    before = {P + ".weight.x.absmax": wrong, **saved_4bit}
    after = {**saved_4bit, P + ".weight.x.absmax": wrong}
    msg = re.escape(f"QuantState.from_dict: {P}.weight.x.absmax has 7 elements, the shape [96, 320] with "
                    "blocksize 64 needs 480")
    refused(ValueError, msg, before)
    refused(ValueError, msg, after)
    checkpoint.save(tmp_path / "x.safetensors", before)
    refused(ValueError, msg, checkpoint.load(tmp_path / "x.safetensors"))


# ---- 4-bit parameters: fused MoE experts [E, N, K] under their own key (behaviour.md §11.3) ----------

X = "model.layers.0.mlp.experts.gate_up_proj"


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "plain"])
@pytest.mark.parametrize("q", ["nf4", "fp4"])
def test_experts_layout_round_trip(tmp_path, rng, nested, q):
    E, N, K = 4, 8, 64
    W = (rng.standard_normal((E, N, K)) * 0.05).astype(ml_dtypes.bfloat16)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type=q, compress_statistics=nested)
    path = tmp_path / "experts.safetensors"
    checkpoint.save(path, checkpoint.tensors_4bit(X, packed, state, parameter=True))
    header, raw = read_safetensors_raw(path)
    blocks = E * N * K // 64
    expected = {X: ("U8", [E * N * K // 2, 1]), X + ".quant_map": ("F32", [16]),
                X + ".absmax": ("U8" if nested else "F32", [blocks]), X + f".quant_state.bitsandbytes__{q}": None}
    if nested:
        expected.update({X + ".nested_absmax": ("F32", [1]), X + ".nested_quant_map": ("F32", [256])})
    assert set(raw) == set(expected)
    for k, v in expected.items():
        assert v is None or (raw[k][0], raw[k][1]) == v, k
    text = f'{{"quant_type": "{q}", "blocksize": 64, "dtype": "bfloat16", "shape": [{E}, {N}, {K}]'
    if nested:
        text += f', "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": {float(state.offset)!r}'
    assert bytes(raw[X + f".quant_state.bitsandbytes__{q}"][2]).decode() == text + "}"

    tensors = checkpoint.load(path)
    assert checkpoint.quantized_prefixes(tensors) == {"4bit": [X], "int8": []}
    assert checkpoint.is_parameter_4bit(tensors, X)
    packed2, state2 = checkpoint.load_4bit(tensors, X)
    assert np.array_equal(packed2, packed) and state2.shape == (E, N, K) and state2.nested == nested
    assert kbit.dequantize_4bit(packed2, state2).tobytes() == kbit.dequantize_4bit(packed, state).tobytes()


@pytest.mark.parametrize("q", ["nf4", "fp4"])
def test_expert_slices_equal_each_expert_quantized_alone(rng, q):
    # N * K = 1536 = 24 blocks of 64: expert e's codes and scales are the e-th contiguous slices, the same
    # bytes as quantizing expert e's [N, K] by itself.
    E, N, K = 3, 24, 64
    W = (rng.standard_normal((E, N, K)) * 0.05).astype(np.float16)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type=q)
    whole = kbit.dequantize_4bit(packed, state)
    for e in range(E):
        p_e, s_e = checkpoint.expert_4bit(packed, state, e)
        alone, alone_state = kbit.quantize_4bit(W[e], blocksize=64, quant_type=q)
        assert p_e.tobytes() == alone.tobytes() and s_e.absmax.tobytes() == alone_state.absmax.tobytes()
        assert s_e.shape == (N, K) and not s_e.nested
        assert kbit.dequantize_4bit(p_e, s_e).tobytes() == whole[e].tobytes()


@pytest.mark.parametrize("K", [64, 16384], ids=["decoded-scales", "nested-slices"])
def test_expert_slices_of_nested_scales(rng, K):
    # K = 64: 1 block per expert, not a whole nested block of 256 -> the expert gets float32 scales.
    # K = 16384: 256 blocks per expert -> a nested state of its own codes and nested scale.
    E, N = 3, 1
    W = (rng.standard_normal((E, N, K)) * 0.05).astype(np.float32)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=True)
    whole = kbit.dequantize_4bit(packed, state)
    for e in range(E):
        p_e, s_e = checkpoint.expert_4bit(packed, state, e)
        assert s_e.nested == (K == 16384) and s_e.shape == (N, K)
        assert kbit.dequantize_4bit(p_e, s_e).tobytes() == whole[e].tobytes()


def test_expert_4bit_refuses(rng):
    W = (rng.standard_normal((2, 3, 32)) * 0.05).astype(np.float32)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type="nf4")
    with pytest.raises(ValueError, match=r"^expert_4bit: an expert's 3 x 32 = 96 elements are not a multiple of "
                                         r"the blocksize 64: its blocks span two experts$"):
        checkpoint.expert_4bit(packed, state, 0)
    packed, state = kbit.quantize_4bit(W, blocksize=32, quant_type="nf4")
    with pytest.raises(ValueError, match=r"^expert_4bit: expert 2 is not in 0 \.\.\. 1$"):
        checkpoint.expert_4bit(packed, state, 2)
    p2, s2 = kbit.quantize_4bit(W[0], blocksize=32, quant_type="nf4")
    with pytest.raises(ValueError, match=r"^expert_4bit: state must be the QuantState of a 3-D \[E, N, K\] weight, "
                                         r"not shape \(3, 32\)$"):
        checkpoint.expert_4bit(p2, s2, 0)


def test_experts_load_4bit_checks_shape_against_bytes(rng):
    W = (rng.standard_normal((4, 8, 64)) * 0.05).astype(np.float32)
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type="nf4")
    tensors = checkpoint.tensors_4bit(X, packed, state, parameter=True)
    key = X + ".quant_state.bitsandbytes__nf4"
    d = json.loads(bytes(tensors[key]).decode())
    d["shape"] = [4, 8, 32]  # half the elements: 16 blocks of 64 needed, 32 stored
    bad = dict(tensors, **{key: np.frombuffer(json.dumps(d).encode(), np.uint8).copy()})
    with pytest.raises(ValueError, match=re.escape(f"QuantState.from_dict: {X}.absmax has 32 elements, the shape "
                                                   "[4, 8, 32] with blocksize 64 needs 16")):
        checkpoint.load_4bit(bad, X)
    bad = dict(tensors, **{X: tensors[X][:-1]})
    with pytest.raises(ValueError, match=re.escape(f"load_4bit: {X} holds 1023 bytes, its quant_state shape "
                                                   "[4, 8, 64] needs 1024")):
        checkpoint.load_4bit(bad, X)


def test_experts_load_by_bitsandbytes(tmp_path, rng):
    """bitsandbytes (0.50) loads the layout with QuantState.from_dict, Params4bit.from_prequantized and
    its experimental parametrize.replace_parameter_4bit_prequantized, and dequantizes it to kbit's
    values; its own replace_parameter_4bit writes the same keys and, for NF4 plain, the same bytes.
    Skips without torch."""
    torch = pytest.importorskip("torch")
    bnb_f = pytest.importorskip("bitsandbytes.functional")
    parametrize = pytest.importorskip("bitsandbytes.nn.parametrize")
    bnb_nn = pytest.importorskip("bitsandbytes.nn")
    E, N, K = 4, 8, 64
    W = (rng.standard_normal((E, N, K)) * 0.05).astype(np.float32)
    for q in ("nf4", "fp4"):
        for nested in (False, True):
            packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type=q, compress_statistics=nested)
            path = tmp_path / f"{q}{nested}.safetensors"
            checkpoint.save(path, checkpoint.tensors_4bit(X, packed, state, parameter=True))
            from safetensors.torch import load_file
            t = load_file(str(path))
            qs = {k[len(X) + 1:]: v for k, v in t.items() if k.startswith(X + ".")}
            bstate = bnb_f.QuantState.from_dict(dict(qs), device=torch.device("cpu"))
            assert tuple(bstate.shape) == (E, N, K)
            ours = kbit.dequantize_4bit(packed, state)
            theirs = bnb_f.dequantize_4bit(t[X], bstate).numpy()
            # FP4 code 1000: kbit -0.0, bitsandbytes' CPU path may give +0.0 (behaviour.md §2): compare values.
            assert np.array_equal(theirs, ours) and (q == "fp4" or theirs.tobytes() == ours.tobytes())
            module = torch.nn.Module()
            module.gate_up_proj = torch.nn.Parameter(t[X], requires_grad=False)
            parametrize.replace_parameter_4bit_prequantized(module, "gate_up_proj", dict(qs), torch.device("cpu"))
            assert np.array_equal(module.gate_up_proj.numpy(), ours)
            param = bnb_nn.Params4bit.from_prequantized(t[X], dict(qs), device="cpu")
            assert np.array_equal(bnb_f.dequantize_4bit(param.data, param.quant_state).numpy(), ours)
    # bitsandbytes' own writer for a parameter: the same keys, and for NF4 plain the same bytes.
    module = torch.nn.Module()
    module.gate_up_proj = torch.nn.Parameter(torch.from_numpy(W.copy()))
    parametrize.replace_parameter_4bit(module, "gate_up_proj", quant_type="nf4", blocksize=64)
    sd = {("model.layers.0.mlp.experts." + k): v for k, v in module.state_dict().items()}
    packed, state = kbit.quantize_4bit(W, blocksize=64, quant_type="nf4")
    ours = checkpoint.tensors_4bit(X, packed, state, parameter=True)
    assert set(sd) == set(ours)
    for k in ours:
        assert sd[k].numpy().tobytes() == np.ascontiguousarray(ours[k]).tobytes(), k
