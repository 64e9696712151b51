"""The python waiter's `guestflow:runner` preload keeps up with the runner: every standard
library module a runner piece imports at module level, and every lfx module lfx_path.load()
imports, is in the waiter's lists (controlplane/local/service/python_waiter.py). Static: the
files are parsed, nothing guest-side runs on the host."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WAITER = ROOT / "controlplane/local/service/python_waiter.py"
GUEST = ROOT / "guest"
NOT_IN_A_FLOW_RUN = {"session_files.py"}


def waiter_tuple(name: str) -> set:
    tree = ast.parse(WAITER.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{name} not found in {WAITER}")


def module_level_imports(path: pathlib.Path) -> set:
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


class RunnerPreload(unittest.TestCase):
    def test_every_stdlib_module_the_runner_imports_at_module_level_is_preloaded(self) -> None:
        preloaded = waiter_tuple("_RUNNER_STDLIB")
        # What python3 has loaded before any program runs needs no preload.
        at_start = set(sys.builtin_module_names) | {"os", "sys", "__future__", "io"}
        missing = {}
        for path in sorted(GUEST.glob("*.py")):
            if path.name in NOT_IN_A_FLOW_RUN:
                continue
            for mod in module_level_imports(path):
                top = mod.split(".")[0]
                if top not in sys.stdlib_module_names or mod in at_start or top in at_start:
                    continue  # a runner piece, lfx, or loaded at start
                if not any(p == mod or p.startswith(mod + ".") for p in preloaded):
                    missing.setdefault(mod, []).append(path.name)
        self.assertEqual(missing, {}, "add these to _RUNNER_STDLIB in python_waiter.py")

    def test_what_runpy_run_path_imports_when_unpack_run_calls_it_is_preloaded(self) -> None:
        # unpack_run.py runs the runner with runpy.run_path, which imports more of the
        # standard library on its first call (pkgutil). Run on an empty file in a fresh
        # python3 (host-safe: no guest code runs), with the preload's own modules loaded first.
        self.assertIn("runpy.run_path(", (GUEST / "unpack_run.py").read_text())
        preloaded = waiter_tuple("_RUNNER_STDLIB")
        probe = ("import json, sys, tempfile\n"
                 f"for m in {sorted(preloaded)!r}: __import__(m)\n"
                 "before = set(sys.modules)\n"
                 "with tempfile.NamedTemporaryFile('w', suffix='.py') as f:\n"
                 "    import runpy; runpy.run_path(f.name, run_name='__main__')\n"
                 "print(json.dumps(sorted(set(sys.modules) - before)))\n")
        out = subprocess.run([sys.executable, "-I", "-c", probe], check=True,
                             capture_output=True, text=True).stdout
        lazily = {m for m in json.loads(out) if m.split(".")[0] in sys.stdlib_module_names}
        self.assertEqual(lazily, set(), "add these to _RUNNER_STDLIB in python_waiter.py")

    def test_the_lfx_modules_lfx_path_loads_are_preloaded(self) -> None:
        preloaded = waiter_tuple("_RUNNER_LFX")
        tree = ast.parse((GUEST / "lfx_path.py").read_text())
        load = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "load")
        wanted = set()
        for node in ast.walk(load):
            if isinstance(node, ast.Import):
                wanted.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                wanted.add(node.module)
        self.assertTrue(wanted)
        self.assertEqual(wanted - preloaded, set())


if __name__ == "__main__":
    unittest.main()
