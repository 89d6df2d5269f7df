#!/usr/bin/env python3
"""Writes the current tables at the top of bench/RESULTS.md from the raw CSVs in bench/results/.

    python3 bench/results_tables.py           # rewrite the region between the two marker lines
    python3 bench/results_tables.py --check   # exit 1 if RESULTS.md differs from what it would write
                                              # (2: a CSV, current.json or the markers are wrong)
    python3 bench/results_tables.py --print   # the region on stdout, RESULTS.md untouched

Which rows are current is data, not prose: bench/results/current.json lists, per table, the CSVs
it is drawn from, newest first, each with optional row filters (`where`: column -> allowed values,
e.g. the build of an A/B run). A manifest rather than "the newest CSV of each suite", because most
CSVs are partial: a run of one `--filter`, or two builds timed in turn (`build`/`round` columns),
so the newest file of a suite would drop every row it does not repeat, or mix the build before a
change with the one after. Here a case (kernel, dtype, shape, threads, unless the table says
otherwise) is taken from the first source that has a kbit row for it, and its peers (bitsandbytes,
the no-work loop, OpenBLAS, oneDNN) from that same source, so a partial re-recording supersedes
exactly the cases it repeats. To record new numbers: add the CSV to bench/results/, put it first in
its table's sources (with a `where` if it holds more than one build), and run this script.

Where a source holds a case more than once (rounds, runs, builds kept by the filter), the row with
the median % of its limit is shown (the lower of the two middle ones, as bench/best_of.py --median
picks), its GB/s and limit with it, and the range of % over the repeats (or best_of.py's
pct_of_limit_min/max columns). A % above 100 is flagged, as kbit_bench flags it: such a limit is
wrong, not the kernel fast.

Standard library only. Run from anywhere; paths are relative to this file.
"""
import argparse
import csv
import difflib
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(HERE, "results")
MANIFEST = os.path.join(RESULTS_DIR, "current.json")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
BEGIN = "<!-- BEGIN GENERATED TABLES (bench/results_tables.py; do not edit) -->"
END = "<!-- END GENERATED TABLES -->"
ABOVE_FLAG = "ABOVE ITS LIMIT: the limit is wrong"

DTYPE_ORDER = ["fp32", "fp16", "bf16", "int8"]
# Peer classes, in column order, with the column heading each gets.
PEER_HEADINGS = {
    "bitsandbytes": "bitsandbytes, same run",
    "no work": "no work (same traffic), same run",
    "OpenBLAS": "OpenBLAS SGEMM, same run",
    "oneDNN": "oneDNN, same run",
}


class DataError(Exception):
    pass


# --- reading the CSVs ---------------------------------------------------------------------------

def read_csv(name):
    """Rows of one CSV as dicts. kbit_bench's output has quirks this absorbs: `gops,...` lines (the
    GOP/s of prefill/GEMM rows, shorter than a row; skipped: GOP/s is recomputed from ms), the header
    repeated where runs were concatenated (skipped; bench_convert.py's A/B files put the build in its
    first column), and notes holding a comma, which kbit_bench
    prints unquoted (the extra fields are joined back into the note)."""
    path = os.path.join(RESULTS_DIR, name)
    if not os.path.exists(path):
        raise DataError(f"{name}: listed in current.json but not in bench/results/")
    with open(path, newline="") as f:
        raw = [r for r in csv.reader(f) if r]
    header, rows = raw[0], []
    for lineno, r in enumerate(raw[1:], start=2):
        if r[-4:] == header[-4:] or "gops" in r[:3]:
            continue  # a header repeated (with another first column, too), or a gops line
        if len(r) > len(header) and "note" in header:
            i, extra = header.index("note"), len(r) - len(header)
            r = r[:i] + [",".join(r[i:i + extra + 1])] + r[i + extra + 1:]
        if len(r) != len(header):
            raise DataError(f"{name}:{lineno}: {len(r)} fields where the header has {len(header)}")
        rows.append(dict(zip(header, r)))
    return rows


def matches(row, where):
    return all(row.get(col) in allowed for col, allowed in (where or {}).items())


def clean_note(note):
    return note.replace(ABOVE_FLAG, "").strip().strip(";").strip()


def peer_class(row):
    """None for kbit's own row, else the peer's class (a column of the table)."""
    note, kernel = clean_note(row.get("note", "")), row.get("kernel", "")
    if note.startswith("no work"):
        return "no work"
    if "bitsandbytes" in note:
        return "bitsandbytes"
    if kernel == "sgemm" or "OpenBLAS" in note:
        return "OpenBLAS"
    if "oneDNN" in note:
        return "oneDNN"
    return None


def peer_detail(row):
    """What a peer cell says besides its numbers: the qualifiers the note carries."""
    note = clean_note(row.get("note", ""))
    out = []
    if "approximate" in note:
        out.append("approximate")
    core = re.search(r"\(core (\w+)\)", note)
    if core:
        out.append(f"core {core.group(1)}")
    if "activations to bf16" in note:
        out.append("activations rounded to bf16")
    if "amx" in note.lower():
        out.append("AMX")
    return ", ".join(out)


def fnum(row, col):
    try:
        return float(row[col])
    except (KeyError, ValueError):
        raise DataError(f"no number in column {col!r} of row {row}")


def median_row(rows, key):
    ranked = sorted(rows, key=key)
    return ranked[(len(ranked) - 1) // 2]


def pct_range(rows):
    lo = min(float(r.get("pct_of_limit_min") or r["pct_of_limit"]) for r in rows)
    hi = max(float(r.get("pct_of_limit_max") or r["pct_of_limit"]) for r in rows)
    return lo, hi


def shape_rank(shape):
    """4096x4096 < 4096x14336 < 14336x4096 < 64M: by element count, then by the first dimension."""
    if shape.endswith("M") and shape[:-1].isdigit():
        return (int(shape[:-1]) << 20, 0)
    dims = [int(d) for d in shape.split("x") if d.isdigit()]
    return (math.prod(dims), dims[0]) if dims else (0, 0)


def date_of(name):
    m = re.match(r"(\d{4}-\d{2}-\d{2})-", name)
    if not m:
        raise DataError(f"{name}: a raw CSV's name starts with its date (YYYY-MM-DD-)")
    return m.group(1)


# --- choosing the current rows ------------------------------------------------------------------

def gather(table):
    """{case: (source, [kbit rows], {peer class: [rows]})}, each case from the first source with it."""
    case_cols = table.get("case", ["kernel", "dtype", "shape", "threads"])
    kernels = table.get("kernels")
    chosen = {}
    for src in table["sources"]:
        rows = [r for r in read_csv(src["csv"])
                if matches(r, table.get("where")) and matches(r, src.get("where"))
                and (kernels is None or r.get("kernel") in kernels)]
        if not rows:
            raise DataError(f"{table['title']}: no row of {src['csv']} passes its filters")
        found = {}
        for r in rows:
            case = tuple(r[c] for c in case_cols)
            kb, peers = found.setdefault(case, ([], {}))
            cls = peer_class(r)
            if cls is None:
                kb.append(r)
            else:
                peers.setdefault(cls, []).append(r)
        used = False
        for case, (kb, peers) in found.items():
            if kb and case not in chosen:
                chosen[case] = (src, kb, peers)
                used = True
        if not used:
            raise DataError(f"{table['title']}: {src['csv']} adds no case (every one is in a newer "
                            "source); drop it from current.json")
    return chosen


def order_key(table, kb_row):
    kernels = table.get("kernels") or []
    k = kb_row.get("kernel", "")
    d = kb_row.get("dtype", "")
    return (kernels.index(k) if k in kernels else len(kernels), k,
            DTYPE_ORDER.index(d) if d in DTYPE_ORDER else len(DTYPE_ORDER), d,
            shape_rank(kb_row.get("shape", "")), int(kb_row.get("threads") or 0))


# --- formatting ---------------------------------------------------------------------------------

def pct_cell(rows, chosen):
    pct = fnum(chosen, "pct_of_limit")
    lo, hi = pct_range(rows)
    text = f"{pct:.1f}"
    if len(rows) > 1 or chosen.get("pct_of_limit_min"):
        text += f" [{lo:.1f}-{hi:.1f}]"
    if pct > 100.0 or ABOVE_FLAG in chosen.get("note", ""):
        text += " **above its limit: the limit is wrong**"
    elif hi > 100.0:
        text += " (a run above its limit)"
    return text


def run_cell(src):
    return f"[{date_of(src['csv'])}](results/{src['csv']})"


def table_lines(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def bandwidth_table(table, chosen):
    classes = [c for c in PEER_HEADINGS if any(c in peers for _, _, peers in chosen.values())]
    header = ["kernel", "dtype", "shape", "threads", "GB/s", "limit GB/s (bound)", "% of limit [range]"]
    header += [PEER_HEADINGS[c] + ": GB/s, %" for c in classes] + ["run"]
    body = []
    for src, kb, peers in chosen.values():
        row = median_row(kb, lambda r: fnum(r, "pct_of_limit"))
        cells = [f"`{row['kernel']}`", row["dtype"], row["shape"], row["threads"], f"{fnum(row, 'gbs'):.1f}",
                 f"{fnum(row, 'limit_gbs'):.1f} ({row['bound']})", pct_cell(kb, row)]
        for c in classes:
            if c not in peers:
                cells.append("-")
                continue
            p = median_row(peers[c], lambda r: fnum(r, "pct_of_limit"))
            detail = peer_detail(p)
            cells.append(f"{fnum(p, 'gbs'):.1f}, {pct_cell(peers[c], p)}" + (f" ({detail})" if detail else ""))
        cells.append(run_cell(src))
        body.append((order_key(table, row), cells))
    return table_lines(header, [c for _, c in sorted(body, key=lambda x: x[0])])


def gops_of(row):
    dims = [int(d) for d in row["shape"].split("x")]
    return 2.0 * math.prod(dims) / (fnum(row, "ms") * 1e-3) / 1e9


def gops_table(table, chosen):
    classes = [c for c in PEER_HEADINGS if any(c in peers for _, _, peers in chosen.values())]
    header = ["kernel", "dtype", "shape (tokens x in x out)", "threads", "ms", "GOP/s"]
    header += [PEER_HEADINGS[c] + ": GOP/s (kbit / it)" for c in classes] + ["run"]
    body = []
    for src, kb, peers in chosen.values():
        row = median_row(kb, gops_of)
        g = gops_of(row)
        lo, hi = min(map(gops_of, kb)), max(map(gops_of, kb))
        name = clean_note(row.get("note", "")) or row["kernel"]
        cells = [f"`{row['kernel']}` ({name})" if name != row["kernel"] else f"`{name}`", row["dtype"],
                 row["shape"], row["threads"], f"{fnum(row, 'ms'):.1f}",
                 f"{g:.1f}" + (f" [{lo:.1f}-{hi:.1f}]" if len(kb) > 1 else "")]
        for c in classes:
            if c not in peers:
                cells.append("-")
                continue
            p = median_row(peers[c], gops_of)
            detail = peer_detail(p)
            cells.append(f"{gops_of(p):.1f} ({g / gops_of(p):.2f}x)" + (f", {detail}" if detail else ""))
        cells.append(run_cell(src))
        body.append((order_key(table, row), cells))
    return table_lines(header, [c for _, c in sorted(body, key=lambda x: x[0])])


def span(values, fmt):
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def convert_table(table):
    """One row per thread count, from the first source that has it; bitsandbytes' time (and the
    ratio bench_convert.py recorded) only where its row ran at the same thread count."""
    header = ["command", "threads", "seconds [range]", "GB/s", "limit s", "% of limit [range]",
              "user / system s", "bitsandbytes quantize_4bit s, same run", "kbit x bitsandbytes", "run"]
    body, done = [], set()
    for src in table["sources"]:
        rows = [r for r in read_csv(src["csv"]) if matches(r, src.get("where"))]
        kbit = [r for r in rows if r["what"].startswith("kbit")]
        bnb = [r for r in rows if "bitsandbytes" in r["what"]]
        todo = sorted({r["threads"] for r in kbit} - done, key=int)
        if not todo:
            raise DataError(f"{table['title']}: {src['csv']} adds no row (check its filters)")
        for threads in todo:
            done.add(threads)
            kb = [r for r in kbit if r["threads"] == threads]
            row = median_row(kb, lambda r: fnum(r, "pct_of_limit"))
            secs = [fnum(r, "seconds") for r in kb]
            peer = [fnum(r, "seconds") for r in bnb if r["threads"] == threads]
            ratios = [fnum(r, "ratio_to_bitsandbytes") for r in kb if r.get("ratio_to_bitsandbytes")]
            body.append([f"`{row['what']}`", threads, f"{fnum(row, 'seconds'):.3f} [{min(secs):.3f}-{max(secs):.3f}]",
                         f"{fnum(row, 'gbs'):.2f}", f"{fnum(row, 'limit_seconds'):.3f}", pct_cell(kb, row),
                         f"{fnum(row, 'user_s'):.3f} / {fnum(row, 'sys_s'):.3f}",
                         span(peer, "{:.1f}") if peer else "-",
                         span(ratios, "{:.0f}") + "x" if peer and ratios else "-", run_cell(src)])
    return table_lines(header, body)


def uarch_table(table):
    header = ["instruction", "what", "cycles per instruction [range]", "cycles per lane", "runs", "run"]
    body = []
    for src in table["sources"]:
        groups = {}
        for r in read_csv(src["csv"]):
            if matches(r, src.get("where")):
                groups.setdefault((r["instruction"], r["note"]), []).append(r)
        for (instr, note), rows in groups.items():
            row = median_row(rows, lambda r: fnum(r, "cycles_per_instruction"))
            cyc = [fnum(r, "cycles_per_instruction") for r in rows]
            body.append([f"`{instr}`", note or "-",
                         f"{fnum(row, 'cycles_per_instruction'):.2f} [{min(cyc):.2f}-{max(cyc):.2f}]",
                         f"{fnum(row, 'cycles_per_lane'):.3f}", str(len(rows)), run_cell(src)])
    return table_lines(header, body)


def insn_table(table):
    """Instructions per element (bench/insn_per_element.py): a row per kernel, a column per
    architecture and level, in the order the sources first give them."""
    cols, kernels, cells = [], {}, {}
    for src in table["sources"]:
        for r in read_csv(src["csv"]):
            if not matches(r, src.get("where")):
                continue
            col = (r["arch"], r["level"], r["vector_bits"], r["qemu_cpu"])
            if col not in cols:
                cols.append(col)
            kernels.setdefault(r["kernel"], r["element"])
            cells.setdefault((r["kernel"], col), fnum(r, "instructions_per_element"))
    arch_names = {"x86_64": "x86-64", "aarch64": "AArch64"}

    def heading(col):
        arch, level, bits, cpu = col
        width = "scalar" if bits == "0" else f"{bits}-bit"
        return f"{arch_names.get(arch, arch)} {level} ({width}, qemu {cpu})"

    header = ["kernel", "per"] + [heading(c) for c in cols]
    body = [[f"`{k}`", element] + [f"{cells[(k, c)]:.2f}" if (k, c) in cells else "-" for c in cols]
            for k, element in kernels.items()]
    return table_lines(header, body)


def pct_text(row):
    pct = fnum(row, "pct_of_limit")
    flag = " (above)" if pct > 100.0 or ABOVE_FLAG in row.get("note", "") else ""
    return f"{pct:.0f}%{flag}"


def gather_cases(table, case_of):
    """The rows of a table's sources grouped by case and implementation: case_of(row) gives
    (case, impl) or None for a row the table does not show. Each case from the first source that has
    it; a source that adds no case is an error. Returns ({case: (source, {impl: [rows]})}, cases in
    the order found)."""
    cases, order = {}, []
    for src in table["sources"]:
        added = False
        for r in read_csv(src["csv"]):
            if not matches(r, src.get("where")):
                continue
            found = case_of(r)
            if found is None:
                continue
            case, impl = found
            if case in cases and cases[case][0] is not src:
                continue
            if case not in cases:
                cases[case] = (src, {})
                order.append(case)
                added = True
            cases[case][1].setdefault(impl, []).append(r)
        if not added:
            raise DataError(f"{table['title']}: {src['csv']} adds no case; drop it from current.json")
    return cases, order


def impl_cells(by_impl, impls):
    """One cell per implementation (ms, GB/s, % of its limit of the median-% repeat, or "-"), and the
    median rows by implementation."""
    cells, medians = [], {}
    for impl in impls:
        rows = by_impl.get(impl)
        if not rows:
            cells.append("-")
            continue
        row = medians[impl] = median_row(rows, lambda r: fnum(r, "pct_of_limit"))
        cells.append(f"{fnum(row, 'ms'):.3f}, {fnum(row, 'gbs'):.1f}, {pct_text(row)}")
    return cells, medians


def engine_table(table):
    """kbit_bench --suite engine: a row per (shape, M, threads), a column per implementation (the
    kernel column is IMPL_M<M>: kbit_nf4_naive, kbit_nf4_gemm, ggml_<type>_repack / _plain, and
    read_nf4, the no-work read), each cell its ms, GB/s and % of its own limit; the limit column is
    kbit's (ggml's differs only in the read probe's stream count). Each case from the first source
    that has it; where a source holds a case more than once, the median-% repeat."""
    impls = table["impls"]

    def case_of(r):
        m = re.match(r"^(.*)_M(\d+)$", r["kernel"])
        if not m or m.group(1) not in impls:
            return None
        return (r["shape"], int(m.group(2)), int(r["threads"])), m.group(1)

    cases, order = gather_cases(table, case_of)
    header = ["shape (out x in)", "M", "threads", "limit GB/s (bound)"]
    header += [f"{impls[i]}: ms, GB/s, %" for i in impls] + ["run"]
    body = []
    for case in sorted(order, key=lambda c: (shape_rank(c[0]), c[1], c[2])):
        src, by_impl = cases[case]
        cells, medians = impl_cells(by_impl, impls)
        limit_row = next((medians[i] for i in impls if i.startswith("kbit") and i in medians),
                         next(iter(medians.values())))
        body.append([case[0], str(case[1]), str(case[2]),
                     f"{fnum(limit_row, 'limit_gbs'):.1f} ({limit_row['bound']})"] + cells + [run_cell(src)])
    return table_lines(header, body)


def moe_table(table):
    """kbit_bench --suite moe: a row per (shape, tokens, threads, dtype), a column per implementation
    (the kernel column: moe_grouped_nf4, moe_loop_nf4, moe_ggml_<type>_repack), each cell its ms,
    GB/s of the touched experts' traffic and % of its own limit. The shape column's _T<n> suffix is
    the token count."""
    impls = table["impls"]

    def case_of(r):
        if r["kernel"] not in impls:
            return None
        m = re.match(r"^(.*)_T(\d+)$", r["shape"])
        if not m:
            raise DataError(f"moe shape {r['shape']!r} lacks its _T<tokens>")
        return (m.group(1), int(m.group(2)), int(r["threads"]), r["dtype"]), r["kernel"]

    cases, order = gather_cases(table, case_of)
    shapes = []
    for c in order:
        if c[0] not in shapes:
            shapes.append(c[0])
    header = ["experts (shape)", "tokens", "threads", "dtype"]
    header += [f"{impls[i]}: ms, GB/s, %" for i in impls] + ["run"]
    body = []
    dtypes = {d: i for i, d in enumerate(DTYPE_ORDER)}
    for case in sorted(order, key=lambda c: (shapes.index(c[0]), c[1], c[2], dtypes.get(c[3], 99))):
        src, by_impl = cases[case]
        cells, _ = impl_cells(by_impl, impls)
        body.append([case[0], str(case[1]), str(case[2]), case[3]] + cells + [run_cell(src)])
    return table_lines(header, body)


def source_line(src):
    return f"[{src['csv']}](results/{src['csv']}): {src.get('about', '')}".rstrip(": ")


def render(manifest):
    machines = manifest["machines"]
    out = [BEGIN, "", "## Current results", "",
           "Generated by `bench/results_tables.py` from the raw CSVs in [results/](results/), the rows",
           "[results/current.json](results/current.json) names as current: edit those, not this region",
           "([how to read the tables](#how-to-read-the-tables)). **% of limit**: the median repeat, the",
           "range over the repeats in brackets; a share above 100% is flagged (there the limit is wrong,",
           "not the kernel fast). **Peers**: rows of the same source, timed in the same runs. **run**: the",
           "raw CSV's date, linked.", "", "Machines:", ""]
    out += [f"- {m['name']}: {m['about']}." for m in machines.values()]
    out += [""]
    for table in manifest["tables"]:
        kind = table.get("kind", "bandwidth")
        out += [f"### {table['title']}", ""]
        if table.get("machine") not in machines:
            raise DataError(f"{table['title']}: machine {table.get('machine')!r} is not in current.json's machines")
        about = f" {table['about']}" if table.get("about") else ""
        out += [f"Machine: {machines[table['machine']]['name']}.{about}", ""]
        if kind == "bandwidth":
            out += bandwidth_table(table, gather(table))
        elif kind == "gops":
            out += gops_table(table, gather(table))
        elif kind == "convert":
            out += convert_table(table)
        elif kind == "uarch":
            out += uarch_table(table)
        elif kind == "insn":
            out += insn_table(table)
        elif kind == "engine":
            out += engine_table(table)
        elif kind == "moe":
            out += moe_table(table)
        else:
            raise DataError(f"{table['title']}: unknown kind {kind!r}")
        out += [""]
        srcs = table["sources"]
        out += ["Sources, newest first: " + "; ".join(source_line(s) for s in srcs) + "."]
        plots = table.get("plots") or []
        for p in plots:
            if not os.path.exists(os.path.join(HERE, p["path"])):
                raise DataError(f"{table['title']}: chart {p['path']} does not exist")
        if plots:
            out += ["Roofline charts (each bar against the limit of its own run): "
                    + "; ".join(f"[{p['label']}]({p['path']})" for p in plots) + "."]
        out += [""]
    out += [END]
    return "\n".join(out)


def splice(text, region):
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < 0 or e < b:
        raise DataError(f"RESULTS.md lacks the marker lines {BEGIN!r} ... {END!r}")
    return text[:b] + region + text[e + len(END):]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if RESULTS.md differs from what would be written")
    ap.add_argument("--print", action="store_true", help="print the generated region only")
    args = ap.parse_args()
    try:
        with open(MANIFEST) as f:
            region = render(json.load(f))
        if args.print:
            sys.stdout.write(region + "\n")
            return 0
        with open(RESULTS_MD) as f:
            old = f.read()
        new = splice(old, region)
    except (DataError, ValueError) as e:  # ValueError: current.json is not JSON
        print(f"results_tables.py: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"results_tables.py: current.json or a CSV lacks the key {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "bench/RESULTS.md",
                                        "generated", lineterm="", n=1)
            print("bench/RESULTS.md's generated tables differ from the raw CSVs; run "
                  "python3 bench/results_tables.py and commit the result:", file=sys.stderr)
            for i, line in enumerate(diff):
                if i == 40:
                    print("...", file=sys.stderr)
                    break
                print(line, file=sys.stderr)
            return 1
        return 0
    if new != old:
        with open(RESULTS_MD, "w") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
