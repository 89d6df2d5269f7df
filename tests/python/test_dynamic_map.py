"""create_dynamic_map: bitsandbytes' map in float32 arithmetic (docs/behaviour.md §1.6), bit for bit equal to
the tables bitsandbytes 0.50.2 built under torch 2.15 (tests/golden/dynamic_map.*, recorded by
scripts/golden/gen_dynamic_map.py), to the conformance suite's dynamic_map() (tests/conformance/testutil.h)
and to the values the spec lists."""
import os
import subprocess

import numpy as np
import pytest

import kbit


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def f32(*values):
    return np.array(values, dtype=np.float32)


@pytest.fixture(scope="module")
def cpp_maps():
    exe = os.environ.get("KBIT_DUMP_DYNAMIC_MAP")
    if not exe:
        pytest.skip("KBIT_DUMP_DYNAMIC_MAP (the build's kbit_dump_dynamic_map) not set: run through ctest")
    lines = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split("\n")
    return [np.array([int(h, 16) for h in line.split()], dtype=np.uint32) for line in lines[:2]]


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_equals_the_conformance_suite_bit_for_bit(cpp_maps, signed):
    assert np.array_equal(bits(kbit.create_dynamic_map(signed=signed)), cpp_maps[0 if signed else 1])


def _golden_cases():
    from conftest import golden_array, load_golden
    index, blob = load_golden("dynamic_map")
    return [(c, golden_array(blob, c["code"], np.float32)) for c in index["cases"]], index["rejected"]


GOLDEN_CASES, GOLDEN_REJECTED = _golden_cases()


def _case_id(c):
    return f"{'signed' if c['signed'] else 'unsigned'}-e{c['max_exponent_bits']}-b{c['total_bits']}"


@pytest.mark.parametrize("case,table", GOLDEN_CASES, ids=[_case_id(c) for c, _ in GOLDEN_CASES])
def test_equals_bitsandbytes_under_torch_bit_for_bit(case, table):
    got = kbit.create_dynamic_map(signed=case["signed"], max_exponent_bits=case["max_exponent_bits"],
                                  total_bits=case["total_bits"])
    assert got.tobytes() == table.tobytes()


def test_golden_covers_the_default_tables_and_both_signs():
    ids = {_case_id(c) for c, _ in GOLDEN_CASES}
    assert {"signed-e7-b8", "unsigned-e7-b8", "signed-e5-b8", "signed-e4-b6"} <= ids
    assert len(GOLDEN_CASES) == 35 and len(GOLDEN_REJECTED) == 21


@pytest.mark.parametrize("params", GOLDEN_REJECTED, ids=_case_id)
def test_rejects_what_bitsandbytes_rejects(params):
    with pytest.raises(ValueError, match=r"create_dynamic_map: signed=False, .* values, not "):
        kbit.create_dynamic_map(**params)


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_conformance_suite_table_equals_bitsandbytes(cpp_maps, signed):
    table = next(t for c, t in GOLDEN_CASES if c["signed"] == signed and c["max_exponent_bits"] == 7
                 and c["total_bits"] == 8)
    assert np.array_equal(bits(table), cpp_maps[0 if signed else 1])


def test_rounds_linspace_once_not_twice():
    # Entry 18 of the signed table: from linspace(0.1, 1, 65)[13..14]; 0.1f + h*13 rounded twice gives
    # the neighbouring float (-0.7398437857627869 before this table followed torch 2.15).
    c = kbit.create_dynamic_map()
    assert bits(c[18]) == bits(f32(-0.7398437261581421)) and c[18] != f32(-0.7398437857627869)


def test_signed_map_listed_values():
    c = kbit.create_dynamic_map()
    assert c.dtype == np.float32 and c.shape == (256,)
    assert (np.diff(c) > 0).all()
    assert c[127] == 0.0 and c[255] == 1.0 and c[0] == np.float32(-0.99296874) and -1.0 not in c
    assert np.array_equal(c[128:136], f32(5.5000004e-07, 3.2500002e-06, 7.7499999e-06, 2.1249998e-05, 4.3749998e-05,
                                          6.6250002e-05, 8.8749999e-05, 1.5625001e-04))
    assert np.array_equal(c[250:255], f32(0.93671876, 0.95078123, 0.96484375, 0.97890627, 0.99296874))
    assert np.array_equal(c[:255], -c[254::-1])  # code[i] = -code[254 - i]
    positive = c[c > 0]
    per_decade = [int(((positive >= 10.0 ** (d - 7)) & (positive < 10.0 ** (d - 6))).sum()) for d in range(7)]
    assert per_decade == [1, 2, 4, 8, 16, 32, 64]  # 1e-7..1e-6, ..., 0.1..1 (1.0 itself apart)


def test_unsigned_map_listed_values():
    u = kbit.create_dynamic_map(signed=False)
    assert (np.diff(u) > 0).all() and u[0] == 0.0 and u[255] == 1.0
    assert np.array_equal(u[1:6], f32(3.2500003e-07, 7.7499999e-07, 2.1249998e-06, 4.3749997e-06, 6.6250000e-06))
    assert np.array_equal(u[250:255], f32(0.96835935, 0.97539067, 0.98242188, 0.98945308, 0.9964844))


def test_returns_a_fresh_writable_copy():
    a = kbit.create_dynamic_map()
    a[0] = 5
    assert kbit.create_dynamic_map()[0] == np.float32(-0.99296874)


def test_other_parameters_follow_bitsandbytes_counts():
    # 5 exponent bits leave 2^(7-5) - 1 = 3 extra values in the top decade.
    c = kbit.create_dynamic_map(signed=True, max_exponent_bits=5)
    assert c.shape == (256,) and c[-1] == 1.0 and (np.diff(c) >= 0).all()
    with pytest.raises(ValueError, match="max_exponent_bits <= total_bits - 1"):
        kbit.create_dynamic_map(signed=True, max_exponent_bits=8)
    with pytest.raises(ValueError, match="gives 253 values, not 256"):  # bitsandbytes' assertion fails too
        kbit.create_dynamic_map(signed=False, max_exponent_bits=5)
