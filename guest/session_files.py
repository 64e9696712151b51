"""The file side of an agent session (bridge/API.md "Sessions"), run inside the guest as
`python3 -I -c <this file> <json>` by the runtime for each call.

Names are bytes from end to end: the arguments carry them in base64, the walk uses bytes
paths, and the answer is one line of ASCII JSON (`OK <json>` or `ERR <code> <message>`),
so no name is ever split on a newline or stripped of its spaces. Each entry names itself
with "path" (text, invalid UTF-8 replaced) and, when the bytes are not UTF-8, "path_b64".
"""

import base64
import errno
import fnmatch
import json
import os
import re
import stat
import sys

LIST_CAP = 10000
WALK_CAP = 200000
READ_CAP = 8 << 20
GREP_FILE_CAP = 16 << 20

# DeerFlow's IGNORE_PATTERNS (deerflow/sandbox/search.py): names its list_dir, glob and grep
# skip below the root asked for (an ignored directory is not entered). `ignore=0` lists all.
IGNORE_PATTERNS = [
    b".git", b".svn", b".hg", b".bzr", b"node_modules", b"__pycache__", b".venv", b"venv",
    b".env", b"env", b".tox", b".nox", b".eggs", b"*.egg-info", b"site-packages", b"dist",
    b"build", b".next", b".nuxt", b".output", b".turbo", b"target", b"out", b".idea",
    b".vscode", b"*.swp", b"*.swo", b"*~", b".project", b".classpath", b".settings",
    b".DS_Store", b"Thumbs.db", b"desktop.ini", b"*.lnk", b"*.log", b"*.tmp", b"*.temp",
    b".upload-*.part", b"*.bak", b"*.cache", b".cache", b"logs", b".coverage", b"coverage",
    b".nyc_output", b"htmlcov", b".pytest_cache", b".mypy_cache", b".ruff_cache",
]
_IGNORED_NAMES = frozenset(p for p in IGNORE_PATTERNS if not any(c in p for c in b"*?["))
_IGNORED_GLOBS = [p for p in IGNORE_PATTERNS if any(c in p for c in b"*?[")]


def ignored_name(name):
    return name in _IGNORED_NAMES or any(fnmatch.fnmatchcase(name, p) for p in _IGNORED_GLOBS)


class Refusal(Exception):
    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code


def b64(data):
    return base64.b64encode(data).decode("ascii")


def entry(path, **extra):
    out = {"path": path.decode("utf-8", "replace")}
    try:
        path.decode("utf-8")
    except UnicodeDecodeError:
        out["path_b64"] = b64(path)
    out.update(extra)
    return out


def shown(path):
    return repr(path)[1:]


def checked(args, key="path"):
    path = base64.b64decode(args[key + "_b64"])
    if not path.startswith(b"/"):
        raise Refusal("bad_request", "path must be absolute: " + shown(path))
    if b".." in path.split(b"/"):
        raise Refusal("policy_refused", "path must not contain '..': " + shown(path))
    return path


def regular_file(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Refusal("not_found", "no such file: " + shown(path))
    except NotADirectoryError:
        raise Refusal("not_found", "no such file (a parent is not a directory): " + shown(path))
    if stat.S_ISDIR(st.st_mode):
        raise Refusal("bad_request", "is a directory, not a file: " + shown(path))
    if not stat.S_ISREG(st.st_mode):
        raise Refusal("bad_request", "not a regular file: " + shown(path))
    return st


def directory(path):
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise Refusal("not_found", "no such directory: " + shown(path))
    if not stat.S_ISDIR(st.st_mode):
        raise Refusal("bad_request", "not a directory: " + shown(path))


def kind_of(mode):
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def hidden(args):
    """What a walk never shows: the runtime's own staging directory (the `stage` file's)
    and, unless `ignore` is off, DeerFlow's ignored names."""
    stage_dir = os.path.dirname(args["stage"].encode()) if args.get("stage") else None
    use_ignores = args.get("ignore", True)

    def skip(child, name):
        return child == stage_dir or (use_ignores and ignored_name(name))

    return skip


def walk(root, max_depth=None, skip=None):
    """(path, lstat) of everything below root, depth-first in byte order; symlinks are
    listed, never followed; `skip(path, name)` entries left out and not entered. Stops
    after WALK_CAP entries (the second value says so)."""
    out = []
    stack = [(root, 0)]
    while stack:
        path, depth = stack.pop()
        if max_depth is not None and depth >= max_depth:
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError:
            continue
        children = []
        for name in names:
            child = path.rstrip(b"/") + b"/" + name
            if skip and skip(child, name):
                continue
            try:
                st = os.lstat(child)
            except OSError:
                continue
            out.append((child, st))
            if len(out) >= WALK_CAP:
                return out, True
            if stat.S_ISDIR(st.st_mode):
                children.append((child, depth + 1))
        stack.extend(reversed(children))
    return out, False


def lines_of(data):
    """Lines split on b"\\n" only (what sed and grep call lines), endings kept."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def op_read(args):
    path = checked(args)
    st = regular_file(path)
    start, end = args.get("start_line"), args.get("end_line")
    with open(path, "rb") as f:
        if start is None and end is None:
            if st.st_size > READ_CAP:
                raise Refusal("artifact_too_large", "file is over 8 MiB; read a line range or download it")
            data = f.read(READ_CAP + 1)
        else:
            lines = lines_of(f.read())
            first = max(1, start or 1)
            last = end if end is not None else len(lines)
            data = b"".join(lines[first - 1:last])
    if len(data) > READ_CAP:
        raise Refusal("artifact_too_large", "the range is over 8 MiB")
    return {"data_b64": b64(data)}


def dangling(path):
    """The first symlink on `path` (itself included) whose target is missing, or None."""
    parts = [p for p in path.split(b"/") if p]
    for i in range(1, len(parts) + 1):
        here = b"/" + b"/".join(parts[:i])
        if os.path.islink(here) and not os.path.exists(here):
            return here
        if not os.path.lexists(here):
            return None
    return None


def in_stage(path, stage):
    """Whether `path` (symlinks resolved) is the runtime's staging directory or below it."""
    stage_dir = os.path.realpath(os.path.dirname(stage))
    real = os.path.realpath(path)
    return real == stage_dir or real.startswith(stage_dir.rstrip(b"/") + b"/")


def op_write(args):
    path = checked(args)
    stage = args["stage"].encode()
    try:
        if in_stage(path, stage):
            raise Refusal("policy_refused", "the session's staging directory is not writable through the file API: " + shown(path))
        link = dangling(path)
        if link is not None:
            raise Refusal("not_found", "symlink leads nowhere: " + shown(link) + " -> " + shown(os.readlink(link)))
        if os.path.isdir(path):
            raise Refusal("bad_request", "is a directory, not a file: " + shown(path))
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise Refusal("bad_request", "a parent of the path is not a directory: " + shown(path))
        if not os.path.isdir(parent):
            raise Refusal("bad_request", "a parent of the path is not a directory: " + shown(path))
        with open(stage, "rb") as src, open(path, "ab" if args.get("append") else "wb") as dst:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
        return entry(path, size=os.stat(path).st_size)
    finally:
        try:
            os.unlink(stage)
        except OSError:
            pass


def op_download(args):
    path = checked(args)
    prefix = base64.b64decode(args["prefix_b64"])
    cap = args["cap"]
    real = os.path.realpath(path)
    real_prefix = os.path.realpath(prefix)
    if not (real == real_prefix or real.startswith(real_prefix.rstrip(b"/") + b"/")):
        raise Refusal("policy_refused", "outside the download prefix " + shown(prefix) + ": " + shown(path))
    st = regular_file(real)
    if st.st_size > cap:
        raise Refusal("artifact_too_large", "%d bytes, over the download cap of %d" % (st.st_size, cap))
    stage = args["stage"].encode()
    os.makedirs(os.path.dirname(stage), exist_ok=True)
    with open(real, "rb") as src, open(stage, "wb") as dst:
        left = cap + 1
        while left > 0:
            chunk = src.read(min(1 << 20, left))
            if not chunk:
                break
            dst.write(chunk)
            left -= len(chunk)
    return {"size": os.stat(stage).st_size}


def op_list(args):
    path = checked(args)
    directory(path)
    # max_depth 0 lists nothing (DeerFlow's list_dir), but the directory must exist.
    found, cut = walk(path, args.get("max_depth", 2), hidden(args))
    found.sort(key=lambda x: x[0])
    entries = [entry(p, type=kind_of(st.st_mode), size=st.st_size) for p, st in found[:LIST_CAP]]
    return {"entries": entries, "truncated": cut or len(found) > LIST_CAP}


def glob_parts(pattern):
    """A glob pattern's segments as DeerFlow's PurePosixPath(pattern).parts has them
    (empty and "." segments dropped); None for an absolute pattern, which matches nothing."""
    if pattern.startswith(b"/"):
        return None
    return [p for p in pattern.split(b"/") if p not in (b"", b".")]


def path_matches(pattern, rel):
    """DeerFlow's rule (deerflow/sandbox/search.py path_matches), over bytes: a pattern
    without "/" matches the last name at any depth (`*.py`); any other is anchored at the
    root, each segment an fnmatch of one name and `**` zero or more whole names."""
    parts = glob_parts(pattern)
    names = [p for p in rel.split(b"/") if p]
    if not parts or not names:
        return False
    if b"/" not in pattern:
        return fnmatch.fnmatchcase(names[-1], parts[0]) if len(parts) == 1 else False
    reachable = {0}
    for part in parts:
        if part == b"**":
            reachable = set(range(min(reachable), len(names) + 1))
        else:
            reachable = {i + 1 for i in reachable if i < len(names) and fnmatch.fnmatchcase(names[i], part)}
        if not reachable:
            return False
    return len(names) in reachable


def op_glob(args):
    path = checked(args)
    directory(path)
    pattern = base64.b64decode(args["pattern_b64"])
    limit = args.get("max_results", 200)
    include_dirs = args.get("include_dirs", False)
    found, cut = walk(path, None, hidden(args))
    base = len(path.rstrip(b"/")) + 1
    matches = []
    for p, st in found:
        if stat.S_ISDIR(st.st_mode) and not include_dirs:
            continue
        if path_matches(pattern, p[base:]):
            if len(matches) >= limit:
                cut = True
                break
            matches.append(entry(p))
    return {"matches": matches, "truncated": cut}


def op_grep(args):
    path = checked(args)
    pattern = base64.b64decode(args["pattern_b64"])
    if args.get("literal"):
        pattern = re.escape(pattern)
    try:
        rx = re.compile(pattern, 0 if args.get("case_sensitive", True) else re.IGNORECASE)
    except re.error as e:
        raise Refusal("bad_request", "bad regular expression: %s" % e)
    path_glob = base64.b64decode(args.get("glob_b64", ""))
    limit = args.get("max_results", 100)
    try:
        top = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise Refusal("not_found", "no such file or directory: " + shown(path))
    if stat.S_ISDIR(top.st_mode):
        found, cut = walk(path, None, hidden(args))
        base = len(path.rstrip(b"/")) + 1
    else:
        found, cut = [(path, top)], False
        base = len(os.path.dirname(path).rstrip(b"/")) + 1
    matches = []
    for p, st in found:
        if not stat.S_ISREG(st.st_mode) or st.st_size > GREP_FILE_CAP:
            continue
        # As DeerFlow: the filter matches the path relative to the root (a file root: its name).
        if path_glob and not path_matches(path_glob, p[base:]):
            continue
        try:
            with open(p, "rb") as f:
                data = f.read(GREP_FILE_CAP + 1)
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.split(b"\n"), 1):
            if rx.search(line):
                if len(matches) >= limit:
                    return {"matches": matches, "truncated": True}
                m = entry(p, line_number=number, line=line.decode("utf-8", "replace"))
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    m["line_b64"] = b64(line)
                matches.append(m)
    return {"matches": matches, "truncated": cut}


OPS = {"read": op_read, "write": op_write, "download": op_download, "list": op_list,
       "glob": op_glob, "grep": op_grep}


def refuse(code, message):
    sys.stdout.write("ERR %s %s\n" % (code, b64(message.encode("utf-8", "replace"))))


# What a failed system call means to the caller, by errno: (code, reason). Anything else is
# guest_failed, still one line (never a traceback).
ERRNO_CODES = {
    errno.ENOENT: ("not_found", "no such file or directory"),
    errno.ENOTDIR: ("not_found", "a parent of the path is not a directory"),
    errno.ELOOP: ("not_found", "too many levels of symbolic links"),
    errno.EACCES: ("policy_refused", "permission denied"),
    errno.EPERM: ("policy_refused", "operation not permitted"),
    errno.EROFS: ("policy_refused", "read-only file system"),
    errno.ETXTBSY: ("policy_refused", "text file busy"),
    errno.EISDIR: ("bad_request", "is a directory"),
    errno.ENAMETOOLONG: ("bad_request", "file name too long"),
    errno.ENOSPC: ("artifact_too_large", "no space left in the guest"),
    errno.EDQUOT: ("artifact_too_large", "disk quota exceeded in the guest"),
    errno.EFBIG: ("artifact_too_large", "file too large"),
}


def os_refusal(e):
    """(code, one-line message) for an OSError the walk did not expect."""
    code, reason = ERRNO_CODES.get(e.errno, ("guest_failed", e.strerror or type(e).__name__))
    name = e.filename
    if isinstance(name, bytes):
        return code, reason + ": " + shown(name)
    return code, reason + (": " + repr(name) if name is not None else "")


def main():
    args = json.loads(sys.argv[1])
    try:
        answer = OPS[args["op"]](args)
    except Refusal as r:
        return refuse(r.code, str(r))
    except OSError as e:
        return refuse(*os_refusal(e))
    sys.stdout.write("OK " + json.dumps(answer, ensure_ascii=True, separators=(",", ":")) + "\n")


main()
