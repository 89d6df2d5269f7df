#!/usr/bin/env python3
"""Checks that the documentation still matches the repository (ctest docs.links).

    tests/docs/check_docs.py [REPO_ROOT]

Reads README.md, docs/*.md, abi/ABI.md and bench/*.md and reports, one line each:

- a relative Markdown link whose file or directory does not exist, or whose #anchor names no heading
  (GitHub's slug rules) and no <a id> / <a name> of the Markdown file it points into;
- a path in inline code or a code block that starts with a top-level directory of the repository
  (scripts/, src/, include/, tests/, abi/, bench/, docs/, examples/, python/) and names nothing;
  globs, braces, ellipses and placeholders such as <name> are not checked;
- a link or path that leaves the repository (an absolute link, a link resolving above the root,
  ../shared, /work/);
- a line-number citation (file.cpp:49, "line 120", #L12), except in docs/architecture.md and
  docs/adding-a-function.md;
- a document in docs/ that neither README.md nor docs/README.md links to.

Exit status 0 when there is nothing to report, 1 otherwise. Python 3 standard library only.
"""
import re
import sys
import unicodedata
from pathlib import Path

TOP_DIRS = ("scripts", "src", "include", "tests", "abi", "bench", "docs", "examples", "python")
LINE_NUMBER_EXEMPT = {"docs/architecture.md", "docs/adding-a-function.md"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*(?:#+[ \t]*)?$")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\))?[^()\s<>]*)>?"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_HREF = re.compile(r"<a\s[^>]*\bhref\s*=\s*\"([^\"]*)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
PATH_TOKEN = re.compile(r"(?<![\w./$~-])((?:%s)/[^\s`'\"()\[\]|,;]*)" % "|".join(TOP_DIRS))
FILE_LINE = re.compile(r"\b[\w.+-]+\.(?:c|h|cc|cpp|hpp|cu|cuh|inc|py|pyi|sh|md|txt|cmake|def|map|json|toml|in)"
                       r":\d+(?:[-–]\d+)?\b")
LINE_WORD = re.compile(r"\b[Ll]ines? \d+(?:\s*[-–]\s*\d+)?\b")
GITHUB_LINE = re.compile(r"#L\d+")
OUTSIDE = re.compile(r"\.\./shared\b|(?<![\w.])/work/")
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
BACKTICKS = re.compile(r"`+")
BLANK_LINE = re.compile(r"\n[ \t]*\n")


def doc_files(root):
    names = ["README.md", "abi/ABI.md"]
    names += sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md"))
    names += sorted(str(p.relative_to(root)) for p in (root / "bench").glob("*.md"))
    return [n for n in names if (root / n).is_file()]


def split_fences(text):
    """(prose, code): two strings as long as text, each with the other's characters blanked (newlines
    kept), so that offsets and line numbers stay those of the file."""
    prose, code = [], []
    fence = None
    for line in text.splitlines(keepends=True):
        m = FENCE.match(line)
        blank = re.sub(r"[^\n]", " ", line)
        if fence is None and m:
            fence = m.group(1)
            prose.append(blank)
            code.append(blank)
        elif fence is not None:
            stripped = line.strip()
            if m and stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                fence = None
                prose.append(blank)
                code.append(blank)
            else:
                prose.append(blank)
                code.append(line)
        else:
            prose.append(line)
            code.append(blank)
    return "".join(prose), "".join(code)


def code_spans(prose):
    """[(start, end)] of the contents of inline code spans in prose text (CommonMark: a run of n
    backticks up to the next run of exactly n; not across a blank line)."""
    spans = []
    i = 0
    while True:
        m = BACKTICKS.search(prose, i)
        if not m:
            return spans
        n = len(m.group(0))
        close = re.compile(r"(?<!`)`{%d}(?!`)" % n).search(prose, m.end())
        if close is None or BLANK_LINE.search(prose, m.end(), close.start()):
            i = m.end()
            continue
        spans.append((m.end(), close.start()))
        i = close.end()


def blank_spans(text, spans):
    chars = list(text)
    for start, end in spans:
        for k in range(max(0, start - 1), min(len(chars), end + 1)):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)


def heading_text(raw):
    """The text GitHub derives a heading's anchor from: inline markup removed."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.replace("`", "")
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis markers, not snake_case
    return text.strip()


def slug(text):
    """GitHub's heading anchor: lower case, letters, marks, numbers, '_' and '-' kept, spaces to '-',
    everything else dropped."""
    out = []
    for ch in text.lower():
        if ch == " ":
            out.append("-")
        elif ch in "-_" or ch.isalnum() or unicodedata.category(ch)[0] in "LMN":
            out.append(ch)
    return "".join(out)


_ANCHORS = {}  # path -> the anchors of that Markdown file


def anchors(path):
    """The #anchors GitHub gives a Markdown file: its headings' slugs (a repeated slug gets -1, -2, ...)
    and the ids and names of its <a> tags."""
    if path in _ANCHORS:
        return _ANCHORS[path]
    text = path.read_text(encoding="utf-8")
    prose, _ = split_fences(text)
    found, seen = set(), {}
    for line in prose.splitlines():
        m = ATX_HEADING.match(line)
        if not m:
            continue
        base = slug(heading_text(m.group(2)))
        if base in seen:
            seen[base] += 1
            found.add(f"{base}-{seen[base]}")
        else:
            seen[base] = 0
            found.add(base)
    found.update(HTML_ANCHOR.findall(prose))
    _ANCHORS[path] = found
    return found


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def check_link(root, doc, target, problems, where, linked):
    if not target or URL_SCHEME.match(target):
        return
    if target.startswith("/"):
        problems.append(f"{where}: link {target!r} is an absolute path (links must stay inside the repository)")
        return
    path_part, _, anchor = target.partition("#")
    if path_part:
        resolved = (doc.parent / path_part).resolve()
        try:
            resolved.relative_to(root)
        except ValueError:
            problems.append(f"{where}: link {target!r} points outside the repository")
            return
        if not resolved.exists():
            problems.append(f"{where}: link {target!r}: {resolved.relative_to(root)} does not exist")
            return
        linked.add(resolved)
    else:
        resolved = doc
    if anchor and resolved.is_file() and resolved.suffix == ".md":
        if anchor not in anchors(resolved):
            problems.append(f"{where}: link {target!r}: no heading or anchor #{anchor} in "
                            f"{resolved.relative_to(root)}")


def check_path_token(root, token, problems, where):
    token = token.split("#", 1)[0]
    token = token.rstrip(".:;,!?")
    if re.search(r"[*?\[\]{}<>…$]|\.\.\.", token):
        return  # a glob, a brace list, a placeholder or an ellipsis
    if "=" in token:
        return  # an assignment such as src/x=y is not a path
    names = [token]
    shorthand = re.fullmatch(r"(.*/[^/]+?)(\.\w+)((?:/\.\w+)+)", token)
    if shorthand:  # src/x/name.h/.cpp: both name.h and name.cpp
        names = [shorthand.group(1) + ext for ext in [shorthand.group(2)] + shorthand.group(3).split("/")[1:]]
    for name in names:
        if not (root / name).exists():
            problems.append(f"{where}: {name!r} names no file or directory of the repository")


def check(root):
    problems = []
    linked_from_index = set()  # files README.md and docs/README.md link to
    for name in doc_files(root):
        doc = root / name
        text = doc.read_text(encoding="utf-8")
        prose, code = split_fences(text)
        spans = code_spans(prose)
        plain = blank_spans(prose, spans)  # prose without inline code

        def where(offset):
            return f"{name}:{line_of(text, offset)}"

        linked = linked_from_index if name in ("README.md", "docs/README.md") else set()

        # Links (not inside code).
        for m in INLINE_LINK.finditer(plain):
            check_link(root, doc, m.group(2), problems, where(m.start()), linked)
        for m in REFERENCE_DEF.finditer(plain):
            check_link(root, doc, m.group(1), problems, where(m.start()), linked)
        for m in HTML_HREF.finditer(plain):
            check_link(root, doc, m.group(1), problems, where(m.start()), linked)

        # Paths in inline code and code blocks.
        for start, end in spans:
            for m in PATH_TOKEN.finditer(prose, start, end):
                check_path_token(root, m.group(1), problems, where(m.start()))
        for m in PATH_TOKEN.finditer(code):
            check_path_token(root, m.group(1), problems, where(m.start()))

        # Nothing that points outside the repository, anywhere in the file.
        for m in OUTSIDE.finditer(text):
            problems.append(f"{where(m.start())}: {m.group(0)!r} refers to a place outside the repository")

        # Line-number citations.
        if name not in LINE_NUMBER_EXEMPT:
            for m in FILE_LINE.finditer(text):
                problems.append(f"{where(m.start())}: line-number citation {m.group(0)!r} (name the function or section)")
            for m in LINE_WORD.finditer(plain):
                problems.append(f"{where(m.start())}: line-number citation {m.group(0)!r} (name the function or section)")
            for m in GITHUB_LINE.finditer(plain):
                problems.append(f"{where(m.start())}: line-number citation {m.group(0)!r} (name the function or section)")
    for doc in sorted((root / "docs").glob("*.md")):
        if doc.name != "README.md" and doc.resolve() not in linked_from_index:
            problems.append(f"docs/{doc.name}: not linked from README.md or docs/README.md")
    return problems


def main(argv):
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
    if not (root / "README.md").is_file():
        print(f"check_docs: {root} has no README.md", file=sys.stderr)
        return 2
    problems = check(root)
    for p in problems:
        print(p, flush=True)
    if problems:
        print(f"check_docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_docs: {len(doc_files(root))} files checked, no problem")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
