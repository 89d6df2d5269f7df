#!/usr/bin/env bash
# check-includes.sh VENDOR_BUILD_DIR KBIT_PREFIX: fails when a file compiled into the vendor backend
# included anything from kbit's source or build trees other than this directory, i.e. when the build
# used more than the installed kbit (KBIT_PREFIX), the system and vendors/opencl itself. Reads the
# header dependencies Ninja recorded (`ninja -t deps`), so it sees what the compiler really opened.
set -euo pipefail
build=$(cd "$1" && pwd -P) prefix=$(cd "$2" && pwd -P)
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
deps=$(ninja -C "$build" -t deps)
[[ -n $deps ]] || { echo "check-includes: ninja recorded no dependencies in $build (built with Ninja?)"; exit 1; }
bad=0 files=0
while read -r path; do
  [[ $path == /* ]] || path=$build/$path
  path=$(realpath -m "$path")
  files=$((files + 1))
  case $path in
    "$prefix"/* | "$here"/* | "$build"/*) ;;
    "$repo"/*) echo "check-includes: $path is in kbit's tree, not in the installed kbit"; bad=1 ;;
  esac
done < <(printf '%s\n' "$deps" | awk '/^    /{print $1}')
((bad == 0)) || exit 1
echo "check-includes: $files included files, all from $prefix, the system or vendors/opencl"
