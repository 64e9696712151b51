"""The python waiter's `guestflow:runner` preload keeps up with the runner: every standard
library module a runner piece imports at module level, and every lfx module lfx_path.load()
imports, is in the waiter's lists (controlplane/local/service/python_waiter.py); static, the
files parsed. And the program it compiles ahead with it (MAIN, the flow run's unpacker) runs
as the code object compile() makes, any other `-c` source compiled as python3 would: the
waiter's own functions in a fresh python3, on test programs only."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import tempfile
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


# The waiter loaded as a fork template loads it (its code, not run), its preload of
# guestflow:runner with MAIN, then each of RUNS (a `-c` source) through its _run with
# compile() watched: per run, whether compile() was called for that source, and its status.
RUN_WAITER = r"""
import builtins, json, sys
WAITER, FIFO, MAIN, RUNS = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sys.argv = ["-c", FIFO, "guestflow:runner", MAIN]
w = {"__name__": "guestflow_waiter", "__builtins__": __builtins__, "_FORKED": True}
exec(compile(open(WAITER).read(), "<python_waiter>", "exec"), w)
w["_preload"](w["_PRELOAD"])
real, seen = builtins.compile, []
builtins.compile = lambda src, *a, **k: (seen.append(src), real(src, *a, **k))[1]
out = []
for src in RUNS:
    seen.clear()
    try:
        w["_run"](None, ["-c"], src)
        status = 0
    except SystemExit as e:
        status = e.code
    out.append([src in seen, status])
print("RESULT " + json.dumps(out), flush=True)
"""


class PrecompiledMain(unittest.TestCase):
    def run_waiter(self, main: str, runs: list) -> tuple:
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "fifo")
            p = subprocess.run([sys.executable, "-I", "-c", RUN_WAITER, str(WAITER), fifo, main,
                                json.dumps(runs)], capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            report = pathlib.Path(fifo + ".preload")
            problems = report.read_text() if report.exists() else ""
        result = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
        self.assertEqual(len(result), 1, p.stdout)
        return json.loads(result[0][len("RESULT "):]), p.stdout, p.stderr, problems

    def test_main_runs_precompiled_and_another_source_is_compiled(self) -> None:
        main = "import sys\nprint('main ran as', __name__, sys.argv)\n"
        other = "print('other ran')\n"
        got, out, _, problems = self.run_waiter(main, [main, other])
        self.assertEqual(got, [[False, 0], [True, 0]])
        self.assertIn("main ran as __main__ ['-c']", out)
        self.assertIn("other ran", out)
        self.assertEqual(problems, "")

    def test_a_main_that_does_not_compile_is_reported_and_its_run_fails_as_python3s(self):
        got, _, err, problems = self.run_waiter("def (:\n", ["def (:\n"])
        self.assertIn("guestflow:runner: SyntaxError", problems)
        self.assertEqual(got, [[True, 1]])  # compiled again at the run: python3's error
        self.assertIn("SyntaxError", err)


if __name__ == "__main__":
    unittest.main()
