#!/usr/bin/env python3
"""ctest cli.inspect: `kbit inspect` (text and --json) on the checkpoints of tests/io (written by the
Python package, fixture io.make_checkpoints), its errors and exit statuses (0 ok, 1 bad file, 2 usage).
Usage: test_inspect.py PATH/TO/kbit CHECKPOINTS_DIR"""
import json
import re
import subprocess
import sys
from pathlib import Path

KBIT, DATA = sys.argv[1], Path(sys.argv[2])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args):
    p = subprocess.run([KBIT, *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


expected = json.loads((DATA / "good" / "expected.json").read_text())
NUMPY_TO_SAFE = {"float32": "F32", "float16": "F16", "uint8": "U8", "int8": "I8", "uint16": "U16"}

# -- usage
rc, out, _ = run("help")
check(re.search(r"^  inspect +list the tensors", out, re.M), "kbit help lists inspect")
rc, out, _ = run("inspect", "--help")
check(rc == 0 and out.startswith("usage: kbit inspect PATH [--json]"), f"--help: exit 0 and usage, got {rc}")
for args in ((), ("--bogus", "x"), ("a", "b")):
    rc, out, err = run("inspect", *args)
    check(rc == 2 and "usage: kbit inspect" in err and out == "", f"inspect {args}: exit 2 with usage on stderr, got {rc}")

# -- a good file, text
good = DATA / "good" / "mixed.safetensors"
rc, out, err = run("inspect", good)
check(rc == 0 and err == "", f"inspect good: exit 0, no stderr; got {rc} {err!r}")
check(f"checkpoint: {good}\n" in out, "text: checkpoint line")
check(f"tensors: {len(expected['tensors'])}, " in out, "text: tensor count")
for name, e in expected["tensors"].items():
    shape = "[" + ", ".join(map(str, e["shape"])) + "]"
    check(re.search(rf"^  {re.escape(name)} +{NUMPY_TO_SAFE[e['dtype']]} +{re.escape(shape)} +{len(e['hex']) // 2} B$",
                    out, re.M), f"text: tensor line of {name}")
check(f"quantized layers: {len(expected['order'])}\n" in out, "text: layer count")
check(re.search(r"^  model\.layers\.0\.k_proj  fp4 \[16, 64\] bfloat16, blocksize 128, nested \(blocksize 256\); "
                r"1612 B \(weight 512 B, scales and maps 1100 B; 12\.59 bits per weight\)$", out, re.M),
      "text: nested fp4 layer line")
check(re.search(r"^  model\.layers\.1\.storage  nf4 \[4, 16\] float32, blocksize 64, not nested, storage U16; ", out, re.M),
      "text: quant_storage uint16 layer line")
check(re.search(r"^  model\.layers\.2\.int8  int8 \[6, 10\], row scales \(SCB\); 84 B ", out, re.M), "text: int8 line")
check(re.search(r"^  model\.layers\.3\.mlp\.experts\.gate_up_proj  nf4 \[4, 16, 32\] bfloat16, 4 experts of \[16, 32\], "
                r"blocksize 64, nested \(blocksize 256\); 2148 B \(weight 1024 B, scales and maps 1124 B; 8\.39 bits per "
                r"weight\)$", out, re.M), "text: fused experts (nested nf4) line")
check(re.search(r"^  model\.layers\.3\.mlp\.experts\.down_proj  fp4 \[4, 32, 8\] float32, 4 experts of \[32, 8\], "
                r"blocksize 32, not nested; 704 B \(weight 512 B, scales and maps 192 B; 5\.50 bits per weight\)$", out, re.M),
      "text: fused experts (fp4) line")

# -- JSON, single file and sharded directory
for path, shards in ((good, 1), (DATA / "good" / "sharded", 2)):
    rc, out, err = run("inspect", path, "--json")
    check(rc == 0, f"--json {path}: exit 0, got {rc} {err!r}")
    try:
        j = json.loads(out)
    except ValueError as e:
        check(False, f"--json {path}: not JSON ({e})")
        continue
    check(len(j["shards"]) == shards, f"--json {path}: {shards} shards")
    check(j["shards"][0]["metadata"] == {"format": "pt"}, f"--json {path}: metadata")
    got = {t["name"]: t for t in j["tensors"]}
    check(sorted(got) == sorted(expected["tensors"]), f"--json {path}: tensor names")
    for name, e in expected["tensors"].items():
        t = got.get(name, {})
        check(t.get("dtype") == NUMPY_TO_SAFE[e["dtype"]] and t.get("shape") == e["shape"] and
              t.get("bytes") == len(e["hex"]) // 2, f"--json {path}: tensor {name}")
    check(j["total_bytes"] == sum(len(e["hex"]) // 2 for e in expected["tensors"].values()), "--json: total_bytes")
    check([q["prefix"] for q in j["quantized"]] == expected["order"], f"--json {path}: layer order")
    for q in j["quantized"]:
        e = expected["layers"][q["prefix"]]
        check(q["format"] == e["format"] and q["shape"] == e["shape"], f"--json {path}: {q['prefix']} format/shape")
        if e["format"] != "int8":
            check(q["blocksize"] == e["blocksize"] and q["nested"] == e["nested"] and q["dtype"] == e["dtype"],
                  f"--json {path}: {q['prefix']} blocksize/nested/dtype")
            check(q.get("nested_blocksize") == e.get("nested_blocksize"), f"--json {path}: {q['prefix']} nested_blocksize")
        check(q.get("parameter", False) == e["parameter"] and q.get("experts") == (e["experts"] or None),
              f"--json {path}: {q['prefix']} parameter/experts")

# -- bad files
rc, out, err = run("inspect", DATA / "bad" / "overlap.safetensors")
check(rc == 1 and out == "" and err.startswith("kbit inspect: kbit_io_open: ") and "without gap or overlap" in err,
      f"bad file: exit 1 with the reader's message; got {rc} {err!r}")
rc, out, err = run("inspect", DATA / "no-such-file.safetensors", "--json")
check(rc == 1 and out == "" and "cannot open" in err, f"missing file: exit 1; got {rc} {err!r}")
bad_layer = DATA / "bad" / "scb_count.safetensors"
rc, out, err = run("inspect", bad_layer)
check(rc == 1 and re.search(r"^  m\.l  INVALID: kbit_io_quant_describe: .*m\.l\.SCB has 3 elements", out, re.M) and
      "kbit inspect: kbit_io_quant_describe: " in err, f"bad layer: exit 1, listed INVALID; got {rc} {err!r}")
rc, out, err = run("inspect", bad_layer, "--json")
j = json.loads(out) if out else {}
check(rc == 1 and j.get("quantized", [{}])[0].get("prefix") == "m.l" and
      "the weight's 4 rows need 4" in j["quantized"][0].get("error", ""), f"bad layer --json: error entry; got {rc}")

if failures:
    print("cli.inspect FAILED:", *failures, sep="\n  ")
    sys.exit(1)
print("cli.inspect: OK")
