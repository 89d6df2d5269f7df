#!/usr/bin/env bash
# ctest python.pip_install: a real `pip install .` (scikit-build-core runs the CMake build) into a
# fresh virtual environment, then the installed package used from outside the source tree: its
# libraries are the ones inside the package, the whole pytest suite passes against it, and the
# README's quick start runs.
# Usage: test_pip_install.sh SOURCE_DIR BUILD_DIR PYTHON
set -euo pipefail
src=$1 build=$2 python=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbit-pip-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset KBIT_LIBRARY_DIR PYTHONPATH KBIT_BACKEND_PATH
export KBIT_BACKEND=cpu  # on a GPU machine the default backend would otherwise be CUDA's (not in the wheel)

"$python" -m venv "$tmp/venv"
venv_python=$tmp/venv/bin/python
# Offline and quick: the build requirement (scikit-build-core) and the dependencies (numpy, ml_dtypes,
# safetensors; cffi and pytest for the suite) are the project's environment's, made visible to the new
# environment through a .pth file; pip still checks that they satisfy pyproject.toml. kbit itself is
# built from source; the CMake build directory lives in the build tree so that reruns are incremental.
deps=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$deps" > "$site/kbit-test-dependencies.pth"
"$venv_python" -m pip install --no-build-isolation --no-index --disable-pip-version-check -q \
    --config-settings=build-dir="$build/python-wheel" "$src"

cd "$tmp"  # nothing of the source tree on the path from here on
"$venv_python" - <<'PY'
import os, sys
import kbit
pkg = os.path.dirname(kbit.__file__)
assert pkg.startswith(sys.prefix), f"kbit imported from {pkg}, not the virtual environment {sys.prefix}"
assert str(kbit.library_dir()) == os.path.join(pkg, "_lib"), kbit.library_dir()
for f in ("_lib/libkbit.so", "_lib/libkbit_cpu.so", "_lib/libkbit_io.so", "_bin/kbit", "abi/kbit_4bit.def", "abi/interfaces.def", "_abidef.py", "include/kbit/kbit_core.h"):
    assert os.path.isfile(os.path.join(pkg, f)), f
lib = kbit.load()
assert lib.path == os.path.join(pkg, "_lib", "libkbit.so") and lib.backend_name() == "cpu"
assert kbit.load("cpu").path == os.path.join(pkg, "_lib", "libkbit_cpu.so")
import importlib.metadata
assert importlib.metadata.version("kbit") == kbit.__version__, (importlib.metadata.version("kbit"), kbit.__version__)
print("installed:", pkg, kbit.__version__)
PY
# The console script runs the kbit command inside the package, which finds the package's libraries.
info=$("$tmp/venv/bin/kbit" info)
grep -q "$tmp/venv/.*/kbit/_lib/libkbit_cpu.so" <<< "$info" || { echo "kbit info: $info"; exit 1; }
# The suite against the installed package (KBIT_TEST_INSTALLED: no source tree on sys.path).
KBIT_TEST_INSTALLED=1 "$venv_python" -m pytest -q -p no:cacheprovider "$src/tests/python"
echo "python.pip_install: OK"
