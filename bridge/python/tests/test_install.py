"""The plugin builds with its in-tree backend and installs offline into a fresh venv.

Two levels, standard library only:

* ``BackendHooks`` calls the PEP 517 / PEP 660 hooks of ``_build/guestflow_backend.py``
  directly (in a subprocess whose working directory is a copy of the source tree, as a
  frontend does) and checks what they build: the wheel's files, ``RECORD`` hashes and
  sizes, ``METADATA``, ``WHEEL``, ``entry_points.txt``, the sdist (which must rebuild the
  byte-identical wheel), the editable wheel, and the Python 3.10 TOML fallback parser
  against ``tomllib``.
* ``FreshVenvInstall`` creates, for every Python 3.10-3.13 found on this machine (Debian's
  ``/usr/bin/python3`` first, then one interpreter per other minor version; set
  ``GUESTFLOW_TEST_PYTHONS=/path/a:/path/b`` to choose), a ``python -m venv`` with pip as
  ensurepip gives it, removes setuptools and wheel if ensurepip added them, then installs
  the plugin with ``pip install --no-index`` three ways -- normal (build isolation with
  ``requires = []``), ``--no-build-isolation`` and ``-e`` -- uninstalling between them. After
  each install, a script in the venv loads every entry point through
  ``importlib.metadata.entry_points(group=...)``: without lfx (the venv has none) the
  sandbox-backend factory and the extension package load, ``extension.json`` is found
  next to the package and through ``importlib.resources``, and the executor's entry point
  fails with exactly ``ModuleNotFoundError: lfx``; then, with the test stand-in ``lfx`` on
  ``sys.path``, the executor class, the backend module and the component bundle import too.
  A present interpreter that cannot make a venv (Debian without ``python3-venv``) fails the
  test; so does finding no interpreter at all.
"""

from __future__ import annotations

import configparser
import csv
import email.parser
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
STAND_IN = PACKAGE_ROOT / "tests" / "stand_in"
BACKEND_DIR = PACKAGE_ROOT / "_build"
NAME, DIST, VERSION = "langflow-guestflow", "langflow_guestflow", "0.1.0"
DIST_INFO = f"{DIST}-{VERSION}.dist-info"
WHEEL_NAME = f"{DIST}-{VERSION}-py3-none-any.whl"
EXPECTED_ENTRY_POINTS = {
    "lfx.executors": {"guestflow": "langflow_guestflow.executor:GuestflowExecutor"},
    "lfx.sandbox_backends": {"guestflow": "langflow_guestflow:create_backend"},
    "langflow.extensions": {"langflow-guestflow": "langflow_guestflow"},
}
TIMEOUT = 300


def _copy_source(dest: Path) -> Path:
    """The plugin's source tree as pip sees it, minus the tests and caches."""
    shutil.copytree(
        PACKAGE_ROOT, dest, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.pyc", "build", "dist", "*.egg-info")
    )
    return dest


def _clean_env() -> dict[str, str]:
    """The environment for pip and the venv: no user pip config, no PYTHONPATH, no bytecode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "PYENV_VERSION"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
    )
    return env


def _run(argv: list[str], *, cwd: Path | str | None = None, what: str) -> str:
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    if proc.returncode:
        raise AssertionError(
            f"{what} failed (exit {proc.returncode}): {' '.join(map(str, argv))}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def _call_hooks(python: str, source: Path, calls: list[tuple[str, list]], *, without_tomllib: bool = False) -> list:
    """Run backend hooks in a fresh interpreter with the source tree as cwd (as pip does).

    ``without_tomllib`` makes ``import tomllib`` fail, as on Python 3.10.
    """
    script = textwrap.dedent(
        """
        import json, sys
        if sys.argv[3] == "1":
            sys.modules["tomllib"] = None  # import tomllib -> ModuleNotFoundError
        sys.path.insert(0, sys.argv[1])
        import guestflow_backend
        print(json.dumps([getattr(guestflow_backend, name)(*args) for name, args in json.loads(sys.argv[2])]))
        """
    )
    argv = [python, "-c", script, BACKEND_DIR, json.dumps(calls), "1" if without_tomllib else "0"]
    out = _run(argv, cwd=source, what="backend hooks")
    return json.loads(out.splitlines()[-1])


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _source_files(root: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted((root / DIST).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


class BackendHooks(unittest.TestCase):
    """The hooks themselves, run by this interpreter."""

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.TemporaryDirectory(prefix="guestflow-backend-")
        tmp = Path(cls._tmp.name)
        cls.src = _copy_source(tmp / "src")
        for d in ("wheel", "sdist", "editable", "metadata"):
            (tmp / d).mkdir()
        cls.tmp = tmp
        (
            cls.requires_wheel,
            cls.requires_sdist,
            cls.requires_editable,
            cls.metadata_name,
            cls.editable_metadata_name,
            cls.wheel_name,
            cls.sdist_name,
            cls.editable_name,
        ) = _call_hooks(
            sys.executable,
            cls.src,
            [
                ("get_requires_for_build_wheel", []),
                ("get_requires_for_build_sdist", []),
                ("get_requires_for_build_editable", []),
                ("prepare_metadata_for_build_wheel", [str(tmp / "metadata")]),
                ("prepare_metadata_for_build_editable", [str(tmp / "metadata")]),
                ("build_wheel", [str(tmp / "wheel")]),
                ("build_sdist", [str(tmp / "sdist")]),
                ("build_editable", [str(tmp / "editable")]),
            ],
        )
        cls.wheel = tmp / "wheel" / cls.wheel_name

    @classmethod
    def tearDownClass(cls) -> None:
        cls._tmp.cleanup()

    def _wheel_files(self, path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(path) as zf:
            return {name: zf.read(name) for name in zf.namelist()}

    def test_nothing_is_required_to_build(self) -> None:
        self.assertEqual((self.requires_wheel, self.requires_sdist, self.requires_editable), ([], [], []))

    def test_wheel_record_lists_every_file_with_its_sha256_and_size(self) -> None:
        self.assertEqual(self.wheel_name, WHEEL_NAME)
        with zipfile.ZipFile(self.wheel) as zf:
            names = zf.namelist()
            self.assertIsNone(zf.testzip())
            files = {name: zf.read(name) for name in names}
        self.assertEqual(len(names), len(set(names)), "no duplicate entries")
        self.assertEqual(names[-1], f"{DIST_INFO}/RECORD", "RECORD is the last entry")
        first_dist_info = min(i for i, n in enumerate(names) if n.startswith(f"{DIST_INFO}/"))
        self.assertTrue(all(n.startswith(f"{DIST_INFO}/") for n in names[first_dist_info:]), ".dist-info at the end")
        rows = list(csv.reader(files[f"{DIST_INFO}/RECORD"].decode().splitlines()))
        self.assertEqual([r[0] for r in rows], names, "RECORD lists each archive entry once, in order")
        for path, digest, size in rows:
            if path == f"{DIST_INFO}/RECORD":
                self.assertEqual((digest, size), ("", ""))
                continue
            self.assertEqual(digest, _record_hash(files[path]), path)
            self.assertEqual(int(size), len(files[path]), path)

    def test_wheel_holds_the_package_with_its_data_and_the_dist_info(self) -> None:
        files = self._wheel_files(self.wheel)
        package = {n: d for n, d in files.items() if not n.startswith(f"{DIST_INFO}/")}
        self.assertEqual(package, _source_files(self.src), "every package file, byte for byte, and nothing else")
        self.assertIn(f"{DIST}/extension.json", package)
        self.assertIn(f"{DIST}/components/guestflow/guestflow_sandbox.py", package)
        self.assertEqual(
            sorted(n for n in files if n.startswith(f"{DIST_INFO}/")),
            sorted(f"{DIST_INFO}/{n}" for n in ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt", "RECORD")),
        )
        wheel = email.parser.BytesParser().parsebytes(files[f"{DIST_INFO}/WHEEL"])
        self.assertEqual(wheel["Wheel-Version"], "1.0")
        self.assertEqual(wheel["Root-Is-Purelib"], "true")
        self.assertEqual(wheel.get_all("Tag"), ["py3-none-any"])
        self.assertEqual(files[f"{DIST_INFO}/top_level.txt"], f"{DIST}\n".encode())
        entry_points = configparser.ConfigParser(delimiters=("=",))
        entry_points.optionxform = str  # keep the names' case
        entry_points.read_string(files[f"{DIST_INFO}/entry_points.txt"].decode())
        self.assertEqual({s: dict(entry_points[s]) for s in entry_points.sections()}, EXPECTED_ENTRY_POINTS)

    def test_metadata(self) -> None:
        raw = self._wheel_files(self.wheel)[f"{DIST_INFO}/METADATA"]
        meta = email.parser.Parser().parsestr(raw.decode("utf-8"))  # as importlib.metadata reads it
        self.assertEqual(meta["Metadata-Version"], "2.2")  # the sdist spec asks 2.2+ for PKG-INFO
        self.assertEqual(meta["Name"], NAME)
        self.assertEqual(meta["Version"], VERSION)
        self.assertEqual(meta["Requires-Python"], ">=3.10")
        self.assertEqual(meta["License"], "MIT")
        self.assertIn("Langflow", meta["Summary"])
        self.assertEqual(meta["Keywords"].split(","), ["langflow", "lfx", "sandbox", "executor", "extension", "guestflow"])
        self.assertIsNone(meta["Requires-Dist"], "lfx is deliberately not a dependency")
        self.assertEqual(meta["Description-Content-Type"], "text/markdown")
        self.assertEqual(meta.get_payload(), (self.src / "README.md").read_text())

    def test_prepared_metadata_is_the_wheels(self) -> None:
        self.assertEqual(self.metadata_name, DIST_INFO)
        self.assertEqual(self.editable_metadata_name, DIST_INFO)
        files = self._wheel_files(self.wheel)
        prepared = self.tmp / "metadata" / DIST_INFO
        self.assertEqual(sorted(p.name for p in prepared.iterdir()), ["METADATA", "WHEEL", "entry_points.txt", "top_level.txt"])
        for path in prepared.iterdir():
            self.assertEqual(path.read_bytes(), files[f"{DIST_INFO}/{path.name}"], path.name)

    def test_sdist_rebuilds_the_identical_wheel(self) -> None:
        self.assertEqual(self.sdist_name, f"{DIST}-{VERSION}.tar.gz")
        with tarfile.open(self.tmp / "sdist" / self.sdist_name) as tar:
            names = tar.getnames()
            for member in tar.getmembers():
                self.assertTrue(member.isfile() and not member.name.startswith("/") and ".." not in member.name)
            tar.extractall(self.tmp / "unpacked")  # noqa: S202 -- checked just above, and our own archive
        self.assertTrue(all(n.startswith(f"{DIST}-{VERSION}/") for n in names))
        root = self.tmp / "unpacked" / f"{DIST}-{VERSION}"
        for required in ("PKG-INFO", "pyproject.toml", "README.md", "_build/guestflow_backend.py", f"{DIST}/extension.json"):
            self.assertTrue((root / required).is_file(), required)
        self.assertEqual(
            (root / "PKG-INFO").read_bytes(), self._wheel_files(self.wheel)[f"{DIST_INFO}/METADATA"]
        )
        (out := self.tmp / "wheel-from-sdist").mkdir()
        (name,) = _call_hooks(sys.executable, root, [("build_wheel", [str(out)])])
        self.assertEqual((out / name).read_bytes(), self.wheel.read_bytes(), "reproducible, and the sdist is complete")

    def test_editable_wheel_maps_only_the_package_to_the_source(self) -> None:
        self.assertEqual(self.editable_name, WHEEL_NAME)
        files = self._wheel_files(self.tmp / "editable" / self.editable_name)
        (pth,) = [n for n in files if n.endswith(".pth")]
        (finder,) = [n for n in files if n.endswith("_finder.py")]
        self.assertEqual(files[pth].decode(), f"import {finder[:-3]}; {finder[:-3]}.install()\n")
        self.assertIn(repr(str(self.src / DIST)), files[finder].decode())
        self.assertNotIn(f"{DIST}/__init__.py", files)
        self.assertIn(f"{DIST_INFO}/entry_points.txt", files)
        rows = list(csv.reader(files[f"{DIST_INFO}/RECORD"].decode().splitlines()))
        self.assertEqual(sorted(r[0] for r in rows), sorted(files))

    def test_fallback_toml_parser_reads_like_tomllib(self) -> None:
        try:
            import tomllib
        except ModuleNotFoundError:
            self.skipTest("no tomllib to compare with (the venv test covers 3.10's fallback)")
        sys.path.insert(0, str(BACKEND_DIR))
        try:
            import guestflow_backend as backend
        finally:
            sys.path.remove(str(BACKEND_DIR))
        text = (PACKAGE_ROOT / "pyproject.toml").read_text()
        self.assertEqual(backend.parse_toml(text), tomllib.loads(text))
        tricky = textwrap.dedent(
            """\
            # comment
            top = 'lit\\eral' # trailing
            [a."b.c"]  # a quoted key with a dot
            s = "esc \\" \\\\ \\t \\u00e9 # not a comment"
            n = -1_000
            t = true
            f = false
            arr = [
              "x", # inside
              'y',
            ]
            nested = [[1, 2], []]
            inline = { text = "MIT", "k.q" = 2, d.e = "f" }
            dotted.key = 3
            [a]
            later = 1
            """
        )
        self.assertEqual(backend.parse_toml(tricky), tomllib.loads(tricky))
        for bad in ('x = """multi"""', "x = 1.5", "[[arr]]", "x = 1979-05-27", 'x = "open', "x = 1\nx = 2", "[t]\n[t]"):
            with self.subTest(bad=bad), self.assertRaises(backend.BuildError):
                backend.parse_toml(bad)

    def test_without_tomllib_the_fallback_parser_builds_the_identical_wheel(self) -> None:
        (out := self.tmp / "wheel-fallback").mkdir()
        (name,) = _call_hooks(sys.executable, self.src, [("build_wheel", [str(out)])], without_tomllib=True)
        self.assertEqual((out / name).read_bytes(), self.wheel.read_bytes())

    def test_unknown_project_keys_are_refused_not_dropped(self) -> None:
        src = _copy_source(self.tmp / "src-bad")
        pyproject = src / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace("dependencies = []", 'dependencies = []\ndynamic = ["x"]'))
        with self.assertRaisesRegex(AssertionError, "keys this backend does not build: dynamic"):
            _call_hooks(sys.executable, src, [("build_wheel", [str(self.tmp)])])


# What runs inside the venv after each install: argv = mode, source dir, stand-in lfx dir.
_CHECK = textwrap.dedent(
    """
    import importlib, importlib.metadata as md, importlib.resources, importlib.util, json, os, sys, sysconfig

    mode, src, stand_in, expected = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    dist = md.distribution("langflow-guestflow")
    assert dist.version == "0.1.0", dist.version
    assert dist.metadata["Requires-Python"] == ">=3.10"
    eps = {g: {ep.name: ep for ep in md.entry_points(group=g)} for g in expected}
    got = {g: {name: ep.value for name, ep in group.items()} for g, group in eps.items()}
    assert got == expected, got

    # Without lfx (the venv has none): the package root and the backend factory load.
    factory = eps["lfx.sandbox_backends"]["guestflow"].load()
    assert callable(factory) and factory.__name__ == "create_backend", factory
    package = eps["langflow.extensions"]["langflow-guestflow"].load()
    assert package.__name__ == "langflow_guestflow", package
    assert not [m for m in sys.modules if m == "lfx" or m.startswith("lfx.")], "the package root imported lfx"
    manifest_path = os.path.join(os.path.dirname(package.__file__), "extension.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    assert manifest["id"] == "langflow-guestflow" and manifest["version"] == "0.1.0", manifest
    assert importlib.resources.files(package).joinpath("extension.json").read_text() == open(manifest_path).read()
    (bundle,) = manifest["bundles"]
    assert os.path.isfile(os.path.join(os.path.dirname(package.__file__), bundle["path"], "__init__.py"))
    # ... and the executor's entry point needs lfx, exactly that.
    try:
        eps["lfx.executors"]["guestflow"].load()
    except ModuleNotFoundError as e:
        assert e.name == "lfx" or e.name.startswith("lfx."), e
    else:
        raise AssertionError("the executor loaded without lfx?")

    purelib = os.path.realpath(sysconfig.get_paths()["purelib"])
    where = os.path.realpath(package.__file__)
    if mode == "editable":
        assert where == os.path.join(os.path.realpath(src), "langflow_guestflow", "__init__.py"), where
        # Live: a module added to the source after the install imports.
        importlib.import_module("langflow_guestflow._editable_probe")
        # Only the package is mapped: nothing else next to it became importable.
        assert importlib.util.find_spec("_build") is None and importlib.util.find_spec("guestflow_backend") is None
        assert not [p for p in sys.path if os.path.realpath(p) == os.path.realpath(src)], sys.path
    else:
        assert where == os.path.join(purelib, "langflow_guestflow", "__init__.py"), where
        files = {str(p) for p in dist.files}
        assert "langflow_guestflow/extension.json" in files, files
        assert "langflow_guestflow/components/guestflow/guestflow_sandbox.py" in files, files
        for p in dist.files:  # RECORD matches what was installed
            if p.hash:
                import base64, hashlib
                data = p.read_binary()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (p.hash.mode, p.hash.value, p.size) == ("sha256", digest, len(data)), p

    # With the test stand-in lfx: every surface imports.
    sys.path.insert(0, stand_in)
    importlib.invalidate_caches()
    from lfx.execution.executor import Executor
    executor_class = eps["lfx.executors"]["guestflow"].load()
    assert issubclass(executor_class, Executor) and executor_class().kind == "guestflow"
    assert callable(importlib.import_module("langflow_guestflow.backend").create_backend)
    component = importlib.import_module("langflow_guestflow.components.guestflow").GuestflowSandboxComponent
    assert component.__module__.startswith("langflow_guestflow."), component
    print("ok", mode, sys.version.split()[0])
    """
)

_GONE = textwrap.dedent(
    """
    import importlib.metadata as md, importlib.util, os, sysconfig
    try:
        md.distribution("langflow-guestflow")
    except md.PackageNotFoundError:
        pass
    else:
        raise AssertionError("still installed")
    assert importlib.util.find_spec("langflow_guestflow") is None
    purelib = sysconfig.get_paths()["purelib"]
    left = [n for n in os.listdir(purelib) if "langflow" in n.lower() or "editable" in n.lower()]
    assert not left, left
    """
)

MODES = (("normal", []), ("no-build-isolation", ["--no-build-isolation"]), ("editable", ["-e"]))


def _probe(python: str) -> tuple[int, int] | None:
    try:
        proc = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError:
        return None
    if proc.returncode:
        return None
    major, minor = map(int, proc.stdout.split())
    return major, minor


def find_interpreters() -> list[tuple[str, tuple[int, int]]]:
    """Debian's python3 first, then one interpreter per other minor version 3.10-3.13."""
    chosen = os.environ.get("GUESTFLOW_TEST_PYTHONS")
    if chosen:
        candidates = [p for p in chosen.split(os.pathsep) if p]
    else:
        candidates = ["/usr/bin/python3"]
        pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
        for minor in (10, 11, 12, 13):
            name = f"python3.{minor}"
            candidates += [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
            found = shutil.which(name)
            if found and "/shims/" not in found:  # pyenv's shims pick a version by context
                candidates.append(found)
            candidates += sorted(str(p) for p in pyenv.glob(f"versions/3.{minor}.*/bin/{name}"))
    out: list[tuple[str, tuple[int, int]]] = []
    seen: set[str] = set()
    for python in candidates:
        real = os.path.realpath(python)
        if real in seen or not os.access(python, os.X_OK):
            continue
        seen.add(real)
        version = _probe(python)
        if version is None or not (3, 10) <= version <= (3, 13):
            continue
        if chosen or version not in {v for _, v in out}:
            out.append((python, version))
    return out


def _install_each_way(python: str, version: tuple[int, int], work: Path) -> str:
    """Make the venv, install the plugin each way, check it, uninstall; returns a summary."""
    work.mkdir()
    src = _copy_source(work / "src")
    venv, cwd = work / "venv", work / "cwd"
    cwd.mkdir()
    proc = subprocess.run(
        [python, "-m", "venv", str(venv)], env=_clean_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    if proc.returncode:
        output = proc.stdout + proc.stderr
        hint = ""
        if "ensurepip" in output:
            hint = (
                f"\n{python} has no ensurepip, so `python3 -m venv` cannot give a venv pip. On Debian install the "
                f"venv package: apt-get install python3-venv (python3.{version[1]}-venv); scripts/setup installs it."
            )
        raise AssertionError(f"{python} -m venv failed (exit {proc.returncode}){hint}\n{output}")
    vpy = venv / "bin" / "python"
    pip = [vpy, "-m", "pip"]
    # The venv as ensurepip made it: pip, and before 3.12 setuptools.
    found = _run(
        [vpy, "-c", "import importlib.metadata as md; print(*(d.metadata['Name'] + '==' + d.version for d in md.distributions()))"],
        cwd=cwd,
        what="listing the venv",
    ).split()
    pip_version = next(d.split("==")[1] for d in found if d.lower().startswith("pip=="))
    # Strip it to pip alone, as a Langflow venv may be (3.12+ ensurepip adds nothing else).
    extra = [d.split("==")[0] for d in found if d.split("==")[0].lower() in ("setuptools", "wheel")]
    if extra:
        _run([*pip, "uninstall", "-q", "-y", *extra], cwd=cwd, what="removing setuptools/wheel")
    for mode, args in MODES:
        _run([*pip, "install", "-q", "--no-index", "--no-cache-dir", *args, src], cwd=cwd, what=f"pip install ({mode})")
        if mode == "editable":
            (src / DIST / "_editable_probe.py").write_text("")
        _run([vpy, "-c", _CHECK, mode, src, STAND_IN, json.dumps(EXPECTED_ENTRY_POINTS)], cwd=cwd, what=f"check ({mode})")
        _run([*pip, "uninstall", "-q", "-y", NAME], cwd=cwd, what=f"pip uninstall ({mode})")
        _run([vpy, "-c", _GONE], cwd=cwd, what=f"nothing left after uninstall ({mode})")
    shutil.rmtree(work, ignore_errors=True)
    return f"{python} (Python {version[0]}.{version[1]}, pip {pip_version})"


class FreshVenvInstall(unittest.TestCase):
    def test_installs_offline_each_way_on_every_python(self) -> None:
        interpreters = find_interpreters()
        self.assertTrue(interpreters, "no Python 3.10-3.13 found (not even /usr/bin/python3)")
        with tempfile.TemporaryDirectory(prefix="guestflow-venvs-") as tmp:
            # Two at a time: venv creation (ensurepip) dominates and is mostly one core each.
            with ThreadPoolExecutor(max_workers=2) as pool:
                futures = [
                    (p, pool.submit(_install_each_way, p, v, Path(tmp) / f"{i}-python{v[0]}.{v[1]}"))
                    for i, (p, v) in enumerate(interpreters)
                ]
                results = []
                for python, future in futures:
                    with self.subTest(python=python):
                        results.append(future.result())
        print(f"\n  installed each way with: {'; '.join(results)}", file=sys.stderr)
        self.assertEqual(len(results), len(interpreters))


if __name__ == "__main__":
    unittest.main()
