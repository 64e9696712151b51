#!/usr/bin/env python3
"""Every figure in a documentation table names the result file it comes from.

scripts/lint runs this over README.md, bench/README.md and docs/*.md (or the files given).
A table row holds a figure when one of its cells has a measured number: a number with a
fraction (54.0, 0.87), a ratio (4.4×) or a unit of time, memory or share (ms, µs, us, ns,
MB, KB, GB, /s, % — not "N% of", a setting's proportion). Such a row passes when it, or the table's caption (the paragraph right above the
table, past blank lines, up to a blank line or heading; a table right under another shares
its caption), names a result file under bench/results/ that exists:
`bench/results/NAME` from the repository root, or `results/NAME` from bench/README.md's
folder. A default in a settings table (30, 64 MiB) is no figure; a measured one is.
Exit 1 listing each row that does not trace.
"""

import os
import re
import sys

from markdown_lint import report

FIGURE = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+(?![\d.])|×|\s?(?:ms|µs|us|ns|MB|KB|kB|GB|/s)(?![A-Za-z])"
    r"|%(?! of))"
)
RESULT = re.compile(r"((?:bench/)?results/[A-Za-z0-9_.+-]+)")
DEFAULT_FILES = ["README.md", "bench/README.md"]


def result_paths(text, doc_dir, root):
    """The result files `text` names that exist (paths relative to the root or the doc)."""
    found = []
    for name in RESULT.findall(text):
        name = name.rstrip(".,")
        for base in (root, os.path.join(root, doc_dir)):
            path = os.path.normpath(os.path.join(base, name))
            if path.startswith(os.path.join(root, "bench", "results") + os.sep) and os.path.isfile(path):
                found.append(path)
                break
    return found


def cells(row):
    """A table row's cells without the code spans (a flag like `--timeout 30` is no figure)."""
    row = re.sub(r"`[^`]*`", "", row)
    return [c.strip() for c in row.strip().strip("|").split("|")]


def check(path, root):
    problems = []
    rel = os.path.relpath(path, root)
    doc_dir = os.path.dirname(rel)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    previous_traces = False
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].startswith("|"):
            i += 1
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and lines[j].startswith("|"):  # a table right under another: one caption
            caption_traces = previous_traces
        else:
            caption = []
            while j >= 0 and lines[j].strip() and not lines[j].startswith(("#", "|")):
                caption.insert(0, lines[j])
                j -= 1
            caption_traces = bool(result_paths("\n".join(caption), doc_dir, root))
        previous_traces = caption_traces
        for n in range(start + 2, i):  # past the header and its separator
            row = lines[n]
            if not any(FIGURE.search(c) for c in cells(row)):
                continue
            if caption_traces or result_paths(row, doc_dir, root):
                continue
            figure = next(FIGURE.search(c).group(0) for c in cells(row) if FIGURE.search(c))
            problems.append(
                f"{rel}:{n + 1}: the figure '{figure}' names no result file "
                f"(bench/results/… in the row or the caption above the table)"
            )
    return problems


def main(argv):
    root = os.environ.get("GUESTFLOW_ROOT") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))
    )
    files = argv[1:]
    if not files:
        docs = os.path.join(root, "docs")
        files = [os.path.join(root, f) for f in DEFAULT_FILES] + sorted(
            os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md")
        )
    return report(files, root, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
