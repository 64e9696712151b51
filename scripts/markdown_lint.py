"""What scripts/lint_figures.py and scripts/lint_links.py share: run a per-document check
over Markdown files and report like every lint (each problem on stderr, exit 1 if any)."""

import os
import sys


def report(files, root, check):
    """Runs `check(absolute path, root)` (a list of problem lines) over `files`; prints the
    problems to stderr and returns the exit status."""
    problems = []
    for path in files:
        problems += check(os.path.abspath(path), root)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0
