"""kbit's quantization-table builders (create_linear_map, create_normal_map, create_fp8_map, the
get_4bit_type tables) bit for bit equal to bitsandbytes 0.50.2's, recorded by scripts/golden/gen_tables.py
into tests/golden/tables.*: no torch or scipy needed here."""
import math

import numpy as np
import pytest

import kbit
from conftest import golden_array, load_golden

INDEX, BLOB = load_golden("tables")
CASES = INDEX["cases"]


def _id(case):
    return case["function"] + "-" + "-".join(f"{k}={v}" for k, v in case["kwargs"].items() if k != "device")


def _call(case):
    kwargs = dict(case["kwargs"])
    kwargs.pop("device", None)
    return getattr(kbit.functional, case["function"])(**kwargs)


@pytest.mark.parametrize("case", [c for c in CASES if "values" in c], ids=_id)
def test_table_equals_bitsandbytes_bit_for_bit(case):
    want = golden_array(BLOB, case["values"], np.float32)
    got = _call(case)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), np.flatnonzero(got.view(np.uint32) !=
                                                                                     want.view(np.uint32))


# bitsandbytes 0.50.2 builds its "int4" table as an integer tensor and fails dividing it in place
# (RuntimeError); kbit gives the table it means: 7 ... 0, 0 ... -7 divided by 7 in float32.
KBIT_ONLY = {"get_4bit_type-typename=int4": np.array([7, 6, 5, 4, 3, 2, 1, 0, 0, -1, -2, -3, -4, -5, -6, -7],
                                                     np.float32) / np.float32(7)}


def test_int4_is_kbits_addition():
    case = next(c for c in CASES if _id(c) == "get_4bit_type-typename=int4")
    assert case["error"] == "RuntimeError"
    got = _call(case)
    want = KBIT_ONLY[_id(case)]
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert got[0] == 1.0 and got[-1] == -1.0 and abs(float(got[1]) - 6 / 7) <= 2.0 ** -24


# What bitsandbytes refuses, kbit refuses with the same exception type.
@pytest.mark.parametrize("case", [c for c in CASES if "error" in c and _id(c) not in KBIT_ONLY], ids=_id)
def test_refused_as_bitsandbytes_refuses(case):
    with pytest.raises(Exception) as e:
        _call(case)
    assert type(e.value).__name__ == case["error"]


def test_the_golden_covers_every_builder():
    assert {c["function"] for c in CASES} == {"create_linear_map", "create_normal_map", "create_fp8_map",
                                              "get_4bit_type"}
    assert {c["kwargs"]["typename"] for c in CASES if c["function"] == "get_4bit_type" and "values" in c} >= \
        {"nf4", "fp4", "af4"}


def test_builders_return_fresh_writable_copies():
    for table in (kbit.functional.create_linear_map(), kbit.functional.create_normal_map(),
                  kbit.functional.create_fp8_map(), kbit.functional.get_4bit_type("af4")):
        table[0] = 5.0
    assert kbit.functional.create_linear_map()[0] == -1.0
    assert kbit.functional.create_normal_map()[0] == -1.0
    assert kbit.functional.create_fp8_map()[0] == -1.0
    assert kbit.functional.get_4bit_type("af4")[0] == 1.0


def test_ndtri_against_known_quantiles():
    # Independent values: the quantiles of 0.975 and 0.8413447460685429 (one sigma) and the symmetry.
    nd = kbit.functional._ndtri
    assert abs(nd(0.975) - 1.959963984540054) < 1e-14
    assert abs(nd(0.8413447460685429) - 1.0) < 1e-14
    for p in (2.0 ** -30, 2.0 ** -10, 0.0625, 0.3125, 0.75, 1 - 2.0 ** -20):  # 1 - p exact in binary64
        assert abs(nd(p) + nd(1 - p)) < 1e-9 * max(1.0, abs(nd(p)))
        # erfc itself is good to about 1e-14 relative in the tail
        assert abs(0.5 * math.erfc(-nd(p) / math.sqrt(2.0)) - p) <= 1e-14 * p


@pytest.mark.parametrize("call, error, message", [
    (lambda: kbit.functional.create_linear_map(total_bits=9), ValueError, "total_bits must be an integer from 1 to 8"),
    (lambda: kbit.functional.create_normal_map(offset=1.0), ValueError, r"offset must be in \(0.5, 1\)"),
    (lambda: kbit.functional.create_fp8_map(True, 4, 4, 8), ValueError, "do not add up to total_bits=8"),
    (lambda: kbit.functional.get_4bit_type("af4", blocksize=128), NotImplementedError, "only for blocksize 64"),
    (lambda: kbit.functional.get_4bit_type("nf3"), NotImplementedError, "typename 'nf3' is not one of"),
])
def test_bad_arguments_raise(call, error, message):
    with pytest.raises(error, match=message):
        call()
