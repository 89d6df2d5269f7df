"""kbit.load(): the library through the loader, ctypes signatures derived from abi/*.def, KbitError."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import kbit
from kbit import _abi

from conftest import ROOT, subprocess_env


def all_functions():
    return [fn for iface in _abi.INTERFACES for fn in _abi.functions(iface)]


def test_abi_lists_are_the_repository_lists_or_their_installed_copy():
    # The package parses the same files the C build uses (or the copies pip installed with it).
    names = {fn["name"] for fn in all_functions()}
    assert "cquantize_blockwise_fp32_nf4" in names and "kbit_int8_vectorwise_quant" in names
    for iface in _abi.INTERFACES:
        assert (_abi.ABI_DIR / f"kbit_{iface}.def").read_text() == (ROOT / "abi" / f"kbit_{iface}.def").read_text()


@pytest.mark.parametrize("backend", [None, "cpu"], ids=["trampolines", "cpu"])
def test_every_function_has_argtypes_and_restype_from_its_def_entry(backend):
    lib = kbit.load(backend)
    checked = expected = 0
    for iface in lib.versions:
        # Tables carry the version in a member; the trampolines export the version functions too.
        fns = _abi.functions(iface) if lib.trampolines else _abi.table_functions(iface)
        expected += len(fns)
        for fn in fns:
            f = getattr(lib, fn["name"])
            restype, argtypes = _abi.signature(fn)
            assert f.restype is restype, fn["name"]
            assert list(f.argtypes) == argtypes, fn["name"]
            assert len(f.argtypes) == len(fn["params"])
            checked += 1
    assert checked == expected and checked >= 50


def test_ctypes_types_of_the_def_spellings():
    t = _abi.ctypes_type
    assert t("float*") is ctypes.c_void_p and t("const kbit_bf16*") is ctypes.c_void_p
    assert t("kbit_context*") is ctypes.c_void_p and t("void**") is ctypes.c_void_p
    assert t("const char*") is ctypes.c_char_p
    assert t("const int") is ctypes.c_int32 and t("int64_t") is ctypes.c_int64 and t("size_t") is ctypes.c_size_t
    assert t("const float") is ctypes.c_float and t("bool") is ctypes.c_bool
    assert t("unsigned char") is ctypes.c_ubyte and t("kbit_status") is ctypes.c_int32
    with pytest.raises(TypeError):
        t("double")


def test_default_load_is_the_loader_trampolines():
    lib = kbit.load()
    assert lib.trampolines and lib.path.endswith("libkbit.so")
    assert lib is kbit.load()  # cached
    assert lib.backend_name() == "cpu"  # the only backend of a CPU build
    assert lib.kbit_core_interface_version() == (1 << 16)
    assert lib.backend_versions == kbit.load("cpu").versions  # the default backend's, not libkbit.so's


def test_named_backend_uses_its_tables():
    lib = kbit.load("cpu")
    assert not lib.trampolines
    assert lib.name == "cpu" and os.path.basename(lib.path) == "libkbit_cpu.so"
    # 4bit 1.1: kbit_gemm_4bit_grouped, 1.2: kbit_gemm_4bit_precision, 1.3: its bf16 class; 8bit 1.1: blocksizes
    # to 16384
    assert lib.versions["4bit"] == (1, 3) and lib.versions["8bit"] == (1, 1)
    assert lib.backend_versions == lib.versions
    assert lib.backend_name() == "cpu"
    assert kbit.load(lib.path) is not lib  # another handle for the path spelling, same file
    assert kbit.load(lib.path).path == lib.path


def test_raw_functions_return_the_status_as_int_and_checked_raises():
    lib = kbit.load("cpu")
    a = np.ones(64, np.float32)
    absmax = np.zeros(1, np.float32)
    out = np.full(32, 0xAB, np.uint8)
    status = lib.cquantize_blockwise_fp32_nf4(None, a.ctypes.data, absmax.ctypes.data, out.ctypes.data, 48, 64)
    assert status == 1 and isinstance(status, int)
    assert lib.last_error() == "cquantize_blockwise_fp32_nf4: blocksize 48 is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096"
    assert (out == 0xAB).all() and absmax[0] == 0  # nothing written
    with pytest.raises(kbit.KbitError) as e:
        lib.checked.cquantize_blockwise_fp32_nf4(None, a.ctypes.data, absmax.ctypes.data, out.ctypes.data, 48, 64)
    assert e.value.status == 1 and e.value.status_name == "KBIT_STATUS_INVALID_ARGUMENT"
    assert e.value.function == "cquantize_blockwise_fp32_nf4"
    assert e.value.message.startswith("cquantize_blockwise_fp32_nf4: blocksize 48")
    assert str(e.value) == "KBIT_STATUS_INVALID_ARGUMENT: " + e.value.message
    assert lib.checked.cquantize_blockwise_fp32_nf4(None, a.ctypes.data, absmax.ctypes.data, out.ctypes.data, 64, 64) == 0
    assert absmax[0] == 1.0


def test_trampoline_errors_carry_the_backend_message():
    lib = kbit.load()
    with pytest.raises(kbit.KbitError, match=r"^KBIT_STATUS_INVALID_ARGUMENT: cdequantize_blockwise_fp32: "):
        lib.checked.cdequantize_blockwise_fp32(None, None, None, None, 64, 64, None)


def test_non_status_functions_are_not_wrapped():
    lib = kbit.load("cpu")
    assert lib.checked.kbit_backend_name() == b"cpu"
    assert lib.status_name(100) == "KBIT_STATUS_NOT_SUPPORTED"


def test_unknown_backend_raises_with_the_loader_message():
    with pytest.raises(kbit.KbitError) as e:
        kbit.load("nosuchbackend")
    assert e.value.function == "kbit_loader_open" and e.value.status_name == "KBIT_STATUS_NOT_SUPPORTED"
    assert "nosuchbackend" in e.value.message


def _python(code, env):
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_kbit_library_dir_overrides_discovery(tmp_path):
    lib_dir = kbit.library_dir()
    r = _python("import kbit; print(kbit.library_dir()); print(kbit.load().backend_name())",
                subprocess_env(KBIT_LIBRARY_DIR=str(lib_dir)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(lib_dir), "cpu"]
    r = _python("import kbit; kbit.load()", subprocess_env(KBIT_LIBRARY_DIR=str(tmp_path)))
    assert r.returncode != 0 and f"KBIT_LIBRARY_DIR={tmp_path} does not contain libkbit.so" in r.stderr


def test_discovery_without_kbit_library_dir():
    # A source checkout finds <repo>/build/lib; an installed package its own kbit/_lib.
    installed = bool(os.environ.get("KBIT_TEST_INSTALLED"))
    if not installed and os.path.realpath(kbit.library_dir()) != os.path.realpath(ROOT / "build" / "lib"):
        pytest.skip("this build tree is not <repo>/build, which a source checkout discovers")
    env = subprocess_env()
    env.pop("KBIT_LIBRARY_DIR", None)
    r = _python("import kbit; print(kbit.library_dir()); print(kbit.__file__)", env)
    assert r.returncode == 0, r.stderr
    lib_dir, init = r.stdout.split()
    if installed:
        assert lib_dir == os.path.join(os.path.dirname(init), "_lib")
    else:
        assert lib_dir == str(ROOT / "build" / "lib") and init == str(ROOT / "python" / "kbit" / "__init__.py")


def test_cublas_wheel_directory_is_passed_to_the_cuda_backend(tmp_path):
    """With the nvidia-cublas wheel's package on the path, importing kbit sets KBIT_CUBLASLT_DIR to its lib/
    (where the CUDA backend looks after the library search path); a value the user set is kept."""
    (tmp_path / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    (tmp_path / "nvidia" / "cublas" / "__init__.py").write_text("")
    code = "import os, kbit; print(os.environ.get('KBIT_CUBLASLT_DIR', 'unset'))"
    env = subprocess_env()
    env.pop("KBIT_CUBLASLT_DIR", None)
    without = _python(code, env)
    assert without.returncode == 0, without.stderr
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH", "")]))
    found = _python(code, env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(tmp_path / "nvidia" / "cublas" / "lib")
    assert without.stdout.strip() != found.stdout.strip()
    kept = _python(code, dict(env, KBIT_CUBLASLT_DIR="/opt/mine"))
    assert kept.stdout.strip() == "/opt/mine"


@pytest.fixture(scope="module")
def fakes():
    d = os.environ.get("KBIT_TEST_FAKES")
    if not d:
        pytest.skip("KBIT_TEST_FAKES (the loader test kit's fake backends) not set: run through ctest")
    return d


def test_function_of_a_missing_interface_says_so(fakes):
    lib = kbit.load(os.path.join(fakes, "libkbit_coreonly.so"))
    assert set(lib.versions) == {"core"} and lib.name == "coreonly"
    assert not hasattr(lib, "cquantize_blockwise_fp32_nf4")
    with pytest.raises(kbit.KbitError, match=r"cquantize_blockwise_fp32_nf4: backend coreonly \(.*libkbit_coreonly.so\) "
                                             "does not implement the 4bit interface"):
        lib.cquantize_blockwise_fp32_nf4
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        lib.no_such_function


def test_loader_stub_of_a_missing_function_raises_with_its_message(fakes):
    path = os.path.join(fakes, "libkbit_missingfn.so")
    lib = kbit.load(path)
    with pytest.raises(kbit.KbitError) as e:
        lib.checked.cdequantize_blockwise_fp32_nf4(None, None, None, None, 64, 0, None)
    assert e.value.status_name == "KBIT_STATUS_NOT_IMPLEMENTED"
    assert e.value.message == f"cdequantize_blockwise_fp32_nf4: not implemented by backend missingfn ({path})"


def test_status_names_come_from_the_header_and_agree_with_the_cpu_backend():
    lib = kbit.load("cpu")
    assert _abi.STATUS_NAMES[0] == "KBIT_STATUS_SUCCESS" and _abi.STATUS_NAMES[100] == "KBIT_STATUS_NOT_SUPPORTED"
    for value, name in _abi.STATUS_NAMES.items():
        assert lib.kbit_status_string(value).decode() == name == lib.status_name(value)


def test_errors_are_per_thread():
    # ctypes releases the GIL: calls run concurrently, and each thread's KbitError carries its own message.
    import threading
    lib = kbit.load("cpu")
    a = np.ones(4096, np.float32)
    absmax = np.zeros(64, np.float32)
    out = np.zeros(2048, np.uint8)
    failures = []

    def worker(bs):
        for _ in range(200):
            try:
                lib.checked.cquantize_blockwise_fp32_nf4(None, a.ctypes.data, absmax.ctypes.data, out.ctypes.data, bs,
                                                         4096 if bs == 64 else 64)
                if bs != 64:
                    failures.append("no error")
            except kbit.KbitError as e:
                if bs == 64 or f"blocksize {bs} is not one of" not in e.message:
                    failures.append(e.message)

    threads = [threading.Thread(target=worker, args=(bs,)) for bs in (64, 48, 100, 64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
