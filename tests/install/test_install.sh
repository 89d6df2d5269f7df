#!/usr/bin/env bash
# ctest install.consumer: `cmake --install` into a temporary prefix, then build and run small consumers
# with find_package(kbit) and with pkg-config, build a vendor backend the way docs/vendor-backend.md tells vendors
# to, and run the installed `kbit info`.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR CMAKE C_COMPILER PYTHON
set -euo pipefail
build=$1 src=$2 cmake=$3 cc=$4 python=$5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbit-install-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset KBIT_BACKEND KBIT_BACKEND_PATH KBIT_LOADER_DEBUG
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log"
loader=$(find "$prefix" -name libkbit.so)
libdir=$(cd "$(dirname "$loader")" && pwd -P)
for f in "$prefix/include/kbit/kbit.h" "$prefix/include/kbit/kbit_loader.h" "$prefix/include/kbit/kbit_loader_tables.h" \
         "$libdir/libkbit_cpu.so" "$libdir/pkgconfig/kbit.pc" "$libdir/cmake/kbit/kbitConfig.cmake" \
         "$prefix/share/kbit/abi/kbit_4bit.map" "$prefix/bin/kbit" \
         "$libdir/libkbit_io.so" "$prefix/include/kbit/kbit_io.h" "$prefix/share/kbit/abi/kbit_io.map"; do
  [[ -f $f ]] || { echo "not installed: $f"; exit 1; }
done

echo "== find_package(kbit)"
"$cmake" -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_C_COMPILER="$cc" \
         -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
"$cmake" --build "$tmp/consumer" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
# KBIT_BACKEND=cpu: on a machine with a GPU the installed CUDA backend would be the default.
KBIT_BACKEND=cpu "$tmp/consumer/consumer_loader" "$libdir"
"$tmp/consumer/consumer_cpu"

echo "== pkg-config kbit"
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs kbit)
echo "pkg-config: $flags (version $(pkg-config --modversion kbit))"
"$cc" -std=c99 -Werror -o "$tmp/pc_consumer" "$src/tests/install/consumer_loader.c" $flags -Wl,-rpath,"$libdir"
KBIT_BACKEND=cpu "$tmp/pc_consumer" "$libdir"

echo "== a vendor backend built against the installed kbit (docs/vendor-backend.md)"
abidir=$(pkg-config --variable=abidir kbit)
mkdir "$tmp/vendor"
# The loader test kit's fake backend stands in for the vendor's source.
"$cc" -std=c11 -O2 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags kbit) -I"$abidir" \
      -DFAKE_NAME='"acme"' -DFAKE_PROBE=20 -DFAKE_4BIT_VERSION=0x10000 \
      -Wl,--version-script="$abidir/kbit_core.map" -Wl,--version-script="$abidir/kbit_4bit.map" \
      -Wl,-Bsymbolic -Wl,--no-undefined -o "$tmp/vendor/libkbit_acme.so" "$src/tests/loader/fake_backend.c"
"$python" "$src/tests/abi/check_exports.py" "$tmp/vendor/libkbit_acme.so" core 4bit
KBIT_BACKEND_PATH=$tmp/vendor "$prefix/bin/kbit" info >"$tmp/vendor.txt"
grep -A4 "^  acme" "$tmp/vendor.txt" | grep -q "^    status:      usable, probe score 20\$" || { cat "$tmp/vendor.txt"; exit 1; }
grep -A5 "^  acme" "$tmp/vendor.txt" | grep -q "^    interfaces:  core 1.0, 4bit 1.0, 8bit absent, optim8 absent\$" ||
  { cat "$tmp/vendor.txt"; exit 1; }

echo "== kbit info"
KBIT_BACKEND=cpu "$prefix/bin/kbit" info >"$tmp/info.txt"
grep -q "^  loader directory    $libdir\$" "$tmp/info.txt" || { cat "$tmp/info.txt"; exit 1; }
grep -q "^default: cpu ($libdir/libkbit_cpu.so), probe score 10, chosen by KBIT_BACKEND=cpu\$" "$tmp/info.txt" || { cat "$tmp/info.txt"; exit 1; }
echo "install.consumer: OK"
