"""deerflow/sandbox/search.py: ``GrepMatch``, the ignored names and the path rule DeerFlow's
sandboxes share, and its local glob/grep walks (the tests compare guestflow's answers with
them on the same tree)."""

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

IGNORE_PATTERNS = [
    ".git", ".svn", ".hg", ".bzr", "node_modules", "__pycache__", ".venv", "venv", ".env",
    "env", ".tox", ".nox", ".eggs", "*.egg-info", "site-packages", "dist", "build", ".next",
    ".nuxt", ".output", ".turbo", "target", "out", ".idea", ".vscode", "*.swp", "*.swo", "*~",
    ".project", ".classpath", ".settings", ".DS_Store", "Thumbs.db", "desktop.ini", "*.lnk",
    "*.log", "*.tmp", "*.temp", ".upload-*.part", "*.bak", "*.cache", ".cache", "logs",
    ".coverage", "coverage", ".nyc_output", "htmlcov", ".pytest_cache", ".mypy_cache",
    ".ruff_cache",
]

DEFAULT_MAX_FILE_SIZE_BYTES = 1_000_000
DEFAULT_LINE_SUMMARY_LENGTH = 200


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line_number: int
    line: str


_EXACT = frozenset(os.path.normcase(p) for p in IGNORE_PATTERNS if not any(c in p for c in "*?["))
_GLOBS = [p for p in IGNORE_PATTERNS if any(c in p for c in "*?[")]
_GLOB_RE = re.compile("|".join(fnmatch.translate(os.path.normcase(p)) for p in _GLOBS))


def should_ignore_name(name: str) -> bool:
    normalized = os.path.normcase(name)
    return normalized in _EXACT or _GLOB_RE.match(normalized) is not None


def should_ignore_path(path: str) -> bool:
    return any(should_ignore_name(part) for part in path.replace("\\", "/").split("/") if part)


def path_matches(pattern: str, rel_path: str) -> bool:
    path = PurePosixPath(rel_path)
    if path.match(pattern):
        return True
    return pattern.startswith("**/") and path.match(pattern[3:])


def truncate_line(line: str, max_chars: int = DEFAULT_LINE_SUMMARY_LENGTH) -> str:
    line = line.rstrip("\n\r")
    return line if len(line) <= max_chars else line[: max_chars - 3] + "..."


def is_binary_file(path: Path, sample_size: int = 8192) -> bool:
    try:
        with path.open("rb") as handle:
            return b"\0" in handle.read(sample_size)
    except OSError:
        return True


def find_glob_matches(root: Path, pattern: str, *, include_dirs: bool = False, max_results: int = 200) -> tuple[list[str], bool]:
    root = root.resolve()
    if not root.exists():
        raise FileNotFoundError(root)
    if not root.is_dir():
        raise NotADirectoryError(root)
    matches: list[str] = []
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not should_ignore_name(d)]
        rel_dir = Path(current).relative_to(root)
        names = [d for d in dirs] if include_dirs else []
        names += [f for f in files if not should_ignore_name(f)]
        for name in names:
            if path_matches(pattern, (rel_dir / name).as_posix()):
                matches.append(str(Path(current) / name))
                if len(matches) >= max_results:
                    return matches, True
    return matches, False


def find_grep_matches(
    root: Path,
    pattern: str,
    *,
    glob_pattern: str | None = None,
    literal: bool = False,
    case_sensitive: bool = False,
    max_results: int = 100,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE_BYTES,
    line_summary_length: int = DEFAULT_LINE_SUMMARY_LENGTH,
) -> tuple[list[GrepMatch], bool]:
    root = root.resolve()
    if not root.exists():
        raise FileNotFoundError(root)
    root_is_file = root.is_file()
    if not root_is_file and not root.is_dir():
        raise NotADirectoryError(root)
    regex = re.compile(re.escape(pattern) if literal else pattern, 0 if case_sensitive else re.IGNORECASE)
    longest = line_summary_length * 10

    def candidates():
        if root_is_file:
            yield root, root.name
            return
        for current, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not should_ignore_name(d)]
            rel_dir = Path(current).relative_to(root)
            for name in files:
                if not should_ignore_name(name):
                    yield Path(current) / name, (rel_dir / name).as_posix()

    matches: list[GrepMatch] = []
    for candidate, rel in candidates():
        if glob_pattern is not None and not path_matches(glob_pattern, rel):
            continue
        try:
            if not root_is_file and candidate.is_symlink():
                continue
            real = candidate.resolve()
            if not root_is_file and not real.is_relative_to(root):
                continue
            if real.stat().st_size > max_file_size or is_binary_file(real):
                continue
            with real.open(encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, start=1):
                    if len(line) > longest or not regex.search(line):
                        continue
                    matches.append(GrepMatch(path=str(real), line_number=number, line=truncate_line(line, line_summary_length)))
                    if len(matches) >= max_results:
                        return matches, True
        except OSError:
            continue
    return matches, False
