"""torchao NF4Tensor through the package, and conversion to and from bitsandbytes' layout (docs/behaviour.md §5),
checked against torchao's own outputs recorded in tests/golden/torchao_nf4.* (no torch needed)."""
import numpy as np
import pytest

import kbit
from kbit import torchao
import reference as ref
from conftest import golden_array, load_golden

INDEX, BLOB = load_golden("torchao_nf4")
CASES = INDEX["cases"]
# Per unit scale, how far torchao's 4-decimal table (rounded to the dtype) is from bitsandbytes' (§6).
LUT_DIFF = {"fp32": 5.0e-5, "fp16": 1.9e-4, "bf16": 1.64e-3}
EPS = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}


def case_arrays(c):
    dt = ref.DTYPES[c["dtype"]]
    g = {k: golden_array(BLOB, c[k], t) for k, t in (("w", dt), ("quantized_data", np.uint8), ("quantized_scalers", np.int8),
                                                     ("quantization_factor", dt), ("scaler_mean", dt), ("nf4", dt),
                                                     ("dequantized", dt))}
    return dt, g


def golden_tensor(c):
    dt, g = case_arrays(c)
    return torchao.NF4Tensor(g["quantized_data"], g["quantized_scalers"], g["quantization_factor"], g["scaler_mean"],
                             c["block_size"], c["scaler_block_size"], (c["n"],), dt), g


def same(a, b):
    return np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("c", CASES, ids=[f"{c['name']}-{c['dtype']}" for c in CASES])
def test_to_nf4_and_back_equal_torchao(c):
    dt, g = case_arrays(c)
    t = torchao.to_nf4(g["w"], block_size=c["block_size"], scaler_block_size=c["scaler_block_size"])
    assert same(t.quantized_data, g["quantized_data"]) and same(t.quantized_scalers, g["quantized_scalers"])
    assert same(t.quantization_factor, g["quantization_factor"]) and same(t.scaler_mean, g["scaler_mean"])
    assert same(t.nf4, g["nf4"])
    assert same(torchao.get_original_weight(t), g["dequantized"])


BNB_CASES = [c for c in CASES if c["block_size"] in kbit.functional.BLOCKSIZES]


@pytest.mark.parametrize("c", BNB_CASES, ids=[f"{c['name']}-{c['dtype']}" for c in BNB_CASES])
def test_from_bitsandbytes_requantizes_the_scales_as_torchao(c):
    # bitsandbytes' fp32 block absmax of a weight equals torchao's block absmax in the weight's dtype,
    # so re-quantizing it must give torchao's scalers, factors and mean exactly.
    dt, g = case_arrays(c)
    packed, state = kbit.quantize_4bit(g["w"], blocksize=c["block_size"], quant_type="nf4")
    t = torchao.from_bitsandbytes(packed, state, scaler_block_size=c["scaler_block_size"])
    assert same(t.quantized_scalers, g["quantized_scalers"]) and same(t.quantization_factor, g["quantization_factor"])
    assert same(t.scaler_mean, g["scaler_mean"])
    assert same(t.quantized_data, packed.reshape(-1))  # the nibbles are reused
    assert t.block_size == c["block_size"] and t.shape == (c["n"],) and t.dtype == dt
    nested_packed, nested = kbit.quantize_4bit(g["w"], blocksize=c["block_size"], quant_type="nf4",
                                               compress_statistics=True)
    t2 = torchao.from_bitsandbytes(nested_packed, nested, scaler_block_size=c["scaler_block_size"])
    assert t2.quantized_scalers.shape == t.quantized_scalers.shape  # nested scales are restored first


@pytest.mark.parametrize("c", BNB_CASES, ids=[f"{c['name']}-{c['dtype']}" for c in BNB_CASES])
def test_to_bitsandbytes_keeps_the_values_within_the_table_difference(c):
    t, g = golden_tensor(c)
    packed, state = torchao.to_bitsandbytes(t)
    assert same(packed.reshape(-1), g["quantized_data"]) and packed.shape == (c["n"] // 2, 1)
    assert state.quant_type == "nf4" and state.blocksize == c["block_size"] and state.dtype == t.dtype
    ours = kbit.dequantize_4bit(packed, state).astype(np.float64)
    theirs = g["dequantized"].astype(np.float64)
    scale = np.repeat(state.absmax.astype(np.float64), c["block_size"])
    eps = EPS[c["dtype"]]
    bound = LUT_DIFF[c["dtype"]] * np.abs(scale) + eps * (np.abs(ours) + np.abs(theirs))
    assert (np.abs(ours - theirs) <= bound).all()
    # The scales are torchao's dequantized ones: the nibble-15 (1.0) elements agree exactly.
    ones = ref.unpack(g["quantized_data"], c["n"]) == 15
    assert np.array_equal(ours[ones], theirs[ones])


def test_to_bitsandbytes_nested(rng):
    c = CASES[0]
    t, g = golden_tensor(c)
    packed, plain = torchao.to_bitsandbytes(t)
    packed_n, nested = torchao.to_bitsandbytes(t, compress_statistics=True)
    assert nested.nested and nested.state2.blocksize == 256 and np.array_equal(packed_n, packed)
    restored = kbit.functional._plain_absmax(kbit.functional.Ctx(packed_n), "test", nested, plain.absmax.size)[0]
    step = np.repeat(nested.state2.absmax, 256)[: plain.absmax.size] * 0.0071  # half the map's widest gap
    assert (np.abs(restored - plain.absmax) <= step + 1e-7 * np.abs(plain.absmax)).all()


def test_conversion_errors(rng):
    w = rng.standard_normal(16384).astype(np.float32)
    packed, state = kbit.quantize_4bit(w, quant_type="fp4")
    with pytest.raises(ValueError, match="torchao has NF4 only"):
        torchao.from_bitsandbytes(packed, state)
    packed, state = kbit.quantize_4bit(w[:1000].copy(), quant_type="nf4")
    with pytest.raises(ValueError, match="not whole blocks"):
        torchao.from_bitsandbytes(packed, state)
    t = torchao.to_nf4(w, block_size=16, scaler_block_size=64)
    with pytest.raises(ValueError, match="block_size 16 is not a bitsandbytes blocksize"):
        torchao.to_bitsandbytes(t)
    with pytest.raises(ValueError, match="to_nf4: 1000 elements are not whole blocks"):
        torchao.to_nf4(w[:1000].copy())
