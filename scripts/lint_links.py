#!/usr/bin/env python3
"""Every relative link in the repository's Markdown (every tracked *.md) resolves.

A link `[text](path)` or `![alt](path)` that is not a URL must name a file or folder of the
repository (relative to the document), and a `#fragment` into a Markdown file must be one of
its headings as GitHub spells anchors (lower case, punctuation dropped, spaces → hyphens).
Links inside code spans and fenced blocks are no links. Exit 1 listing each that does not.
"""

import os
import re
import subprocess
import sys

from markdown_lint import report

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """The anchors GitHub makes for a Markdown file's headings (repeats get -1, -2, …)."""
    seen, out = {}, set()
    fenced = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            if fenced or not line.startswith("#"):
                continue
            text = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path):
    """(line number, target) of each link outside code."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            for m in LINK.finditer(re.sub(r"`[^`]*`(?!\])", "", line)):
                yield number, m.group(1)


def check(path, root):
    problems = []
    rel = os.path.relpath(path, root)
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        name, _, fragment = target.partition("#")
        dest = path if not name else os.path.normpath(os.path.join(os.path.dirname(path), name))
        if not dest.startswith(root) or not os.path.exists(dest):
            problems.append(f"{rel}:{number}: '{target}': no such file")
        elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
            problems.append(f"{rel}:{number}: '{target}': no heading '#{fragment}' there")
    return problems


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = argv[1:]
    if not files:
        tracked = subprocess.run(
            ["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True, check=True
        ).stdout.split()
        files = [os.path.join(root, f) for f in tracked]
    return report(files, root, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
