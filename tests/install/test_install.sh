#!/usr/bin/env bash
# ctest install.consumer: `cmake --install` into a temporary prefix, then build and run small consumers
# with find_package(kbit) and with pkg-config, build a vendor backend the way docs/vendor-backend.md tells vendors
# to, and run the installed `kbit info`; then the vendor's tools, kbit-check-exports and kbit-conformance, from
# a copy of the prefix elsewhere, without the source and build trees.
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
         "$libdir/libkbit_io.so" "$prefix/include/kbit/kbit_io.h" "$prefix/share/kbit/abi/kbit_io.map" \
         "$prefix/bin/kbit-conformance" "$prefix/bin/kbit-check-exports" "$prefix/share/kbit/tools/_abidef.py" \
         "$prefix/share/kbit/golden/bnb_4bit.bin" "$prefix/share/kbit/golden/8bit_index.json"; do
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
# The loader test kit's fake backend stands in for the vendor's source: a vendor at 4bit 1.0, which must not
# export the functions of later minors (the fake's definitions of them renamed away, as its OMIT does).
"$cc" -std=c11 -O2 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags kbit) -I"$abidir" \
      -DFAKE_NAME='"acme"' -DFAKE_PROBE=20 -DFAKE_4BIT_VERSION=0x10000 \
      -Dkbit_gemm_4bit_grouped=fake_omitted_kbit_gemm_4bit_grouped \
      -Dkbit_gemm_4bit_precision=fake_omitted_kbit_gemm_4bit_precision \
      -Wl,--version-script="$abidir/kbit_core.map" -Wl,--version-script="$abidir/kbit_4bit.map" \
      -Wl,-Bsymbolic -Wl,--no-undefined -o "$tmp/vendor/libkbit_acme.so" "$src/tests/loader/fake_backend.c"
KBIT_BACKEND_PATH=$tmp/vendor "$prefix/bin/kbit" info >"$tmp/vendor.txt"
grep -A4 "^  acme" "$tmp/vendor.txt" | grep -q "^    status:      usable, probe score 20\$" || { cat "$tmp/vendor.txt"; exit 1; }
grep -A5 "^  acme" "$tmp/vendor.txt" | grep -q "^    interfaces:  core 1.0, 4bit 1.0, 8bit absent, optim8 absent\$" ||
  { cat "$tmp/vendor.txt"; exit 1; }

echo "== kbit info"
KBIT_BACKEND=cpu "$prefix/bin/kbit" info >"$tmp/info.txt"
grep -q "^  loader directory    $libdir\$" "$tmp/info.txt" || { cat "$tmp/info.txt"; exit 1; }
grep -q "^default: cpu ($libdir/libkbit_cpu.so), probe score 10, chosen by KBIT_BACKEND=cpu\$" "$tmp/info.txt" || { cat "$tmp/info.txt"; exit 1; }
echo "== the vendor's tools from a moved prefix (docs/vendor-backend.md steps 3 and 4)"
# A copy of the prefix elsewhere: the tools find libkbit.so, the ABI lists and the golden vectors relative
# to themselves, and every run starts in / with an empty environment (no KBIT_GOLDEN_DIR).
cp -a "$prefix" "$tmp/moved"
moved=$(cd "$tmp/moved" && pwd -P)
mlib=$(cd "$(dirname "$(find "$moved" -name libkbit.so)")" && pwd -P)
golden=$(cd "$moved/share/kbit/golden" && pwd -P)
fail() { echo "install.consumer: $1"; [[ -z ${2:-} ]] || cat "$2"; exit 1; }
clean_env=(env -i PATH="$PATH")

# Its run path: only $ORIGIN-relative entries, nothing of the build tree.
readelf -d "$moved/bin/kbit-conformance" >"$tmp/dynamic.txt"
! grep -q '(RPATH)' "$tmp/dynamic.txt" || fail "kbit-conformance has a DT_RPATH" "$tmp/dynamic.txt"
runpath=$(sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p' "$tmp/dynamic.txt")
[[ -n $runpath ]] || fail "kbit-conformance has no RUNPATH" "$tmp/dynamic.txt"
IFS=: read -ra entries <<<"$runpath"
for e in "${entries[@]}"; do
  [[ $e == '$ORIGIN/'* ]] || fail "kbit-conformance's RUNPATH entry '$e' is not relative to the program"
done
echo "kbit-conformance RUNPATH: $runpath"

# kbit-check-exports: the stand-in vendor backend and the installed CPU backend pass, a wrong claim fails.
(cd / && "${clean_env[@]}" "$moved/bin/kbit-check-exports" "$tmp/vendor/libkbit_acme.so" core 4bit) >"$tmp/exports.txt" ||
  fail "kbit-check-exports rejected the vendor backend" "$tmp/exports.txt"
grep -qx "$tmp/vendor/libkbit_acme.so: [0-9]* symbols with their version nodes, lists core, 4bit: OK" "$tmp/exports.txt" ||
  fail "unexpected kbit-check-exports output" "$tmp/exports.txt"
(cd / && "${clean_env[@]}" "$moved/bin/kbit-check-exports" "$mlib/libkbit_cpu.so" core 4bit 8bit optim8 bnb_cpu) \
  >"$tmp/exports.txt" || fail "kbit-check-exports rejected libkbit_cpu.so" "$tmp/exports.txt"
grep -qx "$mlib/libkbit_cpu.so: [0-9]* symbols with their version nodes, lists core, 4bit, 8bit, optim8, bnb_cpu: OK" \
  "$tmp/exports.txt" || fail "unexpected kbit-check-exports output" "$tmp/exports.txt"
rc=0
(cd / && "${clean_env[@]}" "$moved/bin/kbit-check-exports" "$tmp/vendor/libkbit_acme.so" core 4bit 8bit) \
  >"$tmp/exports.txt" || rc=$?
[[ $rc == 1 ]] || fail "kbit-check-exports: exit $rc for a backend without 8bit claimed as having it" "$tmp/exports.txt"
grep -qx "  lists exported: \['core', '4bit'\], expected: \['core', '4bit', '8bit'\]" "$tmp/exports.txt" ||
  fail "unexpected kbit-check-exports output" "$tmp/exports.txt"
cat "$tmp/exports.txt"

# kbit-conformance: the core cases and three sets of golden vectors, on the CPU backend named by path and by
# name (found beside the moved libkbit.so).
check_conformance() {  # LOG: the installed backend, the installed golden vectors, every case passed
  grep -q "^backend cpu ($mlib/libkbit_cpu.so)" "$1" || fail "kbit-conformance tested another backend" "$1"
  grep -qx "golden vectors: $golden/" "$1" || fail "kbit-conformance read other golden vectors" "$1"
  grep -q "^All tests passed" "$1" || fail "kbit-conformance did not pass" "$1"
}
(cd / && "${clean_env[@]}" "$moved/bin/kbit-conformance" --backend "$mlib/libkbit_cpu.so" "[core],[golden],[torchao]") \
  >"$tmp/conformance.txt" 2>&1 || fail "kbit-conformance --backend PATH failed" "$tmp/conformance.txt"
check_conformance "$tmp/conformance.txt"
tail -n 2 "$tmp/conformance.txt"
(cd / && "${clean_env[@]}" "$moved/bin/kbit-conformance" --backend cpu "[core]") >"$tmp/conformance.txt" 2>&1 ||
  fail "kbit-conformance --backend cpu failed" "$tmp/conformance.txt"
check_conformance "$tmp/conformance.txt"

# Again with the source tree, the build tree and /proc hidden (tmpfs mounts in a private mount namespace,
# where this process may make one). Without /proc, glibc expands the run path's $ORIGIN from
# LD_ORIGIN_PATH, and the suite finds its directory through AT_EXECFN.
hide=""
for ns in "unshare --mount --propagation private" "unshare --map-root-user --mount"; do
  if $ns sh -c 'mount -t tmpfs kbit-probe "$1"' sh "$tmp/vendor" 2>/dev/null; then hide=$ns; break; fi
done
if [[ -z $hide ]]; then
  echo "(skipped the run without source tree, build tree and /proc: cannot make a mount namespace here)"
elif [[ $moved/ == "$(cd "$src" && pwd -P)"/* || $moved/ == "$(cd "$build" && pwd -P)"/* ]]; then
  echo "(skipped the run without source tree, build tree and /proc: the prefix is inside one of them)"
else
  # (The build tree first: it may lie inside the source tree.)
  $hide sh -c 'for d in "$1" "$2" /proc; do [ ! -d "$d" ] || mount -t tmpfs kbit-hidden "$d" || exit 1; done &&
               [ ! -e "$2/CMakeLists.txt" ] && [ ! -e /proc/self ] && shift 2 && cd / && exec "$@"' \
    sh "$build" "$src" "${clean_env[@]}" LD_ORIGIN_PATH="$moved/bin" sh -c \
    '"$1/bin/kbit-check-exports" "$2" core 4bit 8bit optim8 bnb_cpu && "$1/bin/kbit-conformance" --backend cpu "[core],[golden]"' \
    sh "$moved" "$mlib/libkbit_cpu.so" >"$tmp/conformance.txt" 2>&1 ||
    fail "the vendor's tools failed without source tree, build tree and /proc" "$tmp/conformance.txt"
  check_conformance "$tmp/conformance.txt"
  grep -q "libkbit_cpu.so: [0-9]* symbols with their version nodes, lists core, 4bit, 8bit, optim8, bnb_cpu: OK" \
    "$tmp/conformance.txt" || fail "unexpected kbit-check-exports output" "$tmp/conformance.txt"
  echo "ran without source tree, build tree and /proc ($hide)"
fi
echo "install.consumer: OK"
