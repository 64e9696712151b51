"""guest/unpack_run.py: a flow run's one upload, unpacked into the run directory, then the
runner.

The host's side (actors/flow_spec.cpp) is checked byte for byte by unit_coordinator's
flow_spec tests; here the guest's side on bundles made as the host makes them, and on
bundles it must refuse.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

from .test_runner_harness import GUEST, REPO, RUN_FILES, flow_graph, spec_for

UNPACK = (REPO / "guest" / "unpack_run.py").read_text(encoding="utf-8")


def entry(name: str, data: bytes) -> bytes:
    return f"{len(data)} {name}\n".encode() + data


class Unpacked:
    """A temporary directory standing in for the guest: `upload` for /workspace (where the
    bundle is), `run` for /tmp/run (what the unpacker makes), `cwd` the run's working
    directory."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cwd = self.tmp.name
        self.upload = os.path.join(self.cwd, "upload")
        self.run = os.path.join(self.cwd, "run")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.tmp.cleanup()


def run_bundle(bundle: bytes, upload_too: tuple = ()):
    """(completed process, Unpacked) of `python3 -c UNPACK_RUN UPLOAD/.run-bundle RUN`; the
    names in `upload_too` are left beside the bundle."""
    d = Unpacked()
    os.mkdir(d.upload)
    for name in (".run-bundle",) + upload_too:
        with open(os.path.join(d.upload, name), "wb") as f:
            f.write(bundle if name == ".run-bundle" else b"kept")
    proc = subprocess.run([sys.executable, "-c", UNPACK, os.path.join(d.upload, ".run-bundle"),
                           d.run],
                          capture_output=True, timeout=60, cwd=d.cwd)
    return proc, d


class UnpackRun(unittest.TestCase):
    def test_the_runner_runs_the_spec_with_its_files_beside_it(self):
        runner = (GUEST / "runner.py").read_bytes()
        files = b"".join(entry(name, (GUEST / name).read_bytes()) for name in RUN_FILES
                         if name != "runner.py")
        spec = json.dumps(spec_for(flow_graph("hello"), [{"input_value": "hi"}])).encode()
        secret = b'{"OPENAI_API_KEY": "sk-unpacked-and-unlinked"}'
        proc, tmp = run_bundle(files + entry("runner.py.gz", gzip.compress(runner)) +
                               entry("variables.json", secret) + entry("spec.json", spec))
        with tmp:
            self.assertEqual(proc.returncode, 0, proc.stderr)
            frames = [json.loads(line) for line in proc.stdout.splitlines()]
            self.assertEqual(frames[0]["t"], "note")
            self.assertEqual(frames[-1], {"t": "done"})
            outputs = [f for f in frames if f["t"] == "outputs"][0]["run_outputs"]
            self.assertEqual(outputs[0]["inputs"], {"input_value": "hi"})
            # variables.json was read and unlinked by the runner: nothing of it is left
            self.assertEqual(sorted(os.listdir(tmp.run)), sorted(RUN_FILES + ["spec.json"]))
            self.assertEqual(os.stat(tmp.run).st_mode & 0o777, 0o700)
            # The bundle went before anything was written; its directory (the workspace, the
            # run's cwd) stays, empty as it is.
            self.assertEqual(os.listdir(tmp.upload), [])
            with open(os.path.join(tmp.run, "runner.py"), "rb") as f:
                self.assertEqual(f.read(), runner)  # gunzipped, byte for byte
            self.assertEqual(proc.stderr, b"")

    def test_each_file_is_written_whole_as_open_wb_would_write_it(self):
        big = os.urandom(3 << 20)  # more than one write may take
        probe = b"import sys; sys.stdout.write('ran')\n"
        proc, tmp = run_bundle(entry("big.bin.gz", gzip.compress(big)) + entry("small", b"s") +
                               entry("empty", b"") + entry("runner.py", probe) +
                               entry("spec.json", b"{}"))
        with tmp:
            self.assertEqual((proc.returncode, proc.stdout), (0, b"ran"), proc.stderr)
            umask = os.umask(0)
            os.umask(umask)
            for name, data in (("big.bin", big), ("small", b"s"), ("empty", b""),
                               ("runner.py", probe)):
                path = os.path.join(tmp.run, name)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), data, name)
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o666 & ~umask, name)

    def test_the_runner_sees_what_python3_runner_py_would_show_it(self):
        probe = (b"import os, sys\n"
                 b"print(sys.argv == [os.path.join(os.path.dirname(__file__), 'runner.py'),"
                 b" os.path.join(os.path.dirname(__file__), 'spec.json')],"
                 b" sys.path[0] == os.path.dirname(__file__), __name__)\n")
        proc, tmp = run_bundle(entry("runner.py", probe) + entry("spec.json", b"{}"))
        with tmp:
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stdout, b"True True __main__\n")

    def test_a_bundle_that_does_not_parse_runs_nothing(self):
        runs = entry("runner.py", b"open('ran', 'w')\n")
        for bad, why in [(b"12 runner.py\nshort", b"cut short"),
                         (b"no header line", b"no valid header"),
                         (entry("../runner.py", b"x") + runs, b"no valid header"),
                         (entry("a/b", b"x") + runs, b"no valid header"),
                         (b"x1 runner.py\n" + runs, b"no valid header")]:
            proc, tmp = run_bundle(bad)
            with tmp:
                self.assertEqual(proc.returncode, 1, bad)
                self.assertIn(why, proc.stderr, bad)
                self.assertFalse(os.path.exists(os.path.join(tmp.cwd, "ran")), bad)
                self.assertFalse(os.path.exists(os.path.join(tmp.cwd, "runner.py")))

    def test_what_else_is_beside_the_bundle_stays(self):
        proc, tmp = run_bundle(entry("runner.py", b"pass\n") + entry("spec.json", b"{}"),
                               upload_too=("other",))
        with tmp:
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(os.listdir(tmp.upload), ["other"])

    def test_a_run_directory_that_exists_is_refused_and_nothing_runs(self):
        # A fresh guest has no /tmp/run: one there is not this run's, never written into.
        d = Unpacked()
        with d:
            os.mkdir(d.upload)
            os.mkdir(d.run)
            with open(os.path.join(d.upload, ".run-bundle"), "wb") as f:
                f.write(entry("runner.py", b"open('ran', 'w')\n") + entry("spec.json", b"{}"))
            proc = subprocess.run([sys.executable, "-c", UNPACK,
                                   os.path.join(d.upload, ".run-bundle"), d.run],
                                  capture_output=True, timeout=60, cwd=d.cwd)
            self.assertEqual(proc.returncode, 1)
            self.assertIn(b"FileExistsError", proc.stderr)
            self.assertEqual(os.listdir(d.run), [])
            self.assertFalse(os.path.exists(os.path.join(d.cwd, "ran")))


if __name__ == "__main__":
    unittest.main()
