"""Runs guest/runner.py as a subprocess with a temporary spec and parses its frames.

No tests here: shared by the test_runner*.py modules.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GUEST = REPO / "guest"
RUNNER = GUEST / "runner.py"
# What a flow run's bundle carries beside spec.json (actors/flow_spec.cpp): every guest/*.py
# but the agent sessions' file helper and the unpacker (the command's own source).
RUN_FILES = sorted(p.name for p in GUEST.glob("*.py")
                   if p.name not in ("session_files.py", "unpack_run.py"))
FLOWS = REPO / "examples" / "flows"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The stand-in lfx package (put its parent on PYTHONPATH): tests/fixtures/lfx_guest/lfx.
LFX_STANDIN = REPO / "tests" / "fixtures" / "lfx_guest"
FRAME_MAX = 1 << 20
FRAME_TYPES = {"note", "vertex_start", "step", "outputs", "done", "fatal", "token", "message",
               "state"}


def import_guest(name: str):
    """A guest module imported here (runner.py's siblings import each other by name)."""
    if str(GUEST) not in sys.path:
        sys.path.insert(0, str(GUEST))
    write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no guest/__pycache__
    try:
        return importlib.import_module(name)
    finally:
        sys.dont_write_bytecode = write_bytecode


def flow_graph(name: str) -> dict:
    """The {nodes, edges} of examples/flows/<name>.json (a Langflow Graph.dump())."""
    with open(FLOWS / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)["data"]


def spec_for(graph: dict, inputs=None, outputs=None, executor="core", **extra) -> dict:
    """A spec.json; the core executor unless a test asks otherwise, so that an lfx installed
    on a developer's machine does not change what a test exercises (executor=None: absent)."""
    spec = {"graph": graph, "inputs": [] if inputs is None else inputs,
            "outputs": outputs or [], "runtime_options": {}, "install_lfx": False, "pip": []}
    if executor is not None:
        spec["executor"] = executor
    spec.update(extra)
    return spec


def chat(text: str, *components: str, type_: str = "chat") -> dict:
    return {"input_value": text, "type": type_, "components": list(components)}


def node_by_id(graph: dict, vid: str) -> dict:
    return next(n for n in graph["nodes"] if n["id"] == vid)


def set_field(graph: dict, vid: str, field: str, value) -> dict:
    """A copy of `graph` with template.<field>.value of vertex `vid` replaced."""
    graph = copy.deepcopy(graph)
    node_by_id(graph, vid)["data"]["node"]["template"][field]["value"] = value
    return graph


class RunResult:
    def __init__(self, lines, times, returncode, stderr, max_rss_kib, elapsed):
        self.lines = lines  # raw stdout lines (bytes, newline included)
        self.times = times  # time.monotonic() when each line arrived
        self.returncode = returncode
        self.stderr = stderr
        self.max_rss_kib = max_rss_kib
        self.elapsed = elapsed
        self.frames = [json.loads(line) for line in lines]

    def of(self, t: str) -> list:
        return [f for f in self.frames if f["t"] == t]

    @property
    def steps(self) -> list:
        return [f["event"] for f in self.of("step")]

    def step(self, vid: str) -> dict:
        found = [s for s in self.steps if s["id"] == vid]
        assert len(found) == 1, (vid, found)
        return found[0]

    @property
    def run_outputs(self) -> list:
        outs = self.of("outputs")
        assert len(outs) == 1, self.frames
        return outs[0]["run_outputs"]

    @property
    def fatal(self) -> dict:
        fatals = self.of("fatal")
        assert len(fatals) == 1, self.frames
        return fatals[0]

    def notes(self) -> list:
        return self.of("note")


# Measures the runner's peak RSS from a small parent: a child's ru_maxrss also counts the
# memory of the process it was forked from, and the test process itself can be large.
_RSS_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "sys.stderr.write('\\nguestflow-test-maxrss-kib=%d\\n' % "
    "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n")


def run_runner(spec=None, *, spec_text=None, env=None, args=None, timeout=60.0,
               measure_rss=False, wrap=None, runner=None, files=None, inspect=None) -> RunResult:
    """Runs the runner like the host does and collects every stdout line as it arrives.

    `wrap` prefixes the command line (e.g. ["timeout", "--signal=KILL", "3"], as the host does);
    `runner` is another runner.py to run (default: guest/runner.py); `files` ({name: bytes})
    are written beside spec.json (variables.json); `inspect(run_dir)` is called after the
    run, before the directory goes.
    """
    with tempfile.TemporaryDirectory(prefix="gf-runner-") as tmp:
        for name, data in (files or {}).items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        spec_path = os.path.join(tmp, "spec.json")
        if spec_text is None:
            spec_text = json.dumps(spec)
        if isinstance(spec_text, str):
            spec_text = spec_text.encode("utf-8")
        with open(spec_path, "wb") as f:
            f.write(spec_text)
        child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                     "PYTHONUNBUFFERED": "1", "HOME": tmp}
        child_env.update(env or {})
        argv = [sys.executable, str(runner or RUNNER)] + ([spec_path] if args is None else args)
        if measure_rss:
            argv = [sys.executable, "-c", _RSS_WRAPPER] + argv
        if wrap:
            argv = list(wrap) + argv
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=tmp, env=child_env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        stderr = []
        drain = threading.Thread(target=lambda: stderr.append(proc.stderr.read()[-65536:]))
        drain.start()
        lines, times = [], []
        try:
            for line in proc.stdout:
                lines.append(line)
                times.append(time.monotonic())
        finally:
            proc.stdout.close()
            drain.join()
            proc.stderr.close()
            proc.wait()
            killer.cancel()
        elapsed = time.monotonic() - started
        if inspect is not None:
            inspect(tmp)
        if elapsed >= timeout:
            raise AssertionError(f"runner killed after {timeout} s; lines so far: {lines[-5:]}")
        err = b"".join(stderr).decode("utf-8", "replace")
        max_rss = None
        if measure_rss:
            marker = "guestflow-test-maxrss-kib="
            at = err.rfind(marker)
            max_rss = int(err[at + len(marker):].split()[0]) if at >= 0 else None
        return RunResult(lines, times, proc.returncode, err, max_rss, elapsed)


def assert_well_formed(test, result: RunResult, *, success: bool = True) -> None:
    """Every stdout line is one compact frame <= 1 MiB; the stream is ordered and terminated."""
    test.assertTrue(result.lines, "the runner printed nothing")
    for line in result.lines:
        test.assertTrue(line.endswith(b"\n"), line[:200])
        test.assertLessEqual(len(line), FRAME_MAX)
        text = line.decode("utf-8")  # strict: must be valid UTF-8
        frame = json.loads(text)
        test.assertIsInstance(frame, dict)
        test.assertIn(frame.get("t"), FRAME_TYPES, text[:200])
        test.assertEqual(text.count("\n"), 1, "a frame spans lines")
    frames = result.frames
    if not success:
        test.assertEqual(frames[-1]["t"], "fatal")
        test.assertIn(frames[-1].get("code", "bad_request"), ("bad_request", "unavailable"))
        test.assertEqual(len(result.of("fatal")), 1)
        test.assertEqual(result.of("done"), [])
        test.assertEqual(result.returncode, 1, result.stderr)
        return
    test.assertEqual(result.returncode, 0, result.stderr)
    test.assertEqual(frames[-1], {"t": "done"})
    tail = frames[-3:-1] if frames[-2]["t"] == "state" else frames[-2:-1]
    test.assertEqual(tail[0]["t"], "outputs")  # then an optional state, then done
    test.assertEqual(len(result.of("state")), len(tail) - 1)
    test.assertEqual(len(result.of("done")), 1)
    test.assertEqual(result.of("fatal"), [])
    last_start = None
    for frame in frames:
        if frame["t"] == "vertex_start":
            test.assertIsNone(last_start, "two vertex_start frames without a step")
            last_start = frame["id"]
        elif frame["t"] == "step":
            event = frame["event"]
            for key, kind in (("type", str), ("id", str), ("name", str), ("valid", bool),
                              ("duration_ms", int), ("outputs", dict), ("logs", str)):
                test.assertIsInstance(event.get(key), kind, (key, event))
            test.assertEqual(event["type"], "vertex")
            if event.get("error", "").startswith("not built:"):
                test.assertIsNone(last_start, "a not-built vertex must not get vertex_start")
                test.assertFalse(event["valid"])
            else:
                test.assertEqual(last_start, event["id"], "step without its vertex_start")
            last_start = None
        elif frame["t"] in ("outputs", "done"):
            test.assertIsNone(last_start)


def stable(result_data: dict) -> dict:
    """A ResultData without its time-dependent parts (timestamps, timedelta, duration)."""
    out = copy.deepcopy(result_data)
    out.pop("timedelta", None)
    out.pop("duration", None)
    for value in out.get("results", {}).values():
        if isinstance(value, dict):
            value.pop("timestamp", None)
    return out


PY = "PythonREPLComponent-Lr2xB"  # the Python Interpreter vertex of examples/flows/python.json


def python_graph(code: str, imports: str = "") -> dict:
    """examples/flows/python.json with its Python Interpreter running `code`."""
    graph = set_field(flow_graph("python"), PY, "python_code", code)
    return set_field(graph, PY, "global_imports", imports)
