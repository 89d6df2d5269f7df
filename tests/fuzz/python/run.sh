#!/usr/bin/env bash
# Runs each atheris fuzz target tests/fuzz/python/fuzz_<name>.py for SECONDS (default 20) on a
# temporary copy of its seed corpus (corpus/<name>/) and prints, per target, the executions done and
# "clean" or the finding (the exception or crash, and where libFuzzer saved the input). Exits 1 on a
# finding, 77 with "SKIPPED: ..." when atheris cannot be imported, 0 otherwise.
#
#   tests/fuzz/python/run.sh [SECONDS]
#
# Environment:
#   PYTHON               the interpreter (default: .venv/bin/python of the checkout, else python3)
#   KBIT_FUZZ_TIMEOUT    libFuzzer's -timeout per input in seconds (default 10): a slower input is a hang
#   KBIT_FUZZ_ASAN=1     then runs each target a second time for SECONDS against build-asan/lib (the
#                        ASan+UBSan build of scripts/sanitize) with libasan preloaded, starting from the
#                        corpus the first run grew, so that an out-of-bounds or misaligned access on the
#                        C side aborts. asan_coverage_shim.c (built here with $CC, default cc) keeps
#                        atheris' coverage feedback working there; without a compiler that run mutates
#                        blind (libasan's weak coverage stubs take atheris' counters).
#   KBIT_FUZZ_KEEP=1     keeps the temporary directory (corpora, logs) even when clean
# Reproduce a finding:   PYTHONPATH=python python tests/fuzz/python/fuzz_<name>.py <saved input>
set -u
secs=${1:-20}
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then py=$repo/.venv/bin/python; else py=python3; fi
fi
if ! why=$("$py" -c "import atheris" 2>&1); then
  echo "SKIPPED: atheris is not importable by $py (pip install atheris): ${why##*$'\n'}"
  exit 77
fi
# atheris' libFuzzer, for asan_coverage_shim.c
core=$("$py" -c 'import atheris, glob, os
print(glob.glob(os.path.join(os.path.dirname(atheris.__file__), "core_with_libfuzzer*.so"))[0])' 2>/dev/null)
work=$(mktemp -d "${TMPDIR:-/tmp}/kbit-pyfuzz.XXXXXX")
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}"
timeout_s=${KBIT_FUZZ_TIMEOUT:-10}
found=0

# What went wrong, from a log: a sanitizer's report, else the uncaught Python exception (with the
# fuzz target's list of mutations), else libFuzzer's own error (timeout, out of memory, signal), and
# where libFuzzer saved the input.
report() {
  if grep -q -e 'runtime error' -e 'ERROR: AddressSanitizer' "$1"; then
    grep -m1 -A10 -e 'runtime error' -e 'ERROR: AddressSanitizer' "$1"
  elif grep -q 'Uncaught Python exception' "$1"; then
    sed -n '/Uncaught Python exception/,/^Traceback/p' "$1" | grep -v -e '^Traceback' -e 'Uncaught Python' | head -12
    awk '/^Traceback/ {t = 1} t && /^  File/ && !/, in fail$/ {f = $0} t && /^$/ {exit} END {if (f) print "  innermost: " f}' "$1"
  elif grep -q -e 'ERROR: libFuzzer' -e 'Fatal Python error' "$1"; then
    grep -m1 -A5 -e 'ERROR: libFuzzer' -e 'Fatal Python error' "$1"
  else  # it did not get to fuzzing (an import failed, ...)
    tail -5 "$1"
  fi | cut -c1-400 | sed 's/^/    /'
  grep -h 'Test unit written to' "$1" | tail -1 | sed 's/^.*Test unit written to/    input saved to/'
}

for target in "$here"/fuzz_*.py; do
  name=${target##*/fuzz_}
  name=${name%.py}
  corpus=$work/$name-corpus
  mkdir -p "$corpus"
  if [ -d "$here/corpus/$name" ]; then cp "$here/corpus/$name"/* "$corpus"/ 2>/dev/null; fi
  log=$work/$name.log
  (cd "$repo" && timeout $((secs + 180)) "$py" "$target" -max_total_time="$secs" -timeout="$timeout_s" \
    -rss_limit_mb=4096 -len_control=0 -print_final_stats=1 -artifact_prefix="$work/$name-" "$corpus") \
    >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  files=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    echo "$name: ${execs:-0} executions in ${secs} s (${rate:-?}/s), corpus $files inputs: clean"
  else
    found=1
    echo "$name: FINDING (exit $rc) after ${execs:-?} executions:"
    report "$log"
    echo "    log: $log"
    continue
  fi
  if [ "${KBIT_FUZZ_ASAN:-}" = 1 ]; then
    asan=$(gcc -print-file-name=libasan.so 2>/dev/null)
    cxx=$(gcc -print-file-name=libstdc++.so 2>/dev/null)  # else ASan cannot intercept the C++ throw by which
    # atheris passes on a Python exception, and reports a CHECK failure instead of the exception
    if [ ! -f "$repo/build-asan/lib/libkbit.so" ] || [ ! -f "$asan" ]; then
      echo "$name: ASan run skipped (no build-asan/lib/libkbit.so: scripts/sanitize builds it, or no libasan)"
      continue
    fi
    preload="$asan:$cxx"
    mode="coverage-guided"
    if [ -z "$core" ]; then
      touch "$work/shim.failed"
    elif [ ! -f "$work/shim.so" ] && [ ! -f "$work/shim.failed" ]; then
      "${CC:-cc}" -O1 -shared -fPIC -o "$work/shim.so" "$here/asan_coverage_shim.c" -ldl >"$work/shim.log" 2>&1 ||
        touch "$work/shim.failed"
    fi
    if [ -f "$work/shim.so" ]; then
      preload="$work/shim.so:$preload"  # before libasan, whose link-order check is then switched off
    else
      mode="blind: asan_coverage_shim.c not built, see $work/shim.log"
    fi
    alog=$work/$name-asan.log
    current=$work/$name-asan-current-input
    (cd "$repo" && LD_PRELOAD="$preload" KBIT_LIBRARY_DIR="$repo/build-asan/lib" KBIT_FUZZ_ATHERIS_CORE="$core" \
      KBIT_FUZZ_CURRENT_INPUT="$current" \
      ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      timeout $((secs * 2 + 300)) "$py" "$target" -max_total_time="$secs" -timeout="$((timeout_s * 5))" \
      -rss_limit_mb=0 -len_control=0 -print_final_stats=1 -artifact_prefix="$work/$name-asan-" "$corpus") \
      >"$alog" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$alog" | tail -1)
    if [ "$rc" -eq 0 ] && ! grep -q 'runtime error' "$alog"; then
      echo "$name: ASan+UBSan: ${execs:-?} executions in ${secs} s ($mode): clean"
    else
      found=1
      echo "$name: FINDING under ASan+UBSan (exit $rc) after ${execs:-?} executions:"
      report "$alog"
      grep -q 'Test unit written to' "$alog" || echo "    input (the one running when it died) saved to $current"
      echo "    log: $alog"
    fi
  fi
done

if [ "$found" -ne 0 ] || [ "${KBIT_FUZZ_KEEP:-}" = 1 ]; then
  echo "inputs and logs kept in $work"
else
  rm -rf "$work"
fi
exit "$found"
