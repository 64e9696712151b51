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

bench/README.md's prose is held to more (PROSE_FILES): every figure with a unit in a
paragraph (µs/us, ms, s, ns, MB/KB/GB/MiB/KiB/GiB, %, ×/x, runs/s, req/s, /s; code spans,
tables and code blocks aside) must appear in a result file that the paragraph, or its section
(the heading above it and every paragraph up to the next heading), names: `results/NAME`, a
glob `results/2026-12-03-vm.*`, or a version replaced since with the commit that holds it,
`results/NAME@COMMIT` (read with git show). "Appears": one of the file's numbers, commas
aside, equals the figure at the figure's precision (0.287 reads 0.29; a figure written ~N
claims two significant digits, 227.7 reads ~230), in its unit or another of its family
(time: ×1,000; bytes: ×1,000 or ×1,024; 1,650 µs reads 1.65 ms; 0.29 reads 29%). A range
(12–17%) or a change (190 → 103 MB) is two figures. Needing no file of their own:
- derived: a ratio (×) or share (%), a sum or a difference of two traced figures with units
  of the same paragraph (a/b, or (a-b)/b as a share: 190 → 103 MB is 0.54×, 46% less), at
  the figure's precision;
- a figure in a sentence that says "not stored" (a run whose output was kept nowhere, said
  so to the reader);
- a target: a figure right after ≤, ≥, < or >, or right before "target".
Prefer citing the file to "not stored"; never a figure that is in neither.
Exit 1 listing each row or prose figure that does not trace.
"""

import glob
import os
import re
import subprocess
import sys

from markdown_lint import report

FIGURE = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+(?![\d.])|×|\s?(?:ms|µs|us|ns|MB|KB|kB|GB|/s)(?![A-Za-z])"
    r"|%(?! of))"
)
RESULT = re.compile(r"((?:bench/)?results/[A-Za-z0-9_.+-]+)")
DEFAULT_FILES = ["README.md", "bench/README.md"]
PROSE_FILES = {os.path.join("bench", "README.md")}
# A figure with a unit in prose: the number (a range's or a change's first end too: 12–17%,
# 190 → 103 MB), then the unit.
PROSE_FIGURE = re.compile(
    r"(?<![\w.,/-])(\d[\d,]*(?:\.\d+)?)(?:\s?[–→-]\s?(\d[\d,]*(?:\.\d+)?))?"
    r"\s?(µs|us|ms|ns|s|MB|KB|kB|GB|MiB|KiB|GiB|%|×|x|runs/s|req/s|/s)(?![\w/])"
)
RESULT_GLOB = re.compile(r"((?:bench/)?results/[A-Za-z0-9_.+*{},-]+(?:@[0-9a-f]{7,40})?)")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# The factors a figure may be away from the stored number: within a unit's family only.
_TIME = (1, 1000, 1 / 1000, 1000000, 1 / 1000000)
_BYTES = _TIME + (1024, 1 / 1024, 1 << 20, 1 / (1 << 20))
SCALES = {u: _TIME for u in ("ns", "µs", "us", "ms", "s")}
SCALES.update({u: _BYTES for u in ("KB", "kB", "MB", "GB", "KiB", "MiB", "GiB")})
SCALES["%"] = (1, 100)  # a share stored as a fraction (0.29) or a percentage
TARGET = re.compile(r"(?:≤|≥|<=|>=|<|(?<!-)>)[^,;:()]{0,6}$")  # "->" is an arrow
TARGET_AFTER = re.compile(r"\s*(?:target|goal)\b")


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


def named_results(text, doc_dir, root):
    """The result files `text` names, globs (`results/2026-12-03-vm.*`) expanded."""
    found = set()
    base_dir = os.path.join(root, "bench", "results") + os.sep
    for name in RESULT_GLOB.findall(text):
        name = name.rstrip(".,")
        if "@" in name:  # a version replaced since, read from git: results/NAME@COMMIT
            path, commit = name.split("@")
            path = os.path.normpath(os.path.join(doc_dir, path) if path.startswith("results/") else path)
            if path.startswith(os.path.join("bench", "results") + os.sep):
                found.add(f"{commit}:{path}")
            continue
        patterns = [name]
        brace = re.match(r"(.*)\{([^}]*)\}(.*)", name)
        if brace:
            patterns = [brace.group(1) + alt + brace.group(3) for alt in brace.group(2).split(",")]
        for pattern in patterns:
            for base in (root, os.path.join(root, doc_dir)):
                for path in glob.glob(os.path.normpath(os.path.join(base, pattern))):
                    if path.startswith(base_dir) and os.path.isfile(path):
                        found.add(path)
    return found


_numbers = {}
_root = "."


def file_numbers(path):
    """Every number in a result file, as floats (commas aside)."""
    if path not in _numbers:
        try:
            if ":" in path:  # COMMIT:bench/results/NAME
                text = subprocess.run(
                    ["git", "-C", _root, "show", path], capture_output=True, text=True, check=True
                ).stdout
            else:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
        except (OSError, subprocess.CalledProcessError):
            text = ""
        _numbers[path] = {float(n.replace(",", "")) for n in NUMBER.findall(text)}
    return _numbers[path]


def tolerance(figure, rough=False):
    """Half the figure's last digit: what rounding to it may have moved (0.29: 0.005). A "~"
    figure claims two significant digits only (~230: 5)."""
    places = len(figure.split(".")[1]) if "." in figure else 0
    digits = len(figure.split(".")[0].replace(",", ""))
    if rough and not places and digits > 2:
        return 0.5 * 10 ** (digits - 2)
    return 0.5 * 10**-places


def reads_as(value, figure, rough=False):
    """Whether `value` is `figure` at the figure's precision."""
    return abs(value - float(figure.replace(",", ""))) <= tolerance(figure, rough) + 1e-9


def traces(figure, numbers, rough=False, unit=None):
    if float(figure.replace(",", "")) == 0:
        return True  # 0 is no measurement to trace
    scales = SCALES.get(unit, (1,))
    return any(reads_as(n * scale, figure, rough) for n in numbers for scale in scales)


def derived(figure, unit, traced, rough=False):
    """A ratio, share, sum or difference of two traced figures of the paragraph."""
    for i, a in enumerate(traced):
        for j, b in enumerate(traced):
            if i == j:
                continue
            if unit in ("×", "x", "%") and b:
                candidates = [a / b] if unit != "%" else [100 * a / b, 100 * (a - b) / b]
            else:
                candidates = [a + b, a - b]
            if any(reads_as(abs(c), figure, rough) for c in candidates):
                return True
    return False


def paragraphs(lines):
    """(first line index, text, section key) of each prose paragraph; tables, code blocks and
    headings aside."""
    out = []
    fenced = False
    current = []
    start = 0
    section = 0
    for i, line in enumerate(lines + [""]):
        if line.startswith("```"):
            fenced = not fenced
            if current:
                out.append((start, current, section))
                current = []
            continue
        if fenced:
            continue
        if line.startswith("#"):
            if current:
                out.append((start, current, section))
                current = []
            section = i
            continue
        if not line.strip() or line.startswith("|"):
            if current:
                out.append((start, current, section))
                current = []
            continue
        if not current:
            start = i
        current.append(line)
    return [(s, "\n".join(c), sec) for s, c, sec in out]


def check_prose(lines, rel, doc_dir, root):
    global _root
    _root = root
    problems = []
    paras = paragraphs(lines)
    section_text = {}
    for _, text, section in paras:
        section_text.setdefault(section, [lines[section] if lines else ""]).append(text)
    for start, text, section in paras:
        files = named_results(text, doc_dir, root) | named_results(
            "\n".join(section_text[section]), doc_dir, root
        )
        numbers = set()
        for path in files:
            numbers |= file_numbers(path)
        plain = re.sub(r"`[^`]*`", "", text)
        sentences = re.split(r"(?<=[.;:!?])\s+(?=[A-Z(])", plain)
        pending = []
        traced = []  # the figures with a unit that trace: what a derived figure may use
        for sentence in sentences:
            unstored = "not stored" in sentence
            for m in PROSE_FIGURE.finditer(sentence):
                unit = m.group(3)
                if TARGET.search(sentence[: m.start()]) or TARGET_AFTER.match(sentence[m.end() :]):
                    continue  # a target (≤ 300 µs, ≥ 20×, the 20× target), no measurement
                rough = sentence[: m.start()].rstrip().endswith("~")
                for figure in filter(None, (m.group(1), m.group(2))):
                    if unstored or traces(figure, numbers, rough, unit):
                        traced.append(float(figure.replace(",", "")))
                    else:
                        pending.append((figure, unit, m.group(0), rough))
        for figure, unit, shown, rough in pending:
            if derived(figure, unit, traced, rough):
                continue
            where = ", ".join(sorted(os.path.basename(f) for f in files)) or "none"
            where = where.replace(":bench/results/", "@")
            shown = " ".join(shown.split())
            line = start + next(
                (k for k, l in enumerate(text.split("\n")) if shown.split()[0] in l), 0
            )
            problem = (
                f"{rel}:{line + 1}: the figure '{shown}' is in no result file the paragraph "
                f"or its section names (named: {where}); cite the file, or say 'not stored'"
            )
            if problem not in problems:
                problems.append(problem)
    return problems


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
    if rel in PROSE_FILES:
        problems += check_prose(lines, rel, doc_dir, root)
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
