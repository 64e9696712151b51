"""The plugin builds as a standard wheel and installs offline into fresh venvs.

Two levels, standard library only:

* ``Wheel`` builds the wheel as ``scripts/build`` does -- ``python3 -m build --wheel
  --no-isolation`` with Debian's ``python3-build`` and ``python3-hatchling`` (the backend
  ``pyproject.toml`` names), offline, from a copy of the source tree -- and checks what it
  holds: every file of ``langflow_guestflow/`` byte for byte (``extension.json`` included)
  and nothing else, ``RECORD`` hashes and sizes, ``METADATA``, ``WHEEL``, the entry points;
  and that two builds are byte-identical.
* ``FreshVenvInstall`` creates, for every Python 3.10-3.13 found on this machine (Debian's
  ``/usr/bin/python3`` first, then one interpreter per other minor version; set
  ``GUESTFLOW_TEST_PYTHONS=/path/a:/path/b`` to choose), a ``python -m venv`` with pip as
  ensurepip gives it, removes setuptools and wheel if ensurepip added them, then installs
  the wheel with ``pip install --no-index``. A script in the venv then loads every entry
  point through ``importlib.metadata.entry_points(group=...)``: without lfx (the venv has
  none) the sandbox-backend factory and the extension package load, ``extension.json`` is
  found next to the package and through ``importlib.resources``, and the executor's entry
  point fails with exactly ``ModuleNotFoundError: lfx``; then, with the test stand-in
  ``lfx`` on ``sys.path``, the executor class, the backend module and the component bundle
  import too. Uninstalling leaves nothing. A present interpreter that cannot make a venv
  (Debian without ``python3-venv``) fails the test; so does finding no interpreter at all.
"""

from __future__ import annotations

import base64
import configparser
import csv
import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
STAND_IN = PACKAGE_ROOT / "tests" / "stand_in"
NAME, DIST, VERSION = "langflow-guestflow", "langflow_guestflow", "0.1.0"
DIST_INFO = f"{DIST}-{VERSION}.dist-info"
WHEEL_NAME = f"{DIST}-{VERSION}-py3-none-any.whl"
EXPECTED_ENTRY_POINTS = {
    "lfx.executors": {"guestflow": "langflow_guestflow.executor:GuestflowExecutor"},
    "lfx.sandbox_backends": {"guestflow": "langflow_guestflow:create_backend"},
    "langflow.extensions": {"langflow-guestflow": "langflow_guestflow"},
}
TIMEOUT = 300
# Debian's interpreter: python3-build and python3-hatchling are installed for it.
BUILDER = "/usr/bin/python3"


def _copy_source(dest: Path) -> Path:
    """The plugin's source tree as the builder sees it, minus the tests and caches."""
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


def _run(argv: list, *, cwd: Path | str | None = None, what: str) -> str:
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    if proc.returncode:
        raise AssertionError(
            f"{what} failed (exit {proc.returncode}): {' '.join(map(str, argv))}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def build_wheel(outdir: Path) -> Path:
    """The wheel, built as scripts/build builds it (offline, no isolation), from a copy of the source."""
    outdir.mkdir(parents=True)
    src = _copy_source(outdir.parent / f"{outdir.name}-src")
    # --skip-dependency-check: bookworm's hatchling declares `editables`, used only by
    # editable builds and not packaged in Debian 12.
    _run(
        [BUILDER, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check", "--outdir", outdir, src],
        what="python3 -m build --wheel (apt-get install python3-build python3-hatchling; scripts/setup does)",
    )
    (wheel,) = outdir.glob("*.whl")
    return wheel


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _source_files(root: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted((root / DIST).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


class Wheel(unittest.TestCase):
    """The wheel Debian's build frontend and hatchling make of this tree."""

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.TemporaryDirectory(prefix="guestflow-wheel-")
        tmp = Path(cls._tmp.name)
        cls.wheel = build_wheel(tmp / "first")
        cls.again = build_wheel(tmp / "second")
        with zipfile.ZipFile(cls.wheel) as zf:
            cls.names = zf.namelist()
            cls.bad_member = zf.testzip()
            cls.files = {name: zf.read(name) for name in cls.names}

    @classmethod
    def tearDownClass(cls) -> None:
        cls._tmp.cleanup()

    def test_named_as_scripts_build_names_it(self) -> None:
        self.assertEqual(self.wheel.name, WHEEL_NAME)

    def test_record_lists_every_file_with_its_sha256_and_size(self) -> None:
        self.assertIsNone(self.bad_member)
        self.assertEqual(len(self.names), len(set(self.names)), "no duplicate entries")
        self.assertEqual(self.names[-1], f"{DIST_INFO}/RECORD", "RECORD is the last entry")
        rows = list(csv.reader(self.files[f"{DIST_INFO}/RECORD"].decode().splitlines()))
        self.assertEqual(sorted(r[0] for r in rows), sorted(self.names), "RECORD lists each archive entry once")
        for path, digest, size in rows:
            if path == f"{DIST_INFO}/RECORD":
                self.assertEqual((digest, size), ("", ""))
                continue
            self.assertEqual(digest, _record_hash(self.files[path]), path)
            self.assertEqual(int(size), len(self.files[path]), path)

    def test_holds_the_package_with_its_data_and_the_dist_info(self) -> None:
        package = {n: d for n, d in self.files.items() if not n.startswith(f"{DIST_INFO}/")}
        self.assertEqual(package, _source_files(PACKAGE_ROOT), "every package file, byte for byte, and nothing else")
        self.assertIn(f"{DIST}/extension.json", package)
        self.assertIn(f"{DIST}/components/guestflow/guestflow_sandbox.py", package)
        self.assertEqual(
            sorted(n for n in self.files if n.startswith(f"{DIST_INFO}/")),
            sorted(f"{DIST_INFO}/{n}" for n in ("METADATA", "WHEEL", "entry_points.txt", "RECORD")),
        )
        wheel = email.parser.BytesParser().parsebytes(self.files[f"{DIST_INFO}/WHEEL"])
        self.assertEqual(wheel["Wheel-Version"], "1.0")
        self.assertEqual(wheel["Root-Is-Purelib"], "true")
        self.assertEqual(wheel.get_all("Tag"), ["py3-none-any"])
        entry_points = configparser.ConfigParser(delimiters=("=",))
        entry_points.optionxform = str  # keep the names' case
        entry_points.read_string(self.files[f"{DIST_INFO}/entry_points.txt"].decode())
        self.assertEqual({s: dict(entry_points[s]) for s in entry_points.sections()}, EXPECTED_ENTRY_POINTS)

    def test_metadata(self) -> None:
        raw = self.files[f"{DIST_INFO}/METADATA"]
        meta = email.parser.Parser().parsestr(raw.decode("utf-8"))  # as importlib.metadata reads it
        self.assertEqual(meta["Name"], NAME)
        self.assertEqual(meta["Version"], VERSION)
        self.assertEqual(meta["Requires-Python"], ">=3.10")
        self.assertEqual(meta["License"], "MIT")
        self.assertIn("Langflow", meta["Summary"])
        self.assertEqual(
            sorted(meta["Keywords"].split(",")), sorted(["langflow", "lfx", "sandbox", "executor", "extension", "guestflow"])
        )
        self.assertIsNone(meta["Requires-Dist"], "lfx is deliberately not a dependency")
        self.assertEqual(meta["Description-Content-Type"], "text/markdown")
        self.assertEqual(meta.get_payload().strip(), (PACKAGE_ROOT / "README.md").read_text().strip())

    def test_two_builds_are_byte_identical(self) -> None:
        self.assertEqual(self.again.read_bytes(), self.wheel.read_bytes())


# What runs inside the venv after the install: argv = stand-in lfx dir, expected entry points.
_CHECK = textwrap.dedent(
    """
    import importlib, importlib.metadata as md, importlib.resources, importlib.util, json, os, sys, sysconfig

    stand_in, expected = sys.argv[1], json.loads(sys.argv[2])
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
    print("ok", sys.version.split()[0])
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


def _install_wheel(python: str, version: tuple[int, int], wheel: Path, work: Path) -> str:
    """Make the venv, install the wheel offline, check it, uninstall; returns a summary."""
    work.mkdir()
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
    # Strip it to pip alone, as a Langflow venv may be (3.12+ ensurepip adds nothing else):
    # installing a wheel needs no build tool.
    extra = [d.split("==")[0] for d in found if d.split("==")[0].lower() in ("setuptools", "wheel")]
    if extra:
        _run([*pip, "uninstall", "-q", "-y", *extra], cwd=cwd, what="removing setuptools/wheel")
    _run([*pip, "install", "-q", "--no-index", "--no-cache-dir", wheel], cwd=cwd, what="pip install --no-index WHEEL")
    _run([vpy, "-c", _CHECK, STAND_IN, json.dumps(EXPECTED_ENTRY_POINTS)], cwd=cwd, what="check")
    _run([*pip, "uninstall", "-q", "-y", NAME], cwd=cwd, what="pip uninstall")
    _run([vpy, "-c", _GONE], cwd=cwd, what="nothing left after uninstall")
    shutil.rmtree(work, ignore_errors=True)
    return f"{python} (Python {version[0]}.{version[1]}, pip {pip_version})"


class FreshVenvInstall(unittest.TestCase):
    def test_the_wheel_installs_offline_on_every_python(self) -> None:
        interpreters = find_interpreters()
        self.assertTrue(interpreters, "no Python 3.10-3.13 found (not even /usr/bin/python3)")
        with tempfile.TemporaryDirectory(prefix="guestflow-venvs-") as tmp:
            wheel = build_wheel(Path(tmp) / "dist")
            # Two at a time: venv creation (ensurepip) dominates and is mostly one core each.
            with ThreadPoolExecutor(max_workers=2) as pool:
                futures = [
                    (p, pool.submit(_install_wheel, p, v, wheel, Path(tmp) / f"{i}-python{v[0]}.{v[1]}"))
                    for i, (p, v) in enumerate(interpreters)
                ]
                results = []
                for python, future in futures:
                    with self.subTest(python=python):
                        results.append(future.result())
        print(f"\n  installed with: {'; '.join(results)}", file=sys.stderr)
        self.assertEqual(len(results), len(interpreters))


if __name__ == "__main__":
    unittest.main()
