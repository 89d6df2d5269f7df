"""The reader of kbit's ABI lists (abi/*.def and the interface registry abi/interfaces.def), shared by
the Python package (kbit._abi, at import), scripts/abi_gen.py, which generates the ABI files from
the same data, and the export checker tests/abi/check_exports.py (installed as kbit-check-exports,
beside a copy of this file). Standard library only. The format is described in scripts/abi_gen.py."""
import re
from pathlib import Path

# The major of every list (the headers' KBIT_<LIST>_VERSION_MAJOR): a list's version nodes are
# KBIT_<LIST>_<MAJOR>.<minor>.
MAJOR = 1


def version_symbol(name):
    """The version function every exporter of list `name` exports (kbit_<name>_interface_version)."""
    return f"kbit_{name}_interface_version"

_INTERFACE = re.compile(r"^KBIT_INTERFACE\((\w+),\s*(\w+),\s*(\w+)\)\s*$")


def parse_interfaces(path):
    """[(name, NAME, ns)] of the interface registry abi/interfaces.def, in loader order."""
    entries = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("KBIT_INTERFACE("):
            m = _INTERFACE.match(line)
            if not m:
                raise ValueError(f"{path}: cannot parse: {line}")
            entries.append((m[1], m[2], m[3]))
    return entries


_ENTRY = re.compile(r"^KBIT_FN\((\d+),\s*(.+?),\s*(\w+),\s*\((.*?)\),\s*\((.*?)\),\s*\((.*)\)\)\s*$")
_FAMILY = re.compile(r"^/\*\*\s*@family\s+([a-z][a-z0-9_]*)\b\s*(.*?)\s*$")
# One attribute of an entry's variant list: key=word or key="text" (the text has no double quote).
_ATTR = re.compile(r'\s*([A-Za-z_]\w*)=("[^"]*"|[\w.]+)\s*(,|$)')


def _variant(path, name, text):
    """(attrs, note) of an entry's variant list `(key=value, ..., note="...")`; note is the one key
    that is not an attribute of the variant but a one-line remark for the header's table."""
    attrs = {}
    rest = text.strip()
    while rest:
        m = _ATTR.match(rest)
        if not m:
            raise ValueError(f"{path}: {name}: '{rest}' in the variant list is not key=value")
        if m[1] in attrs:
            raise ValueError(f"{path}: {name}: attribute {m[1]} given twice")
        attrs[m[1]] = m[2].strip('"')
        rest = rest[m.end():]
    note = attrs.pop("note", "")
    if "/*" in note or "*/" in note:
        raise ValueError(f"{path}: {name}: comment delimiter in the variant note")
    return attrs, note


def _parse(path):
    """(functions, families) of one list; see parse_def and families."""
    lines = Path(path).read_text().splitlines()
    fns, fams, by_id = [], [], {}
    current = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        if not line:
            continue
        m = _FAMILY.match(line)
        if m:
            fid, title = m[1], m[2]
            one_line = title.endswith("*/")
            if one_line:
                title = title[:-2].strip()
            doc = []
            while not one_line:
                if i >= len(lines):
                    raise ValueError(f"{path}: family {fid}: unterminated comment")
                text = lines[i].rstrip()
                i += 1
                if text.strip() == "*/":
                    break
                tm = re.match(r"^ \*(?: (.*))?$", text)
                if not tm:
                    raise ValueError(f"{path}: family {fid}: doc line must start with ' * ': {text!r}")
                body = tm[1] or ""
                if "/*" in body or "*/" in body:
                    raise ValueError(f"{path}: family {fid}: comment delimiter inside the doc text: {text!r}")
                doc.append(body)
            if fid in by_id:
                if doc or title:
                    raise ValueError(f"{path}: family {fid} is documented twice (continue it with "
                                     f"a one-line /** @family {fid} */)")
                current = by_id[fid]
            else:
                if not doc:
                    raise ValueError(f"{path}: family {fid} has no documentation")
                current = {"id": fid, "title": title, "doc": doc, "fns": []}
                by_id[fid] = current
                fams.append(current)
            continue
        if line.startswith("/*"):
            while "*/" not in line:
                if i >= len(lines):
                    raise ValueError(f"{path}: unterminated comment")
                line = lines[i]
                i += 1
            continue
        if not line.startswith("KBIT_FN("):
            raise ValueError(f"{path}: neither an entry nor a comment: {line}")
        m = _ENTRY.match(line)
        if not m:
            raise ValueError(f"{path}: cannot parse: {line}")
        params = []
        if m[4].strip() != "void":
            for p in m[4].split(","):
                p = p.strip()
                name = re.findall(r"[A-Za-z_]\w*", p)[-1]
                params.append((p[: p.rfind(name)].strip(), name))
        args = [a.strip() for a in m[5].split(",") if a.strip()]
        if args != [n for _, n in params]:
            raise ValueError(f"{path}: argument names of {m[3]} do not match its parameters")
        attrs, note = _variant(path, m[3], m[6])
        fn = {"minor": int(m[1]), "ret": m[2].strip(), "name": m[3], "params": params, "args": args,
              "params_text": m[4].strip(), "family": current["id"] if current else None,
              "family_doc": current["doc"] if current else None, "attrs": attrs, "note": note}
        fns.append(fn)
        if current is not None:
            current["fns"].append(fn)
    for fam in fams:
        if not fam["fns"]:
            raise ValueError(f"{path}: family {fam['id']} has no entries")
    return fns, fams


def parse_def(path):
    """Returns [{'minor', 'ret', 'name', 'params': [(type, name)], 'args': [...], 'params_text',
    'family' (id or None), 'family_doc' (lines or None), 'attrs': {key: value}, 'note'}] in list order."""
    return _parse(path)[0]


def families(path):
    """Returns [{'id', 'title', 'doc': [lines], 'fns': [entries as parse_def returns them]}] in order of
    first appearance; raises ValueError when an entry has no family."""
    fns, fams = _parse(path)
    orphans = [f["name"] for f in fns if f["family"] is None]
    if orphans:
        raise ValueError(f"{path}: entries before the first family block: {', '.join(orphans)}")
    return fams
