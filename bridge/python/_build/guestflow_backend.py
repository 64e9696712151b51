"""The in-tree PEP 517 / PEP 660 build backend of langflow-guestflow (standard library only).

``pyproject.toml`` names it (``requires = []``, ``backend-path = ["_build"]``), so pip builds
the plugin with nothing but itself and the interpreter: in a fresh ``python3 -m venv`` with
no setuptools or wheel, offline (``--no-index``), with or without build isolation, and as an
editable install. The hooks run with the source tree as the working directory (PEP 517).

What it builds, all from ``pyproject.toml``'s ``[project]`` table (read with ``tomllib``, or
on Python 3.10 with :func:`parse_toml`, the TOML subset this pyproject uses):

* the wheel ``langflow_guestflow-<version>-py3-none-any.whl`` (PEP 427): every file under
  the import package (the project name with ``-`` -> ``_``, i.e. ``langflow_guestflow/``,
  so package data such as ``extension.json`` comes along; ``__pycache__``, ``*.pyc`` and
  dot-files stay out), then ``<name>-<version>.dist-info/`` with ``METADATA`` (core metadata
  2.2, the README as the description), ``WHEEL``, ``entry_points.txt`` (the
  ``[project.entry-points.*]`` groups, plus ``scripts`` / ``gui-scripts``),
  ``top_level.txt`` and ``RECORD`` (sha256 and size of every file; RECORD itself last);
* the sdist ``langflow_guestflow-<version>.tar.gz``: ``PKG-INFO``, ``pyproject.toml``, the
  readme, this backend (the ``backend-path`` directories) and the package, enough to build
  the same wheel again;
* the editable wheel (PEP 660): the same ``.dist-info`` plus a ``.pth`` that installs a
  meta-path finder mapping the one package name to the source tree, so edits are live and
  nothing else next to the package (``tests``, ``_build``) becomes importable.

Archives are reproducible: entries are sorted, timestamps come from ``SOURCE_DATE_EPOCH``
or are fixed at 1980-01-01, and owners and modes are normalised.

This backend serves this one package; it reads only the ``[project]`` keys listed in
``_PROJECT_KEYS`` and refuses any other rather than silently dropping it.
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import os
import re
import stat
import tarfile
import time
import zipfile

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "parse_toml",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]

GENERATOR = "langflow-guestflow in-tree backend (_build/guestflow_backend.py)"
WHEEL_TAG = "py3-none-any"

_PROJECT_KEYS = {
    "name",
    "version",
    "description",
    "readme",
    "requires-python",
    "license",
    "keywords",
    "classifiers",
    "authors",
    "maintainers",
    "urls",
    "dependencies",
    "optional-dependencies",
    "entry-points",
    "scripts",
    "gui-scripts",
}
_VERSION = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")
_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst", ".txt": "text/plain", "": "text/plain"}


class BuildError(Exception):
    """A pyproject.toml or source tree this backend cannot build (the message says why)."""


# --------------------------------------------------------------------------------------
# PEP 517 / PEP 660 hooks
# --------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _Project(os.getcwd())
    target = os.path.join(metadata_directory, project.dist_info)
    os.makedirs(target, exist_ok=True)
    for name, data in project.dist_info_files():
        with open(os.path.join(target, name), "wb") as f:
            f.write(data)
    return project.dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _Project(os.getcwd())
    files = [(arcname, _read(path), _mode(path)) for arcname, path in project.package_files()]
    return project.write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    project = _Project(os.getcwd())
    finder = f"__editable___{project.dist_name}_{project.version.replace('.', '_')}_finder"
    source = os.path.join(project.root, project.package)
    files = [
        (f"{finder}.py", _FINDER.format(name=project.name, package=repr(project.package), path=repr(source)).encode(), 0o644),
        (f"__editable__.{project.dist_name}-{project.version}.pth", f"import {finder}; {finder}.install()\n".encode(), 0o644),
    ]
    return project.write_wheel(wheel_directory, files)


def build_sdist(sdist_directory, config_settings=None):
    project = _Project(os.getcwd())
    base = f"{project.dist_name}-{project.version}"
    filename = f"{base}.tar.gz"
    members = [("PKG-INFO", project.metadata(), 0o644)]
    members += [(arcname, _read(path), _mode(path)) for arcname, path in project.sdist_files()]
    members.sort(key=lambda m: m[0])
    epoch = _epoch()
    os.makedirs(sdist_directory, exist_ok=True)
    with open(os.path.join(sdist_directory, filename), "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for arcname, data, mode in members:
                    info = tarfile.TarInfo(f"{base}/{arcname}")
                    info.size = len(data)
                    info.mode = mode
                    info.mtime = epoch
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    tar.addfile(info, io.BytesIO(data))
    return filename


# --------------------------------------------------------------------------------------
# The project
# --------------------------------------------------------------------------------------


class _Project:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        pyproject = load_pyproject(os.path.join(self.root, "pyproject.toml"))
        self.build_system = pyproject.get("build-system", {})
        project = pyproject.get("project")
        if not isinstance(project, dict):
            raise BuildError("pyproject.toml has no [project] table")
        unknown = sorted(set(project) - _PROJECT_KEYS)
        if unknown:
            raise BuildError(f"pyproject.toml [project] keys this backend does not build: {', '.join(unknown)}")
        self.project = project
        self.name = _string(project, "name", required=True)
        if not _NAME.match(self.name):
            raise BuildError(f"[project] name {self.name!r} is not a valid distribution name")
        self.version = _string(project, "version", required=True)
        if not _VERSION.match(self.version):
            raise BuildError(f"[project] version {self.version!r} is not a normalised PEP 440 version")
        self.dist_name = re.sub(r"[-_.]+", "_", self.name).lower()
        self.package = self.dist_name
        if not os.path.isfile(os.path.join(self.root, self.package, "__init__.py")):
            raise BuildError(f"no package {self.package}/__init__.py next to pyproject.toml")
        self.dist_info = f"{self.dist_name}-{self.version}.dist-info"

    # ---- files ----------------------------------------------------------------------

    def package_files(self) -> list[tuple[str, str]]:
        """(archive name, path) of every file of the import package, sorted."""
        return _walk(self.root, self.package)

    def sdist_files(self) -> list[tuple[str, str]]:
        files = {"pyproject.toml": os.path.join(self.root, "pyproject.toml")}
        readme = self._readme_file()
        if readme:
            files[readme] = os.path.join(self.root, readme)
        license_ = self.project.get("license")
        if isinstance(license_, dict) and "file" in license_:
            files[license_["file"]] = os.path.join(self.root, license_["file"])
        for entry in self.build_system.get("backend-path", []):
            files.update(_walk(self.root, os.path.normpath(entry)))
        files.update(self.package_files())
        return sorted(files.items())

    # ---- dist-info ------------------------------------------------------------------

    def dist_info_files(self) -> list[tuple[str, bytes]]:
        files = [("METADATA", self.metadata()), ("WHEEL", self.wheel_file())]
        entry_points = self.entry_points()
        if entry_points:
            files.append(("entry_points.txt", entry_points))
        files.append(("top_level.txt", f"{self.package}\n".encode()))
        return files

    def wheel_file(self) -> bytes:
        return (f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: true\nTag: {WHEEL_TAG}\n").encode()

    def entry_points(self) -> bytes:
        groups: dict[str, dict[str, str]] = {}
        for key, group in (("scripts", "console_scripts"), ("gui-scripts", "gui_scripts")):
            if key in self.project:
                groups[group] = _string_table(self.project, key)
        declared = self.project.get("entry-points", {})
        if not isinstance(declared, dict):
            raise BuildError("[project.entry-points] must be a table of tables")
        for group in declared:
            if group in ("console_scripts", "gui_scripts"):
                raise BuildError(f"declare {group} with [project.scripts] / [project.gui-scripts]")
            groups[group] = _string_table(declared, group)
        lines = []
        for group, entries in groups.items():
            lines.append(f"[{group}]")
            lines += [f"{name} = {target}" for name, target in entries.items()]
            lines.append("")
        return "\n".join(lines).encode()

    def metadata(self) -> bytes:
        p = self.project
        fields = [("Metadata-Version", "2.2"), ("Name", self.name), ("Version", self.version)]
        description = _string(p, "description")
        if description:
            if "\n" in description:
                raise BuildError("[project] description must be one line")
            fields.append(("Summary", description))
        if p.get("keywords"):
            fields.append(("Keywords", ",".join(_string_list(p, "keywords"))))
        for key, prefix in (("authors", "Author"), ("maintainers", "Maintainer")):
            names, emails = [], []
            for person in p.get(key, []):
                if not isinstance(person, dict) or set(person) - {"name", "email"}:
                    raise BuildError(f"[project] {key} entries are tables with name and/or email")
                if "email" in person:
                    emails.append(f"{person['name']} <{person['email']}>" if "name" in person else person["email"])
                elif "name" in person:
                    names.append(person["name"])
            if names:
                fields.append((prefix, ", ".join(names)))
            if emails:
                fields.append((f"{prefix}-email", ", ".join(emails)))
        license_ = p.get("license")
        if isinstance(license_, str):
            fields.append(("License", license_))
        elif isinstance(license_, dict) and set(license_) == {"text"}:
            fields.append(("License", license_["text"]))
        elif isinstance(license_, dict) and set(license_) == {"file"}:
            fields.append(("License", _read(os.path.join(self.root, license_["file"])).decode("utf-8")))
        elif license_ is not None:
            raise BuildError("[project] license must be a string, {text = ...} or {file = ...}")
        fields += [("Classifier", c) for c in _string_list(p, "classifiers")]
        for label, url in _string_table(p, "urls").items():
            fields.append(("Project-URL", f"{label}, {url}"))
        requires_python = _string(p, "requires-python")
        if requires_python:
            fields.append(("Requires-Python", requires_python))
        fields += [("Requires-Dist", d) for d in _string_list(p, "dependencies")]
        extras = p.get("optional-dependencies", {})
        if not isinstance(extras, dict):
            raise BuildError("[project.optional-dependencies] must be a table")
        for extra in extras:
            fields.append(("Provides-Extra", extra))
            for req in _string_list(extras, extra):
                req, _, marker = req.partition(";")
                marker = f"({marker.strip()}) and " if marker.strip() else ""
                fields.append(("Requires-Dist", f'{req.strip()}; {marker}extra == "{extra}"'))
        body = ""
        readme = self._readme()
        if readme:
            text, content_type = readme
            fields.append(("Description-Content-Type", content_type))
            body = text if text.endswith("\n") else text + "\n"
        out = []
        for key, value in fields:
            out.append(f"{key}: " + "\n        ".join(str(value).splitlines() or [""]))
        return ("\n".join(out) + "\n\n" + body).encode("utf-8")

    def _readme_file(self) -> str | None:
        readme = self.project.get("readme")
        if isinstance(readme, str):
            return readme
        if isinstance(readme, dict) and "file" in readme:
            return readme["file"]
        return None

    def _readme(self) -> tuple[str, str] | None:
        readme = self.project.get("readme")
        if readme is None:
            return None
        if isinstance(readme, str):
            suffix = os.path.splitext(readme)[1].lower()
            if suffix not in _README_TYPES:
                raise BuildError(f"[project] readme {readme!r}: give a table with content-type")
            return _read(os.path.join(self.root, readme)).decode("utf-8"), _README_TYPES[suffix]
        if isinstance(readme, dict) and "content-type" in readme and ("file" in readme) != ("text" in readme):
            text = readme["text"] if "text" in readme else _read(os.path.join(self.root, readme["file"])).decode("utf-8")
            return text, readme["content-type"]
        raise BuildError("[project] readme must be a path or {file|text = ..., content-type = ...}")

    # ---- wheel ----------------------------------------------------------------------

    def write_wheel(self, wheel_directory: str, files: list[tuple[str, bytes, int]]) -> str:
        filename = f"{self.dist_name}-{self.version}-{WHEEL_TAG}.whl"
        os.makedirs(wheel_directory, exist_ok=True)
        path = os.path.join(wheel_directory, filename)
        date_time = time.gmtime(max(_epoch(), 315532800))[:6]  # zip cannot store dates before 1980
        record = []
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:

            def add(arcname: str, data: bytes, mode: int) -> None:
                info = zipfile.ZipInfo(arcname, date_time=date_time)
                info.external_attr = (stat.S_IFREG | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append((arcname, f"sha256={digest}", str(len(data))))

            for arcname, data, mode in sorted(files):
                add(arcname, data, mode)
            for name, data in self.dist_info_files():  # .dist-info last, RECORD at the very end
                add(f"{self.dist_info}/{name}", data, 0o644)
            record_name = f"{self.dist_info}/RECORD"
            buf = io.StringIO()
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerows(record)
            writer.writerow((record_name, "", ""))
            info = zipfile.ZipInfo(record_name, date_time=date_time)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue().encode())
        return filename


# The editable install's finder (one module in site-packages, imported by the .pth).
_FINDER = '''"""Editable install of {name} (written by its in-tree build backend).

Maps the one package name to the source tree; nothing else next to it becomes importable.
"""

import importlib.util
import os
import sys

PACKAGE = {package}
PATH = {path}


class EditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != PACKAGE:
            return None
        return importlib.util.spec_from_file_location(
            PACKAGE, os.path.join(PATH, "__init__.py"), submodule_search_locations=[PATH]
        )

    @classmethod
    def invalidate_caches(cls):
        pass


def install():
    if EditableFinder not in sys.meta_path:
        sys.meta_path.append(EditableFinder)
'''


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _walk(root: str, top: str) -> list[tuple[str, str]]:
    """(posix archive name, path) of the files under root/top, minus caches and dot-files."""
    base = os.path.join(root, top)
    if not os.path.isdir(base):
        raise BuildError(f"{top!r} is not a directory under {root}")
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not (d.startswith(".") or d == "__pycache__" or d.endswith(".egg-info")))
        for filename in sorted(filenames):
            if filename.startswith(".") or filename.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, filename)
            if not os.path.isfile(path):
                continue
            out.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    return out


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _mode(path: str) -> int:
    return 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644


def _epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    return int(value) if value.isdigit() else 315532800  # 1980-01-01T00:00:00Z


def _string(table: dict, key: str, *, required: bool = False) -> str:
    value = table.get(key)
    if value is None:
        if required:
            raise BuildError(f"[project] {key} is required")
        return ""
    if not isinstance(value, str):
        raise BuildError(f"{key} must be a string")
    return value


def _string_list(table: dict, key: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BuildError(f"{key} must be an array of strings")
    return value


def _string_table(table: dict, key: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise BuildError(f"{key} must be a table of strings")
    return value


# --------------------------------------------------------------------------------------
# pyproject.toml
# --------------------------------------------------------------------------------------


def load_pyproject(path: str) -> dict:
    text = _read(path).decode("utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: no tomllib, and no tomli to be had offline
        return parse_toml(text)
    return tomllib.loads(text)


def parse_toml(text: str) -> dict:
    """Parse the TOML subset a pyproject like ours uses (Python 3.10 has no ``tomllib``).

    Supported: comments; ``[table]`` headers with bare, quoted and dotted keys; ``key = value``
    with dotted keys; basic (``"..."``, with escapes) and literal (``'...'``) strings;
    integers; booleans; arrays (multi-line, trailing comma, comments inside); inline tables.
    Anything else (multi-line strings, floats, dates, ``[[arrays of tables]]``) raises
    :class:`BuildError` naming the line, so an unsupported pyproject fails loudly on 3.10
    instead of building something different from what ``tomllib`` would read.
    """
    return _TomlParser(text).parse()


class _TomlParser:
    _BARE = re.compile(r"[A-Za-z0-9_-]+")
    _INT = re.compile(r"[+-]?(0|[1-9](_?[0-9])*)(?![0-9A-Za-z_.:+-])")
    _ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}

    def __init__(self, text: str) -> None:
        self.s = text.replace("\r\n", "\n")
        self.i = 0
        self.root: dict = {}
        self.defined: set[int] = set()  # ids of tables given a [header] or made by dotted keys

    def error(self, message: str) -> BuildError:
        line = self.s.count("\n", 0, self.i) + 1
        return BuildError(f"pyproject.toml line {line}: {message} (TOML the Python 3.10 fallback parser does not read?)")

    def parse(self) -> dict:
        current = self.root
        while True:
            self.skip_blank_lines()
            if self.i >= len(self.s):
                return self.root
            if self.s.startswith("[[", self.i):
                raise self.error("arrays of tables are not supported")
            if self.s[self.i] == "[":
                self.i += 1
                self.skip_ws()
                keys = self.key()
                self.skip_ws()
                self.expect("]")
                current = self.table_at(self.root, keys, header=True)
            else:
                keys = self.key()
                self.skip_ws()
                self.expect("=")
                self.skip_ws()
                self.assign(current, keys, self.value())
            self.end_of_line()

    # ---- structure ----

    def table_at(self, table: dict, keys: list[str], *, header: bool) -> dict:
        for n, key in enumerate(keys):
            last = n == len(keys) - 1
            if key not in table:
                table[key] = {}
                if not last:
                    self.defined.discard(id(table[key]))
            elif not isinstance(table[key], dict):
                raise self.error(f"key {key!r} is already a value")
            table = table[key]
        if header:
            if id(table) in self.defined:
                raise self.error(f"table [{'.'.join(keys)}] defined twice")
            self.defined.add(id(table))
        return table

    def assign(self, table: dict, keys: list[str], value) -> None:
        parent = self.table_at(table, keys[:-1], header=False)
        if keys[-1] in parent:
            raise self.error(f"key {keys[-1]!r} defined twice")
        parent[keys[-1]] = value

    # ---- lexing ----

    def skip_ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def skip_comment(self) -> None:
        if self.i < len(self.s) and self.s[self.i] == "#":
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end

    def skip_blank_lines(self) -> None:
        while True:
            self.skip_ws()
            self.skip_comment()
            if self.i < len(self.s) and self.s[self.i] == "\n":
                self.i += 1
            else:
                return

    def end_of_line(self) -> None:
        self.skip_ws()
        self.skip_comment()
        if self.i < len(self.s):
            if self.s[self.i] != "\n":
                raise self.error(f"unexpected {self.s[self.i]!r}")
            self.i += 1

    def expect(self, char: str) -> None:
        if not self.s.startswith(char, self.i):
            raise self.error(f"expected {char!r}")
        self.i += len(char)

    def key(self) -> list[str]:
        keys = [self.simple_key()]
        while True:
            self.skip_ws()
            if self.i < len(self.s) and self.s[self.i] == ".":
                self.i += 1
                self.skip_ws()
                keys.append(self.simple_key())
            else:
                return keys

    def simple_key(self) -> str:
        if self.s.startswith('"', self.i) or self.s.startswith("'", self.i):
            return self.string()
        m = self._BARE.match(self.s, self.i)
        if not m:
            raise self.error("expected a key")
        self.i = m.end()
        return m.group()

    def value(self):
        s, i = self.s, self.i
        if s.startswith('"""', i) or s.startswith("'''", i):
            raise self.error("multi-line strings are not supported")
        if i < len(s) and s[i] in "\"'":
            return self.string()
        if s.startswith("[", i):
            return self.array()
        if s.startswith("{", i):
            return self.inline_table()
        for word, result in (("true", True), ("false", False)):
            if s.startswith(word, i) and not self._BARE.match(s, i + len(word)):
                self.i += len(word)
                return result
        m = self._INT.match(s, i)
        if m:
            self.i = m.end()
            return int(m.group().replace("_", ""))
        raise self.error("unsupported value (only strings, integers, booleans, arrays and inline tables)")

    def string(self) -> str:
        quote = self.s[self.i]
        self.i += 1
        out = []
        while True:
            if self.i >= len(self.s) or self.s[self.i] == "\n":
                raise self.error("unterminated string")
            c = self.s[self.i]
            self.i += 1
            if c == quote:
                return "".join(out)
            if c == "\\" and quote == '"':
                e = self.s[self.i : self.i + 1]
                self.i += 1
                if e in self._ESCAPES:
                    out.append(self._ESCAPES[e])
                elif e in ("u", "U"):
                    width = 4 if e == "u" else 8
                    digits = self.s[self.i : self.i + width]
                    if not re.fullmatch(r"[0-9A-Fa-f]{%d}" % width, digits):
                        raise self.error("bad unicode escape")
                    out.append(chr(int(digits, 16)))
                    self.i += width
                else:
                    raise self.error(f"bad escape \\{e}")
            else:
                out.append(c)

    def array(self) -> list:
        self.expect("[")
        out = []
        while True:
            self.skip_blank_lines()
            if self.s.startswith("]", self.i):
                self.i += 1
                return out
            out.append(self.value())
            self.skip_blank_lines()
            if self.s.startswith(",", self.i):
                self.i += 1
            elif not self.s.startswith("]", self.i):
                raise self.error("expected ',' or ']' in an array")

    def inline_table(self) -> dict:
        self.expect("{")
        table: dict = {}
        self.skip_ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return table
        while True:
            self.skip_ws()
            keys = self.key()
            self.skip_ws()
            self.expect("=")
            self.skip_ws()
            self.assign(table, keys, self.value())
            self.skip_ws()
            if self.s.startswith("}", self.i):
                self.i += 1
                return table
            self.expect(",")
