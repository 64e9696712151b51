#!/usr/bin/env python3
"""Every figure in the documentation traces to the stored result it comes from.

scripts/lint runs this over README.md, bench/README.md and docs/*.md (or the files given).

Tables, every file: a row holds a figure when one of its cells has a measured number: a
number with a fraction (54.0, 0.87), a ratio (4.4×) or a unit of time, memory or share (ms,
µs, us, ns, MB, KB, GB, /s, % — not "N% of", a setting's proportion). Such a row passes when
it, or the table's caption (the paragraph right above the table, past blank lines, up to a
blank line or heading; a table right under another shares its caption), names a result file
under bench/results/ that exists: `bench/results/NAME` from the repository root, or
`results/NAME` from bench/README.md's folder. A default in a settings table (30, 64 MiB) is
no figure; a measured one is.

README.md and bench/README.md (STRONG_FILES) are held to more, in their tables and their
prose alike: every figure must be in a result file that names it where it says it is.
- Which figures: in prose, every number with a unit (µs/us, ms, s, ns, MB/KB/GB/MiB/KiB/GiB,
  %, ×/x, runs/s, req/s, /s; a range 12–17% or a change 190 → 103 MB is two); in a table row
  that holds a figure, every number of its cells but the first (the row's label). Code
  spans, code blocks and result-file names are no figures.
- Which files: those the paragraph or its section (the heading above it and every paragraph
  up to the next heading) names, or the row or its caption: `results/NAME`, a glob
  `results/2026-12-03-vm.*`, or a version replaced since with the commit that holds it,
  `results/NAME@COMMIT` (read with git show).
- Where in the file: where the figure's label is. The label is the words and numbers around
  the figure in its paragraph (LABEL_BEFORE before it, LABEL_AFTER after it), or for a table
  the row's first cell, the column's header and the words around it in its cell (STOP words
  and the figure itself aside). A stored number carries the label when its row shares a word
  with it — a table row, a JSON object's names and the keys above it, or on a line of text
  the words near the number and the line's first words, with the lines it is indented under —
  and its column, if it has one (a Markdown or aligned table's header, a JSON key, key=value),
  names a word of the label or the figure's unit (or the row shares ROW_ENOUGH words). A
  number that is in the files only under other labels does not trace: that is what catches
  a figure copied wrong (scripts/lint_figures_mutate.py measures how often).
- "Is": the stored number, commas aside, equals the figure at the figure's precision (0.287
  reads 0.29; a figure written ~N claims two significant digits, 227.7 reads ~230), in the
  figure's unit: a stored number whose unit is known (after it, or its column's) converts by
  exactly the factor between the two (1,650 µs reads 1.65 ms, never 1.65 s) and not across
  kinds (time, bytes, share, ratio); one whose unit is unknown may be any of the family's
  (time: ×1,000; bytes: ×1,000 or ×1,024); 0.29 reads 29%. A table cell's figure without a
  unit takes the one after it in "395 vs 47 ms" or "7.7 / 31.4 ms".
- Figures that did not trace when this rule came in are listed in KNOWN; each entry is a debt
  (fix the figure, delete the entry), and a listed figure that changes is checked again.
Needing no file of their own:
- derived: a ratio (×) or share (%), a sum or a difference of two traced figures of the same
  sentence (or table row) (a/b, or (a-b)/b as a share: 190 → 103 MB is 0.54×, 46% less), at
  the figure's precision;
- a figure in a sentence that says "not stored" (a run whose output was kept nowhere, said
  so to the reader);
- a target: a figure right after ≤, ≥, < or >, or right before "target".
Prefer citing the file to "not stored"; never a figure that is in neither.
Exit 1 listing each row or figure that does not trace.
"""

import bisect
import glob
import json
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
STRONG_FILES = {"README.md", os.path.join("bench", "README.md")}
# The figures that did not trace when the strong rule came in: each still to be fixed.
KNOWN = os.path.join("scripts", "lint_figures_known.txt")
# A figure with a unit in prose: the number (a range's or a change's first end too: 12–17%,
# 190 → 103 MB), then the unit.
PROSE_FIGURE = re.compile(
    r"(?<![\w.,/-])(\d[\d,]*(?:\.\d+)?)(?:\s?[–→-]\s?(\d[\d,]*(?:\.\d+)?))?"
    r"\s?(µs|us|ms|ns|s|MB|KB|kB|GB|MiB|KiB|GiB|%|×|x|runs/s|req/s|/s)(?![\w/])"
)
# A number in a table cell, with the unit right after it if it has one.
CELL_NUMBER = re.compile(
    r"(?<![\w.,/-])(\d[\d,]*(?:\.\d+)?)(?![\d,]*\.\d)(?:\s?(µs|us|ms|ns|s|MB|KB|kB|GB|MiB|KiB"
    r"|GiB|%|×|x)(?![\w/]))?(?![\w-])"
)
PAIRED = re.compile(r"^\s*(?:vs|/|against|→|–|-|to)\s*$")
RESULT_GLOB = re.compile(r"((?:bench/)?results/[A-Za-z0-9_.+*{},-]+(?:@[0-9a-f]{7,40})?)")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# The factors a figure may be away from the stored number: within a unit's family only.
_TIME = (1, 1000, 1 / 1000, 1000000, 1 / 1000000)
FAMILY_SCALES = {"time": _TIME, "bytes": _TIME + (1024, 1 / 1024, 1 << 20, 1 / (1 << 20))}
TARGET = re.compile(r"(?:≤|≥|<=|>=|<|(?<!-)>)[^,;:()]{0,6}$")  # "->" is an arrow
TARGET_AFTER = re.compile(r"\s*(?:target|goal)\b")
SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(])")
# The label: how many words and numbers around a figure name what it measures.
LABEL_BEFORE = 8
LABEL_AFTER = 4
ROW_ENOUGH = 2
STEM = 7
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d[\d,]*(?:\.\d+)?")
# Words that name no measurement: units, and the words every line of a result says.
SAME_WORD = {"1st": "first", "2nd": "second"}  # what result files abbreviate
UNITS = {"ms", "us", "ns", "mb", "kb", "gb", "kib", "mib", "gib", "b", "x"}
STOP = set(
    """a an and are as at be by each for from in into is it its of on or per than that the
    then this to vs was were with against over under one two all only not no
    ms us s ns mb kb gb kib mib gib b x k m run runs""".split()
)


def word_set(text, units=False):
    """The label words of `text`: lower case, a plural's s dropped, numbers without commas;
    units only if asked (a column's name: `CPU µs/run`)."""
    out = set()
    for w in WORD.findall(text.replace("µ", "u")):
        if w[0].isdigit():
            w = w.replace(",", "")
            out.add(w[:-2] if w.endswith(".0") else w)
            continue
        w = SAME_WORD.get(w.lower(), w.lower())
        if w in STOP and not (units and w in UNITS):
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w[:STEM])  # lifecycles, lifecyc: one word
    return out


def column_words(name):
    """A column's label words (its units too); None for a column whose name says nothing."""
    return word_set(name, units=True) or None


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


_named = {}


def named_results(text, doc_dir, root):
    """The result files `text` names, globs (`results/2026-12-03-vm.*`) expanded."""
    key = (text, doc_dir, root)
    if key not in _named:
        _named[key] = frozenset(find_results(text, doc_dir, root))
    return set(_named[key])


def find_results(text, doc_dir, root):
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


_records = {}
_root = "."


def read_result(path):
    """A result file's text: from the tree, or COMMIT:bench/results/NAME from git."""
    try:
        if ":" in path:
            return subprocess.run(
                ["git", "-C", _root, "show", path], capture_output=True, text=True, check=True
            ).stdout
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except (OSError, subprocess.CalledProcessError):
        return ""


def numbers_of(text):
    return {float(n.replace(",", "")) for n in NUMBER.findall(text)}


def indent(line):
    return len(line) - len(line.lstrip())


# A unit's size in its family's base: what a stored number must be multiplied by to read in
# another unit (1,650 us is 1.65 ms).
UNIT_SIZE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
UNIT_SIZE.update({"B": 1.0, "KB": 1e3, "kB": 1e3, "KiB": 1024.0, "MB": 1e6, "MiB": 2.0**20})
UNIT_SIZE.update({"GB": 1e9, "GiB": 2.0**30})
FAMILY = {u: "time" for u in ("ns", "us", "µs", "ms", "s")}
FAMILY.update({u: "bytes" for u in ("B", "KB", "kB", "KiB", "MB", "MiB", "GB", "GiB")})
STORED = re.compile(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:\s?(ns|us|µs|ms|s|B|KB|kB|KiB|MB|MiB|GB|GiB|%|×|x)(?![\w/]))?"
)
KEY_VALUE = re.compile(
    r"([A-Za-z][\w.]*)=(\d[\d,]*(?:\.\d+)?)(?:\s?(ns|us|µs|ms|s|B|KB|kB|KiB|MB|MiB|GB|GiB)(?![\w/]))?"
)
UNIT_WORD = re.compile(r"(?<![A-Za-z])(ns|us|µs|ms|B|KB|kB|KiB|MB|MiB|GB|GiB|bytes)(?![A-Za-z])")


def unit_in(text):
    """The unit a column header or a JSON key names (`CPU us/run`, `p50_ms`), if one."""
    m = UNIT_WORD.search(text.replace("_", " "))
    if not m:
        return None
    return "B" if m.group(1) == "bytes" else m.group(1)


def groups(line):
    """The (start, end, text) of a line's columns: runs of text apart by 2+ spaces."""
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]


def aligned_header(lines, i):
    """The column names above an aligned table's row, if the row is one: the nearest line
    above it, in its block and at its indentation, with no fraction and as many columns."""
    line = lines[i]
    if len(groups(line)) < 3:
        return None
    for j in range(i - 1, -1, -1):
        above = lines[j]
        if not above.strip() or indent(above) < indent(line):
            return None
        if indent(above) == indent(line) and not re.search(r"\d\.\d", above):
            return above if len(groups(above)) >= 3 else None
    return None


def text_records(text):
    """(row words, column words or None, value, unit) per number of a text result. The row:
    the line's words and the lines it is indented under; the column: for a Markdown table
    its header cell, for an aligned table the column name above the number."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not NUMBER.search(line):
            continue
        label = [line]
        level = indent(line)
        for j in range(i - 1, -1, -1):  # the lines it is indented under
            if level == 0 or not lines[j].strip():
                break
            if indent(lines[j]) < level:
                label.append(lines[j])
                level = indent(lines[j])
        row = word_set(" ".join(label))
        if line.startswith("|"):
            j = i
            while j > 0 and lines[j - 1].startswith("|"):
                j -= 1
            head = lines[j].strip().strip("|").split("|")
            for c, cell in enumerate(line.strip().strip("|").split("|")):
                name = head[c] if c < len(head) and j != i else ""
                for m in STORED.finditer(cell):
                    out.append((row, column_words(name), m.group(1), m.group(2) or unit_in(name)))
            continue
        head = aligned_header(lines, i)
        columns = groups(head) if head else []
        keyed = set()
        for m in KEY_VALUE.finditer(line):  # key=value: the key is the column
            keyed.add(m.start(2))
            out.append((row, column_words(m.group(1)), m.group(2), m.group(3) or unit_in(m.group(1))))
        for m in STORED.finditer(line):
            if m.start(1) in keyed:
                continue
            column, unit = None, m.group(2)
            here = row
            if not columns:  # a line of prose: the words near the number, the line's head
                near = WORD.findall(line[: m.start(1)])[-LABEL_BEFORE:] + WORD.findall(line[m.end() :])[:LABEL_AFTER]
                here = word_set(" ".join(near + WORD.findall(line)[:3] + label[1:]))
            if columns:
                name = min(columns, key=lambda g: min(abs(g[1] - m.end(1)), abs(g[0] - m.start(1))))[2]
                column, unit = column_words(name), unit or unit_in(name)
            out.append((here, column, m.group(1), unit))
    return [(r, c, float(v.replace(",", "")), u) for r, c, v, u in out]


def json_records(value, label=()):
    """(row words, column words, value, unit) per number of a JSON result: the column is its
    key, the row the keys above it and the names in its object (a point's path, concurrency,
    vertices)."""
    out = []
    if isinstance(value, dict):
        names = [f"{k} {v}" for k, v in value.items() if isinstance(v, (str, int)) and not isinstance(v, bool)]
        row = word_set(" ".join(label + tuple(names)))
        for key, item in value.items():
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                out.append((row, column_words(key.replace("_", " ")), float(item), unit_in(key)))
            elif isinstance(item, str):
                for m in STORED.finditer(item):
                    out.append((row | word_set(item), column_words(key.replace("_", " ")), float(m.group(1).replace(",", "")), m.group(2)))
            else:
                out += json_records(item, label + (key,))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                name = " ".join(label[-1:]).replace("_", " ")
                out.append((word_set(" ".join(label)), column_words(name), float(item), unit_in(name)))
            elif isinstance(item, (dict, list)):
                out += json_records(item, label)
    return out


def file_records(path):
    """A result file's records, cached."""
    if path not in _records:
        text = read_result(path)
        records = None
        if path.endswith(".json"):
            try:
                records = json_records(json.loads(text))
            except ValueError:
                records = None
        _records[path] = records if records is not None else text_records(text)
    return _records[path]


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


def derived(figure, unit, traced, rough=False):
    """A ratio, share, sum or difference of two traced figures of the same sentence."""
    for i, a in enumerate(traced):
        for j, b in enumerate(traced):
            if i == j:
                continue
            if unit in ("×", "x", "%", None) and b:
                candidates = [a / b] if unit != "%" else [100 * a / b, 100 * (a - b) / b]
                if unit is None:
                    candidates += [a + b, a - b]
            else:
                candidates = [a + b, a - b]
            if any(reads_as(abs(c), figure, rough) for c in candidates):
                return True
    return False


class Figure:
    """One figure of a document, where it is and what it must trace to."""

    def __init__(self, line, col, text, unit, rough, label, files, group, exempt, shown):
        self.line, self.col, self.text, self.unit, self.rough = line, col, text, unit, rough
        self.label, self.files, self.group, self.exempt, self.shown = label, files, group, exempt, shown


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


def blank_code(text):
    """`text` with its code spans and result-file names blanked, offsets kept."""
    text = re.sub(r"`[^`]*`", lambda m: "§" * len(m.group()), text)
    return RESULT_GLOB.sub(lambda m: "§" * len(m.group()), text)


def label_around(text, start, end):
    """The label words of a figure at text[start:end]: LABEL_BEFORE words and numbers before
    it and LABEL_AFTER after it."""
    before = WORD.findall(text[:start])[-LABEL_BEFORE:]
    after = WORD.findall(text[end:])[:LABEL_AFTER]
    return word_set(" ".join(before + after))


def position(start, text, offset):
    """The (line, column) of an offset into a paragraph that starts at line `start`."""
    head = text[:offset]
    return start + head.count("\n"), offset - (head.rfind("\n") + 1)


def prose_figures(lines, doc_dir, root):
    """Every prose figure of a document."""
    out = []
    paras = paragraphs(lines)
    section_text = {}
    for _, text, section in paras:
        section_text.setdefault(section, [lines[section] if lines else ""]).append(text)
    for start, text, section in paras:
        files = named_results(text, doc_dir, root) | named_results(
            "\n".join(section_text[section]), doc_dir, root
        )
        out += paragraph_figures(start, text, frozenset(files))
    return out


_paragraph_figures = {}


def paragraph_figures(start, text, files):
    """The figures of the paragraph `text` at line `start` whose files are `files`: cached,
    since they depend on nothing else (scripts/lint_figures_mutate.py lints a document once
    per figure, and each of its mutations changes one paragraph)."""
    key = (start, text, files)
    if key not in _paragraph_figures:
        _paragraph_figures[key] = find_paragraph_figures(start, text, files)
    return _paragraph_figures[key]


def find_paragraph_figures(start, text, files):
    out = []
    plain = blank_code(text)
    # The label reads code spans' words too (`pthread_cond_signal`), never a file's name.
    words = RESULT_GLOB.sub(lambda m: "§" * len(m.group()), text).replace("`", " ")
    cuts = [0] + [m.end() for m in SENTENCE_END.finditer(plain)] + [len(plain)]
    for k in range(len(cuts) - 1):
        s0, s1 = cuts[k], cuts[k + 1]
        sentence = plain[s0:s1]
        unstored = "not stored" in sentence
        for m in PROSE_FIGURE.finditer(sentence):
            unit = m.group(3)
            exempt = "not stored" if unstored else None
            if TARGET.search(sentence[: m.start()]) or TARGET_AFTER.match(sentence[m.end() :]):
                exempt = "target"  # a target (≤ 300 µs, ≥ 20×, the 20× target), no measurement
            rough = sentence[: m.start()].rstrip().endswith("~")
            for g in (1, 2):
                figure = m.group(g)
                if not figure:
                    continue
                a, b = m.start(g), m.end(g)
                label = label_around(words, s0 + a, s0 + b) - word_set(figure)
                line, col = position(start, text, s0 + a)
                shown = " ".join(m.group(0).split())
                out.append(
                    Figure(line, col, figure, unit, rough, label, files, ("p", start, k), exempt, shown)
                )
    return out


def cells(row):
    """A table row's cells without the code spans (a flag like `--timeout 30` is no figure)."""
    row = re.sub(r"`[^`]*`", "", row)
    return [c.strip() for c in row.strip().strip("|").split("|")]


def cell_spans(row):
    """(start, end) of each cell of a table row, in the row."""
    spans, start = [], None
    blank = blank_code(row)
    for i, ch in enumerate(blank):
        if ch == "|":
            if start is not None:
                spans.append((start, i))
            start = i + 1
    if start is not None and start < len(blank) and blank[start:].strip():
        spans.append((start, len(blank)))
    return spans


def tables(lines, doc_dir, root):
    """(first row, end, caption's files, caption traces) of each table."""
    out = []
    i = 0
    previous = (set(), False)
    fenced = False
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
        if fenced or not lines[i].startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].startswith("|"):
            i += 1
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and lines[j].startswith("|"):  # a table right under another: one caption
            files, caption_traces = previous
        else:
            caption = []
            while j >= 0 and lines[j].strip() and not lines[j].startswith(("#", "|")):
                caption.insert(0, lines[j])
                j -= 1
            text = "\n".join(caption)
            files = named_results(text, doc_dir, root)
            caption_traces = bool(result_paths(text, doc_dir, root))
        previous = (files, caption_traces)
        out.append((start, i, files, caption_traces))
    return out


def table_figures(lines, doc_dir, root):
    """Every figure of the tables' rows that hold one (numbers past the row's label)."""
    out = []
    for start, end, caption_files, _ in tables(lines, doc_dir, root):
        for n in range(start + 2, end):
            row = lines[n]
            if not any(FIGURE.search(c) for c in cells(row)):
                continue
            files = frozenset(caption_files | named_results(row, doc_dir, root))
            key = (n, row, lines[start], files)
            if key not in _row_figures:  # cached as paragraphs are (paragraph_figures)
                _row_figures[key] = find_row_figures(n, row, lines[start], files)
            out += _row_figures[key]
    return out


_row_figures = {}


def find_row_figures(n, row, header_row, files):
    out = []
    header = cell_spans(header_row)
    spans = cell_spans(row)
    if not spans:
        return out
    first = word_set(blank_code(row[spans[0][0] : spans[0][1]]))
    plain = blank_code(row)
    for c, (a, b) in enumerate(spans[1:], 1):
        head = header_row[header[c][0] : header[c][1]] if c < len(header) else ""
        cell = plain[a:b]
        found = list(CELL_NUMBER.finditer(cell))
        for k, m in enumerate(found):
            figure, unit = m.group(1), m.group(2)
            end = m.end()
            for nxt in found[k + 1 :]:  # "395 vs 47 ms", "7.7 / 31.4 ms": the unit after
                if unit or not PAIRED.match(cell[end : nxt.start()]):
                    break
                unit, end = nxt.group(2), nxt.end()
            rough = cell[: m.start()].rstrip().endswith("~")
            label = (first | word_set(head) | label_around(cell, m.start(1), m.end(1))) - word_set(
                figure
            )
            exempt = "target" if TARGET.search(cell[: m.start()]) else None
            shown = " ".join(m.group(0).split())
            out.append(Figure(n, a + m.start(1), figure, unit, rough, label, files, ("t", n), exempt, shown))
    return out


def scales(unit, stored_unit):
    """What a stored number may be multiplied by to read as a figure in `unit`: the one
    factor between two known units of a family; 1 when the stored number's unit is unknown
    (a share also 100: 0.29 reads 29%)."""
    if unit == "%":
        return (1, 100)
    if unit in FAMILY and stored_unit in FAMILY and FAMILY[unit] == FAMILY[stored_unit]:
        return (UNIT_SIZE[stored_unit] / UNIT_SIZE[unit],)
    if unit in FAMILY and stored_unit is None:  # unknown: any of the family's
        return FAMILY_SCALES[FAMILY[unit]]
    return (1,)


def reads(fig, value, stored_unit):
    if unit_clash(fig.unit, stored_unit):
        return False
    return any(reads_as(value * k, fig.text, fig.rough) for k in scales(fig.unit, stored_unit))


def unit_clash(unit, stored_unit):
    """A time figure is no byte count, share or ratio, and so on: known units of two kinds."""
    kind = lambda u: FAMILY.get(u) or {"%": "share", "×": "ratio", "x": "ratio"}.get(u)
    return kind(unit) is not None and kind(stored_unit) is not None and kind(unit) != kind(stored_unit)


_placed = {}


def on_labelled_line(fig):
    """Whether a figure is in its files where its label is: 'label', or 'elsewhere' when its
    number is in the files only under other labels, or None."""
    key = (fig.text, fig.unit, fig.rough, frozenset(fig.label), frozenset(fig.files))
    if key not in _placed:
        _placed[key] = placed(fig)
    return _placed[key]


def same_unit(unit):
    return {"µs": "us", "×": "x"}.get(unit, unit)


def placed(fig):
    """Whether the figure is where its label is: in a number of its files whose row (the line,
    the lines it is indented under) shares a word with the label and whose column, if it is
    in a table or JSON, names a word of the label or the figure's unit (or the row shares
    ROW_ENOUGH words). 'label', 'elsewhere' (in the files, under other labels), or None."""
    unit = same_unit(fig.unit)
    column_label = fig.label | ({unit.lower()} if unit else set())
    found = None
    for path in fig.files:
        for row, column, value, stored_unit in records_near(path, fig):
            if not reads(fig, value, stored_unit):
                continue
            found = "elsewhere"
            shared = row & fig.label
            if not shared:
                continue
            if (
                column is not None
                and not column & column_label
                and (not unit or same_unit(stored_unit) != unit)
                and len(shared) < ROW_ENOUGH
            ):
                continue  # a column that names neither the label nor the unit
            return "label"
    return found


_by_value = {}


def records_near(path, fig):
    """The records of `path` that may read as `fig` (reads() decides): those whose value is
    within the figure's tolerance at a scale its unit allows for theirs. Bisected from the
    records sorted by value, per stored unit: the mutation harness places a figure per
    mutation, and a file has thousands of numbers."""
    if path not in _by_value:
        index = {}
        for r in file_records(path):
            if r[2] == r[2]:  # a NaN reads as no figure
                index.setdefault(r[3], []).append(r)
        _by_value[path] = {}
        for stored_unit, rs in index.items():
            rs.sort(key=lambda r: r[2])
            _by_value[path][stored_unit] = ([r[2] for r in rs], rs)
    value = float(fig.text.replace(",", ""))
    tol = tolerance(fig.text, fig.rough) + 1e-9
    for stored_unit, (values, rs) in _by_value[path].items():
        if unit_clash(fig.unit, stored_unit):
            continue
        for k in scales(fig.unit, stored_unit):
            lo, hi = (value - tol) / k, (value + tol) / k
            slack = 1e-9 * max(abs(lo), abs(hi), 1.0)  # rounding: reads() is exact
            yield from rs[bisect.bisect_left(values, lo - slack) : bisect.bisect_right(values, hi + slack)]


def check_figures(figs, rel):
    problems = []
    groups = {}
    for fig in figs:
        groups.setdefault(fig.group, []).append(fig)
    for group in groups.values():
        traced, pending = [], []
        for fig in group:
            value = float(fig.text.replace(",", ""))
            where = None if fig.exempt or value == 0 else on_labelled_line(fig)
            if fig.exempt or value == 0 or where == "label":
                traced.append(value)
            else:
                pending.append((fig, where))
        for fig, where in pending:
            if derived(fig.text, fig.unit, traced, fig.rough):
                continue
            named = ", ".join(sorted(os.path.basename(f) for f in fig.files)) or "none"
            named = named.replace(":bench/results/", "@")
            label = " ".join(sorted(fig.label)[:12])
            if where == "elsewhere":
                why = f"is in {named} only on lines about something else (its label: {label})"
            else:
                why = f"is in no result file its paragraph, section, row or caption names (named: {named})"
            problem = f"{rel}:{fig.line + 1}: the figure '{fig.shown}' {why}; cite the file, or say 'not stored'"
            if problem not in problems:
                problems.append((known_key(rel, fig), problem))
    return problems


def known_key(rel, fig):
    """How KNOWN names a figure: its document, as written, and its label (so a figure that
    changes, or whose sentence does, is no longer the known one)."""
    return f"{rel}\t{fig.shown}\t{' '.join(sorted(fig.label))}"


def known_figures(root):
    """KNOWN's entries: figures that did not trace when the strong rule came in (README.md and
    bench/README.md, 2026-12-07), each to be fixed and then deleted from it."""
    try:
        with open(os.path.join(root, KNOWN), encoding="utf-8") as f:
            return {l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")}
    except OSError:
        return set()


def document_figures(lines, rel, root):
    """Every figure the strong rule checks in a document (README.md, bench/README.md)."""
    global _root
    _root = root
    doc_dir = os.path.dirname(rel)
    return prose_figures(lines, doc_dir, root) + table_figures(lines, doc_dir, root)


def check_lines(lines, rel, root, use_known=True):
    problems = []
    doc_dir = os.path.dirname(rel)
    for start, end, _, caption_traces in tables(lines, doc_dir, root):
        for n in range(start + 2, end):  # past the header and its separator
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
    if rel in STRONG_FILES:
        known = known_figures(root) if use_known else set()
        flagged = check_figures(document_figures(lines, rel, root), rel)
        problems += [p for key, p in flagged if key not in known]
        keys = {key for key, _ in flagged}
        for key in sorted(k for k in known if k.startswith(rel + "\t") and k not in keys):
            problems.append(f"{KNOWN}: '{key}' traces now (or is gone): delete it from the list")
    return problems


def check(path, root):
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return check_lines(lines, rel, root)


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
