#!/usr/bin/env python3
"""Derives the ABI files and the public declarations from the function lists abi/kbit_<iface>.def
(the single source):

  abi/generated/kbit_<iface>.symbols  every exported symbol of the interface, one per line
  abi/generated/kbit_<iface>.map      GNU ld version-script node(s), one per interface minor
                                      (KBIT_4BIT_1.0 ...)
  include/kbit/kbit_loader_tables.h   the loader's per-interface function tables (public ABI)
  include/kbit/kbit_<iface>.h         the region between the lines
                                        /* BEGIN GENERATED DECLARATIONS (...) */
                                        /* END GENERATED DECLARATIONS */
                                      (the declarations and their documentation); the rest of the
                                      header (file comment, guards, version macros, constants,
                                      types, the kbit_<iface>_interface_version() declaration) is
                                      written by hand
  abi/generated/kbit_all.def          every backend interface (abi/interfaces.def) with its function
                                      list, for C/C++ X-macro users that walk all of them
  src/loader/generated/kbit_loader_functions.h   the loader's descriptor of every function of every
                                      backend interface (its table member, since-minor, result
                                      kind and name), and each interface's list of them
  src/loader/generated/kbit_<iface>_trampolines.cpp   libkbit.so's exports of a backend interface,
                                      each function spelled out, forwarding to the default backend
  src/common/generated/kbit_<iface>_exports.cpp   every exported function of a backend interface
                                      and of bnb_cpu, spelled out: its declaration and a call of its
                                      family's
                                      checked wrapper, kbit::exports::<family>("name", [variant,]
                                      arguments...) (kbit_export_<iface>.h); the variant is the C++
                                      value of the entry's fmt=, opt=, out= or feature= attribute
                                      (VARIANT_ARGUMENTS below)
  src/common/generated/kbit_bnb_cpu_host_exports.cpp   bnb_cpu for a device backend: every function
                                      spelled out, forwarding its arguments to the same function of
                                      the CPU backend (kbit::bnb_cpu_host::forward, kbit_bnb_cpu_host.h)

The loader API (abi/kbit_loader.def, exported only by libkbit.so) gets a .symbols and a .map file too;
it has no table, and its header include/kbit/kbit_loader.h is written by hand. The checkpoint library's
API (abi/kbit_io.def, exported only by libkbit_io.so) gets a .symbols and a .map file (with `local: *`,
as core's) and the generated declarations of include/kbit/kbit_io.h, but no table. The optional
bitsandbytes-CPU interface (abi/kbit_bnb_cpu.def, exported by libkbit_cpu.so and forwarded by
libkbit_cuda.so, beside the backend interfaces) gets .symbols, .map (without `local`: the backend's core
map has it), the declarations of include/kbit/kbit_bnb_cpu.h and, as a backend interface, its exported
functions, plus the forwarders of a device backend.

Format of a .def file (it is #included by C99 and C++ code with various KBIT_FN definitions, so
everything besides the entries is a C comment):

  KBIT_FN(since_minor, return_type, name, (parameters), (argument names), (variant))

  one entry per line, only ever appended. The variant is a parenthesized list of key=value items
  separated by commas, () when empty: the attributes that tell the entry from the others of its family
  (a value is a word, or text in double quotes without a double quote in it), and optionally
  note="..." for a one-line remark in the header's table. Keys in use: T (the element C type), dt (its
  dtype tag: fp32|fp16|bf16, uint8), fmt (fp4|nf4), opt (adam|ademamix|lion|momentum|rmsprop|adagrad),
  out (the igemmlt output stage), feature (the CPU feature a bnb_cpu query reports); any other key becomes a column of its own. C and C++ users of the
  lists take the variant as one macro argument and may ignore it.

  /** @family <id> [title]
   * <Doxygen text, written once for every entry of the family: what it does, formulas, shared
   *  @param / @return / @since lines>
   */

  A family block documents the entries that follow it, up to the next family block; every entry
  belongs to exactly one family. <id> is a stable snake_case identifier, unique over all lists: for a
  backend interface, the name of the family's checked wrapper kbit::exports::<id>; the optional title is a heading put above the family in the header.
  The text lines start with " * " (or are " *"), may not contain comment delimiters, and are copied
  into the header as they are, so keep them within 110 columns. The family's @since must name the smallest
  since_minor of its entries. A one-line block "/** @family <id> */" naming an earlier family
  continues that family (for an entry appended by a later minor). Other comments are ignored;
  any other non-blank line is an error.

In the header each family becomes: its heading (if titled), its doc block once, with a table of its variants
(function, element type, format / optimizer / other attributes, note) inserted before the first
@-command line, then each declaration `KBIT_API ret name(params);` (wrapped at 110 columns, the
parameters spelled as in the .def), preceded by a one-line doc comment naming the variant. A family
of one function without attributes has no table: its doc block documents the declaration directly.

Usage: abi_gen.py [--check]   (--check: exit 1 if a file differs from what would be written)
       abi_gen.py --loader DEF_DIR OUT_DIR   (the loader's generated files from the lists in DEF_DIR,
                                             for a test loader of a longer list: tests/loader)
The module is also imported by tests and the Python package (parse_def, INTERFACES); importing it
reads only the interface registry abi/interfaces.def.
"""
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The parser of the lists lives in the Python package, which reads them at import.
sys.path.insert(0, str(ROOT / "python" / "kbit"))
from _abidef import MAJOR, families, parse_def, parse_interfaces, version_symbol  # noqa: E402
ABI = ROOT / "abi"
GENERATED = ABI / "generated"
REGISTRY = parse_interfaces(ABI / "interfaces.def")
INTERFACES = tuple(name for name, _, _ in REGISTRY)  # the backend interfaces, in loader order
LOADER = "loader"  # the loader's own API, exported by libkbit.so only
IO = "io"  # the checkpoint library's API, exported by libkbit_io.so only (not a backend interface)
# bitsandbytes' CPU-library names, an optional interface exported by libkbit_cpu.so only: not in
# abi/interfaces.def (no loader table, no trampolines; vendors need not implement it).
BNB_CPU = "bnb_cpu"
ALL_LISTS = INTERFACES + (LOADER, IO, BNB_CPU)
# The lists whose header has a generated region of declarations (kbit_loader.h is written by hand).
HEADER_LISTS = INTERFACES + (IO, BNB_CPU)
INCLUDE = ROOT / "include" / "kbit"
TABLES_HEADER = INCLUDE / "kbit_loader_tables.h"
WIDTH = 110  # column limit of the generated declarations

# Column headings of the variant attributes; dt and T share the "element type" column.
_ATTR_HEADINGS = {"fmt": "format", "opt": "optimizer"}


def symbols(iface):
    return [version_symbol(iface)] + [f["name"] for f in parse_def(ABI / f"kbit_{iface}.def")]


def render_symbols(iface):
    return "\n".join(symbols(iface)) + "\n"


def render_map(iface):
    fns = parse_def(ABI / f"kbit_{iface}.def")
    tag = iface.upper()
    out = [f"/* Generated by scripts/abi_gen.py from abi/kbit_{iface}.def; do not edit. */"]
    prev = None
    for minor in sorted({0} | {f["minor"] for f in fns}):
        names = [f["name"] for f in fns if f["minor"] == minor]
        if minor == 0:
            names = [version_symbol(iface)] + names
        out.append(f"KBIT_{tag}_{MAJOR}.{minor} {{")
        out.append("  global:")
        out += [f"    {n};" for n in names]
        if iface in ("core", IO) and minor == 0:  # libkbit_io.so has no other version script
            out.append("  local:")
            out.append("    *;")
        out.append("}" + (f" KBIT_{tag}_{MAJOR}.{prev};" if prev is not None else ";"))
        prev = minor
    return "\n".join(out) + "\n"


def _c_function_pointer(fn):
    """`ret (*name)(params)` with the .def's own spelling of the parameters."""
    return f"{fn['ret']} (*{fn['name']})({fn['params_text']})"


def render_tables_header():
    out = [
        "/*",
        " * kbit_loader_tables.h — the loader's function tables, one struct per interface (included by",
        " * kbit_loader.h). Generated by scripts/abi_gen.py from abi/kbit_<iface>.def; do not edit.",
        " *",
        " * Each table starts with `size` (sizeof the table in the loader that filled it) and `version`",
        " * (the backend's interface version), then holds one member per function of the interface, in",
        " * list order, typed exactly like the function's declaration in kbit_<iface>.h. Tables only ever",
        " * grow at the end, so a member added by a later minor exists when KBIT_TABLE_HAS() says so.",
        " * No member is ever NULL: where the backend lacks a function the loader puts a stub that returns",
        " * KBIT_STATUS_NOT_IMPLEMENTED (NULL for pointer results) and names itself in the error message.",
        " */",
        "#ifndef KBIT_LOADER_TABLES_H",
        "#define KBIT_LOADER_TABLES_H",
        "",
        '#include "kbit.h"',
        "",
    ]
    for iface in INTERFACES:
        header = f"kbit_{iface}.h"
        out += [
            "/**",
            f" * Functions of the {iface} interface ({header}) as provided by one backend: filled by",
            f" * kbit_loader_{iface}_table(), valid until that backend is closed.",
            " */",
            f"typedef struct kbit_{iface}_table {{",
            f"    /** sizeof(kbit_{iface}_table) in the loader that filled the table; members that end beyond",
            "     *  it are absent (check with KBIT_TABLE_HAS()). */",
            "    size_t size;",
            f"    /** The backend's {iface} interface version, (MAJOR << 16) | MINOR; functions newer than",
            "     *  its minor are loader stubs. */",
            "    uint32_t version;",
        ]
        for fn in parse_def(ABI / f"kbit_{iface}.def"):
            out.append(f"    /** {fn['name']}() of {header} (since {iface} {MAJOR}.{fn['minor']}). */")
            out.append(f"    {_c_function_pointer(fn)};")
        out += [f"}} kbit_{iface}_table;", ""]
    out.append("#endif /* KBIT_LOADER_TABLES_H */")
    return "\n".join(out) + "\n"


# ---- backend exports: src/common/generated/kbit_<iface>_exports.cpp --------------------------------

# The attribute of an entry that selects its family wrapper's variant, and the C++ value each of its
# values stands for (the wrapper's first argument after the function's name). A family whose entries
# carry none of these keys has no variant argument.
VARIANT_ARGUMENTS = {
    "fmt": {"fp4": "kbit::QuantType::FP4", "nf4": "kbit::QuantType::NF4"},
    "opt": {"adam": "kbit::optim::Kind::Adam", "ademamix": "kbit::optim::Kind::AdEMAMix",
            "adagrad": "kbit::optim::Kind::Adagrad", "lion": "kbit::optim::Kind::Lion",
            "momentum": "kbit::optim::Kind::Momentum", "rmsprop": "kbit::optim::Kind::RMSprop"},
    "out": {"int32": "kbit::IgemmOutput::Int32", "int8": "kbit::IgemmOutput::Int8",
            "int8_rowscale": "kbit::IgemmOutput::Int8RowScale"},
    "feature": {"avx512f": "kbit::CpuFeature::Avx512F", "avx512bf16": "kbit::CpuFeature::Avx512Bf16"},
}
EXPORTS_DIR = ROOT / "src" / "common" / "generated"
LOADER_GENERATED_DIR = ROOT / "src" / "loader" / "generated"


def _wrap_call(head, items, tail, indent):
    """`head` + items joined by ", " + `tail`, continued on lines indented by `indent` + 4 spaces
    within WIDTH columns."""
    lines, cur = [], indent + head
    cont = indent + "    "
    for i, item in enumerate(items):
        tok = item + ("," if i < len(items) - 1 else tail)
        bare = cur.endswith(("(", "<")) or cur == cont
        if not bare and len(cur + " " + tok) > WIDTH:
            lines.append(cur)
            cur = cont + tok
        else:
            cur += ("" if bare else " ") + tok
    if not items:
        cur += tail
    lines.append(cur)
    return lines


def _variant_argument(iface, fn):
    for key, values in VARIANT_ARGUMENTS.items():
        if key in fn["attrs"]:
            value = fn["attrs"][key]
            if value not in values:
                raise ValueError(f"abi/kbit_{iface}.def: {fn['name']}: {key}={value} has no C++ value in "
                                 "scripts/abi_gen.py VARIANT_ARGUMENTS")
            return [values[value]]
    return []


def _definition_head(fn):
    """The declaration of `fn` as the head of its definition (`... name(params) {`)."""
    lines = _declaration(fn)
    lines[-1] = lines[-1][:-1] + " {"
    return lines


def render_backend_exports(iface):
    out = [
        f"// Generated by scripts/abi_gen.py from abi/kbit_{iface}.def; do not edit.",
        f"// The exported functions of the {iface} interface, compiled into every backend that implements it",
        "// (cmake/KbitBackend.cmake). Each passes its own name, the variant its entry names (if any) and its",
        f"// arguments to its family's checked wrapper in kbit_export_{iface}.h, which validates them and calls",
        f"// the backend's typed operation (kbit_ops_{iface}.h).",
        f'#include "kbit_export_{iface}.h"',
        "",
        'extern "C" {',
        "",
        f"KBIT_API uint32_t {version_symbol(iface)}(void) {{",
        f"    return KBIT_MAKE_VERSION(KBIT_{iface.upper()}_VERSION_MAJOR, KBIT_BACKEND_{iface.upper()}_MINOR);",
        "}",
    ]
    for fam in families(ABI / f"kbit_{iface}.def"):
        head = f"// ---- {fam['id']}: kbit::exports::{fam['id']}() "
        out += ["", head + "-" * max(4, WIDTH - len(head))]
        for fn in fam["fns"]:
            out.append("")
            args = [f'"{fn["name"]}"'] + _variant_argument(iface, fn) + fn["args"]
            # A backend that claims an older minor (KBIT_BACKEND_<IFACE>_MINOR) neither defines nor exports
            # the functions added after it; the loader gives its callers a stub that says so.
            if fn["minor"] > 0:
                out.append(f"#if KBIT_BACKEND_{iface.upper()}_MINOR >= {fn['minor']}")
            out += _definition_head(fn)
            out += _wrap_call(f"return kbit::exports::{fam['id']}(", args, ");", "    ")
            out.append("}")
            if fn["minor"] > 0:
                out.append("#endif")
    out += ["", '}  // extern "C"']
    return "\n".join(out) + "\n"


def render_bnb_cpu_host_exports():
    """bnb_cpu in a device backend: each function forwards to the CPU backend's (kbit_bnb_cpu_host.h)."""
    out = [
        f"// Generated by scripts/abi_gen.py from abi/kbit_{BNB_CPU}.def; do not edit.",
        "// bitsandbytes' CPU names in a device backend (libkbit_cuda.so), as bitsandbytes' GPU libraries export",
        "// them: each function forwards its arguments to the same function of the CPU backend, libkbit_cpu.so",
        "// (kbit_bnb_cpu_host.h).",
        '#include "kbit/kbit_bnb_cpu.h"',
        '#include "kbit_bnb_cpu_host.h"',
        "",
        'extern "C" {',
        "",
        f"KBIT_API uint32_t {version_symbol(BNB_CPU)}(void) {{",
        "    return KBIT_MAKE_VERSION(KBIT_BNB_CPU_VERSION_MAJOR, KBIT_BNB_CPU_VERSION_MINOR);",
        "}",
    ]
    for fn in parse_def(ABI / f"kbit_{BNB_CPU}.def"):
        out.append("")
        out += _definition_head(fn)
        out.append(f'    static kbit::bnb_cpu_host::CpuFunction function{{"{fn["name"]}"}};')
        out += _wrap_call(f"return kbit::bnb_cpu_host::forward<{fn['ret']}>(", ["function"] + fn["args"], ");",
                          "    ")
        out.append("}")
    out += ["", '}  // extern "C"']
    return "\n".join(out) + "\n"


# ---- the loader: src/loader/generated/kbit_<iface>_{functions.h,trampolines.cpp} -----------------

def _result_kind(ret):
    """How a result tells failure apart (kbit::loader::Result), from the return type's spelling."""
    r = ret.replace(" ", "")
    if r == "kbit_status":
        return "Status"
    if r == "constchar*":
        return "String"
    return "Pointer" if r.endswith("*") else "Value"


def render_loader_functions(lists, own_tables):
    """The loader's view of every backend interface: per interface its table, one descriptor per
    function and the list of them in table order. `lists` is [(name, NAME, ns, functions)]. The real
    loader's tables are the public ones (kbit_loader_tables.h, generated from the same lists); a test
    loader of a longer list (own_tables) gets structs of its own."""
    out = [
        "// Generated by scripts/abi_gen.py from abi/kbit_<iface>.def; do not edit.",
        "// Every backend interface inside the loader (loader_fns.h includes this file): its function table,",
        "// one descriptor per function (kbit::loader::functions::<name>: table member, since-minor, result",
        "// kind, name) and the list All of them in table order (namespace kbit::loader::<ns>).",
        "#pragma once",
    ]
    for iface, tag, ns, fns in lists:
        out += ["", f"// ---- {iface} " + "-" * (WIDTH - 9 - len(iface)), "", f"namespace kbit::loader::{ns} {{", ""]
        if own_tables:
            out += ["struct Table {", "    size_t size;", "    uint32_t version;"]
            for fn in fns:
                params = [p.strip() for p in fn["params_text"].split(",")]
                out += _wrap_call(f"{fn['ret']} (*{fn['name']})(", params, ");", "    ")
            out.append("};")
        else:
            out.append(f"using Table = kbit_{iface}_table;")
        out += ["", f"}}  // namespace kbit::loader::{ns}", "",
                f"template <> constexpr int kbit::loader::interface_of<kbit::loader::{ns}::Table> = KBIT_INTERFACE_{tag};",
                "", "namespace kbit::loader::functions {", ""]
        for fn in fns:
            out += _wrap_call(f"struct {fn['name']} : Descriptor<", [f"&{ns}::Table::{fn['name']}", str(fn["minor"]),
                              f"Result::{_result_kind(fn['ret'])}"], "> {", "")
            out += [f'    static constexpr const char* id = "{fn["name"]}";', "};"]
        out += ["", "}  // namespace kbit::loader::functions", "", f"namespace kbit::loader::{ns} {{", ""]
        out += _wrap_call("using All = List<", [f"functions::{fn['name']}" for fn in fns], ">;", "")
        out += ["", f"}}  // namespace kbit::loader::{ns}"]
    return "\n".join(out) + "\n"


def render_loader_trampolines(iface, ns, fns):
    """libkbit.so's exports of one backend interface: each function forwards to the default backend."""
    out = [
        f"// Generated by scripts/abi_gen.py from abi/kbit_{iface}.def; do not edit.",
        f"// libkbit.so's exports of the {iface} interface: the version this loader implements, and every",
        "// function, forwarded to the same function of the default backend (trampoline.h).",
        '#include "trampoline.h"',
        "",
        'extern "C" {',
        "",
        f"KBIT_API uint32_t {version_symbol(iface)}(void) {{",
        f"    return KBIT_MAKE_VERSION(kbit::loader::{ns}::kMajor, kbit::loader::{ns}::kMinor);",
        "}",
    ]
    for fn in fns:
        out.append("")
        out += _definition_head(fn)
        out += _wrap_call(f"return kbit::loader::forward<kbit::loader::functions::{fn['name']}>(", fn["args"],
                          ");", "    ")
        out.append("}")
    out += ["", '}  // extern "C"']
    return "\n".join(out) + "\n"


def loader_files(out_dir, def_dir=ABI):
    """(path, text) of the loader's generated files in out_dir, from the lists in def_dir (a test
    loader passes a directory with a longer list; a list it lacks comes from abi/)."""
    lists, files = [], []
    for name, tag, ns in REGISTRY:
        path = Path(def_dir) / f"kbit_{name}.def"
        fns = parse_def(path if path.exists() else ABI / f"kbit_{name}.def")
        lists.append((name, tag, ns, fns))
        files.append((Path(out_dir) / f"kbit_{name}_trampolines.cpp", render_loader_trampolines(name, ns, fns)))
    own_tables = Path(def_dir).resolve() != ABI.resolve()
    files.append((Path(out_dir) / "kbit_loader_functions.h", render_loader_functions(lists, own_tables)))
    return files


def render_all_def():
    out = [
        "/* Generated by scripts/abi_gen.py from abi/interfaces.def; do not edit.",
        " * Every backend interface with its function list, in loader order, for X-macro users that walk",
        " * all of them: define KBIT_INTERFACE_BEGIN(name, NAME, ns), KBIT_INTERFACE_END(name, NAME, ns)",
        " * and KBIT_FN(since_minor, ret, name, params, args, variant) (the entries of abi/kbit_<name>.def). */",
    ]
    for name, tag, ns in REGISTRY:
        out += [f"KBIT_INTERFACE_BEGIN({name}, {tag}, {ns})", f'#include "kbit_{name}.def"',
                f"KBIT_INTERFACE_END({name}, {tag}, {ns})"]
    return "\n".join(out) + "\n"


# ---- public headers: the generated declaration region ------------------------------------------

def begin_marker(iface):
    return (f"/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_{iface}.def; "
            "do not edit) */")


END_MARKER = "/* END GENERATED DECLARATIONS */"


def _columns(fam):
    """[(heading, cell function)] of the family's variant table, function name first."""
    fns = fam["fns"]
    cols = [("function", lambda f: f"{f['name']}()")]
    keys = []
    for f in fns:
        keys += [k for k in f["attrs"] if k not in keys]
    if "T" in keys or "dt" in keys:
        def element(f):
            t, dt = f["attrs"].get("T"), f["attrs"].get("dt")
            return f"{dt} ({t})" if t and dt else (t or dt or "")
        cols.append(("element type", element))
    for k in keys:
        if k not in ("T", "dt"):
            cols.append((_ATTR_HEADINGS.get(k, k), lambda f, k=k: f["attrs"].get(k, "")))
    if len({f["minor"] for f in fns}) > 1:
        cols.append(("since", lambda f: f"1.{f['minor']}"))
    if any(f["note"] for f in fns):
        cols.append(("note", lambda f: f["note"]))
    return cols


def _table(fam):
    cols = _columns(fam)
    rows = [[h for h, _ in cols]] + [[cell(f) for _, cell in cols] for f in fam["fns"]]
    widths = [max(len(r[c]) for r in rows) for c in range(len(cols))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return [line(rows[0]).rstrip(), rule] + [line(r).rstrip() for r in rows[1:]]


def _needs_table(fam):
    return len(fam["fns"]) > 1 or any(f["attrs"] or f["note"] for f in fam["fns"])


def _check_since(iface, fam):
    since = [ln for ln in fam["doc"] if ln.lstrip().startswith("@since")]
    want = f"@since {iface} {MAJOR}.{min(f['minor'] for f in fam['fns'])}"
    if [s.strip() for s in since] != [want]:
        raise ValueError(f"abi/kbit_{iface}.def: family {fam['id']} needs exactly one '{want}' line")


def _doc_block(iface, fam):
    doc = list(fam["doc"])
    if _needs_table(fam):
        at = next((i for i, ln in enumerate(doc) if ln.lstrip().startswith("@")), len(doc))
        table = ["Variants:", ""] + _table(fam)
        if at > 0 and doc[at - 1] != "":
            table = [""] + table
        doc[at:at] = table + ([""] if at < len(doc) else [])
    return ["/**"] + [(" * " + ln).rstrip() for ln in doc] + [" */"]


def _variant_comment(fam, fn):
    cols = _columns(fam)[1:]
    # The values of the usual attributes speak for themselves; other keys are named.
    known = ("element type",) + tuple(_ATTR_HEADINGS.values())
    parts = [cell(fn) if h in known else f"{h} = {cell(fn)}" for h, cell in cols if h != "note" and cell(fn)]
    text = fam["id"] + (": " + ", ".join(parts) if parts else "")
    if fn["note"]:
        text += f"; {fn['note']}"
    text += "."
    one = f"/** {text} */"
    if len(one) <= WIDTH:
        return [one]
    return ["/**"] + [" * " + ln for ln in textwrap.wrap(text, WIDTH - 3)] + [" */"]


def _declaration(fn):
    """`KBIT_API ret name(params);`, continued on lines indented by four spaces within WIDTH columns."""
    head = f"KBIT_API {fn['ret']} {fn['name']}("
    params = [p.strip() for p in fn["params_text"].split(",")]
    lines, cur = [], head
    for i, p in enumerate(params):
        tok = p + (");" if i == len(params) - 1 else ",")
        sep = "" if cur in (head, "    ") else " "
        if cur not in (head, "    ") and len(cur + sep + tok) > WIDTH:
            lines.append(cur)
            cur, sep = "    ", ""
        cur += sep + tok
    lines.append(cur)
    return lines


def _heading(fam):
    text = f"/* ---- {fam['title']} [{fam['id']}] "
    return text + "-" * max(4, 97 - len(text)) + " */"


def render_declarations(iface):
    """The generated region of include/kbit/kbit_<iface>.h, markers included."""
    out = [begin_marker(iface)]
    for fam in families(ABI / f"kbit_{iface}.def"):
        _check_since(iface, fam)
        out += ["", _heading(fam), ""] if fam["title"] else [""]
        out += _doc_block(iface, fam)
        for fn in fam["fns"]:
            if _needs_table(fam):
                out += _variant_comment(fam, fn)
            out += _declaration(fn)
    out += ["", END_MARKER]
    return out


def render_header(iface, text):
    """`text` (the header) with its generated region replaced."""
    lines = text.split("\n")
    begin = [i for i, ln in enumerate(lines) if ln.startswith("/* BEGIN GENERATED DECLARATIONS")]
    end = [i for i, ln in enumerate(lines) if ln == END_MARKER]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        raise ValueError(f"include/kbit/kbit_{iface}.h: needs one BEGIN/END GENERATED DECLARATIONS pair")
    return "\n".join(lines[: begin[0]] + render_declarations(iface) + lines[end[0] + 1:])


def _check_family_ids():
    seen = {}
    for iface in HEADER_LISTS:
        for fam in families(ABI / f"kbit_{iface}.def"):
            if fam["id"] in seen:
                raise ValueError(f"family id {fam['id']} used by {seen[fam['id']]} and {iface}")
            seen[fam["id"]] = iface


def generated_files():
    """(path, text) of every file this script owns (for a header: the whole header as it must be)."""
    _check_family_ids()
    files = []
    for iface in ALL_LISTS:
        files.append((GENERATED / f"kbit_{iface}.symbols", render_symbols(iface)))
        files.append((GENERATED / f"kbit_{iface}.map", render_map(iface)))
    files.append((TABLES_HEADER, render_tables_header()))
    for iface in HEADER_LISTS:
        header = INCLUDE / f"kbit_{iface}.h"
        files.append((header, render_header(iface, header.read_text())))
    files.append((GENERATED / "kbit_all.def", render_all_def()))
    for iface in INTERFACES + (BNB_CPU,):
        files.append((EXPORTS_DIR / f"kbit_{iface}_exports.cpp", render_backend_exports(iface)))
    files.append((EXPORTS_DIR / f"kbit_{BNB_CPU}_host_exports.cpp", render_bnb_cpu_host_exports()))
    files += loader_files(LOADER_GENERATED_DIR)
    return files


def main(argv):
    if argv[:1] == ["--loader"]:  # --loader DEF_DIR OUT_DIR: a test loader's sources (tests/loader)
        for path, text in loader_files(argv[2], argv[1]):
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        return 0
    check = "--check" in argv
    stale = []
    for path, text in generated_files():
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.relative_to(ROOT))
        elif not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("stale generated ABI files (run scripts/abi_gen.py):", *map(str, stale), sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
