"""`import bitsandbytes` with kbit pip-installed routes bitsandbytes' CPU ops to kbit with no code: kbit's
"bitsandbytes.backends" entry point (pyproject.toml) names kbit.bitsandbytes.autoload, which bitsandbytes
0.50.2 loads and calls once its own kernels are registered. KBIT_BITSANDBYTES=0 turns it off; install()
stays and is idempotent. Needs torch, bitsandbytes and kbit installed with pip into the same environment
(scripts/test-bitsandbytes --legs kbit does that); skipped otherwise. Each case is a fresh interpreter,
since bitsandbytes loads its backends once per process."""
import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytest.importorskip("torch", reason="torch not installed: the entry point is bitsandbytes'")
pytest.importorskip("bitsandbytes", reason="bitsandbytes not installed")
ENTRY = [e for e in entry_points(group="bitsandbytes.backends") if e.name == "kbit"]
if not ENTRY:
    pytest.skip("kbit is not pip-installed in this environment (no 'bitsandbytes.backends' entry point named "
                "kbit): scripts/test-bitsandbytes --legs kbit installs it", allow_module_level=True)

import kbit.bitsandbytes as kbnb  # noqa: E402
from conftest import subprocess_env  # noqa: E402

CHILD = r'''
import json, warnings
import torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        import bitsandbytes
    except Exception as e:
        print(json.dumps({"import_error": f"{type(e).__name__}: {e}"}))
        raise SystemExit(0)
import kbit.bitsandbytes as kb
res = {"installed": kb.installed(),
       "kbit_warnings": [str(w.message) for w in caught
                         if issubclass(w.category, RuntimeWarning) and "kbit" in str(w.message)]}
try:  # kbit refuses blocksize 48 with its own message; bitsandbytes' CPU library takes it
    torch.ops.bitsandbytes.quantize_blockwise(torch.randn(64), bitsandbytes.functional.create_dynamic_map(), 48)
    res["call"] = "ok"
except Exception as e:
    res["call"] = f"{type(e).__name__}: {e}"
if res["installed"] is not None:
    res["again"] = kb.install()
print(json.dumps(res))
'''


def run(**env):
    r = subprocess.run([sys.executable, "-c", CHILD], env=subprocess_env(**env), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_entry_point_names_autoload():
    assert len(ENTRY) == 1 and ENTRY[0].value == "kbit.bitsandbytes:autoload"
    assert ENTRY[0].load() is kbnb.autoload


def test_import_bitsandbytes_routes_cpu_ops_to_kbit():
    res = run()
    assert sorted(res["installed"]) == sorted(kbnb.OPS)
    assert res["kbit_warnings"] == []
    assert res["call"].startswith("KbitError: ") and "blocksize 48 is not one of" in res["call"]
    assert res["again"] == res["installed"]  # install() after the entry point: the same ops, nothing twice


def test_install_before_importing_bitsandbytes():
    # install() imports bitsandbytes, whose entry point calls install() again from inside that import (the
    # pytest plugin of scripts/test-bitsandbytes does this): one registration, no deadlock.
    code = ("import kbit.bitsandbytes as kb, json; first = kb.install(); "
            "print(json.dumps([first, kb.install(), kb.installed()]))")
    r = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    first, again, installed = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(first) == sorted(kbnb.OPS) and again == first and installed == first


def test_kbit_bitsandbytes_0_turns_it_off():
    res = run(KBIT_BITSANDBYTES="0")
    assert res["installed"] is None and res["call"] == "ok"  # bitsandbytes' own kernel served the call


def test_a_bad_setting_fails_the_import_with_kbits_message():
    res = run(KBIT_BITSANDBYTES="yes")
    assert res["import_error"] == ("RuntimeError: bitsandbytes: failed to load backend kbit: kbit.bitsandbytes: "
                                   "KBIT_BITSANDBYTES='yes': use 0 (off) or 1 (on, the default)")


def test_a_kbit_without_its_library_warns_and_leaves_bitsandbytes_alone(tmp_path):
    res = run(KBIT_LIBRARY_DIR=str(tmp_path))
    assert res["installed"] is None and res["call"] == "ok"
    assert len(res["kbit_warnings"]) == 1
    assert res["kbit_warnings"][0].startswith("kbit.bitsandbytes: kbit's kernels were not registered with "
                                              f"bitsandbytes (kbit: KBIT_LIBRARY_DIR={tmp_path} does not contain")
