"""The DeerFlow provider against a real ``guestflow serve`` with real guests: sessions keyed by
user and thread, commands, and byte-exact file names through list_dir, glob, grep, read and
download (test_deerflow_contract.py checks its DeerFlow contract offline)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import unittest
import urllib.error
import urllib.request

from deerflow.sandbox.search import GrepMatch

from langflow_guestflow.deerflow import GuestflowSandbox, GuestflowSandboxProvider
from tests._server import ModuleServer

MODULE = ModuleServer(extra_env={"GUESTFLOW_SESSION_REPLICAS": "8"})


def setUpModule() -> None:  # noqa: N802
    MODULE.start()


def tearDownModule() -> None:  # noqa: N802
    MODULE.stop()


def _sessions_served() -> bool:
    """Whether this server has the session API (a POST with an empty body is refused with
    400 by a server that has it, 404 "no endpoint" by one that does not)."""
    assert MODULE.server is not None
    req = urllib.request.Request(MODULE.server.url + "/v1/sessions", data=b"{}", method="POST")
    req.add_header("Authorization", f"Bearer {MODULE.server.token}")
    req.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30):
            return True
    except urllib.error.HTTPError as err:
        return err.code != 404


# Names DeerFlow's find-output bug class corrupted: edge whitespace, newlines, the other
# characters str.splitlines() splits on, and bytes that are not UTF-8.
EDGE_NAMES = [
    " leading space",
    "trailing space ",
    "  both  ",
    "new\nline",
    "ends with newline\n",
    "tab\there",
    "vt\x0bff\x0cfs\x1cgs\x1drs\x1e",
    "nel\x85",
    os.fsdecode(b"latin1-\xe9-\x85"),  # not UTF-8: travels as path_b64
]


class ServerTest(unittest.TestCase):
    """The provider against real guests."""

    provider: GuestflowSandboxProvider
    sandbox_id: str
    sandbox: GuestflowSandbox

    @classmethod
    def setUpClass(cls) -> None:
        assert _sessions_served(), "guestflow serve answers no /v1/sessions"
        assert MODULE.server is not None
        cls.provider = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token)
        cls.sandbox_id = cls.provider.acquire("thread-main", user_id="user-1")
        sandbox = cls.provider.get(cls.sandbox_id)
        assert sandbox is not None
        cls.sandbox = sandbox

    @classmethod
    def tearDownClass(cls) -> None:
        if hasattr(cls, "provider"):
            cls.provider.shutdown()

    def test_same_thread_same_sandbox_and_async_acquire(self) -> None:
        again = self.provider.acquire("thread-main", user_id="user-1")
        self.assertEqual(again, self.sandbox_id)
        self.assertEqual(asyncio.run(self.provider.acquire_async("thread-main", user_id="user-1")), self.sandbox_id)
        self.assertIsInstance(self.provider.get(self.sandbox_id), GuestflowSandbox)
        self.assertIsNone(self.provider.get("gf-b-no-such-session"))

    def test_execute_command_output_env_exit_code(self) -> None:
        self.assertEqual(self.sandbox.execute_command("printf hello"), "hello")
        self.assertEqual(self.sandbox.execute_command('printf "%s" "$GREETING"', env={"GREETING": "hi there; $(x)"}), "hi there; $(x)")
        out = self.sandbox.execute_command("echo out; echo err >&2; exit 3")
        self.assertEqual(out, "out\n\nStd Error:\nerr\n\nExit Code: 3")
        self.assertEqual(self.sandbox.execute_command("true"), "(no output)")
        # stdin is /dev/null: a command reading it ends at once.
        self.assertEqual(self.sandbox.execute_command("cat; printf done"), "done")

    def test_timeout_kills_and_says_so(self) -> None:
        out = self.sandbox.execute_command("sleep 30 & sleep 30; echo never", timeout=1)
        self.assertIn("timed out", out)
        self.assertTrue(out.endswith("Exit Code: 124"), out)
        self.assertNotIn("never", out)

    def test_write_read_update_download_round_trip(self) -> None:
        path = "/workspace/rt/notes.txt"
        self.sandbox.write_file(path, "one\ntwo\n")
        self.sandbox.write_file(path, "three\n", append=True)
        self.assertEqual(self.sandbox.read_file(path), "one\ntwo\nthree\n")
        self.assertEqual(self.sandbox.read_file(path, start_line=2, end_line=3), "two\nthree\n")
        blob = bytes(range(256)) * 4
        self.sandbox.update_file("/workspace/rt/blob.bin", blob)
        self.assertEqual(self.sandbox.download_file("/workspace/rt/blob.bin"), blob)

    def test_missing_and_wrong_kind_paths(self) -> None:
        with self.assertRaises(FileNotFoundError):
            self.sandbox.list_dir("/workspace/no-such-dir")
        with self.assertRaises(FileNotFoundError):
            self.sandbox.read_file("/workspace/no-such-file")
        with self.assertRaises(FileNotFoundError):
            self.sandbox.download_file("/workspace/no-such-file")
        self.sandbox.write_file("/workspace/kind/file.txt", "x")
        with self.assertRaises(OSError):
            self.sandbox.list_dir("/workspace/kind/file.txt")
        with self.assertRaises(OSError):
            self.sandbox.write_file("/workspace/kind", "replaces a directory?")
        self.assertEqual(self.sandbox.read_file("/workspace/kind/file.txt"), "x")

    def test_download_outside_the_prefix_or_via_symlink_is_permission_error(self) -> None:
        with self.assertRaises(PermissionError):
            self.sandbox.download_file("/etc/passwd")
        self.sandbox.execute_command("mkdir -p /workspace/links && ln -sf /etc/passwd /workspace/links/out")
        with self.assertRaises(PermissionError):
            self.sandbox.download_file("/workspace/links/out")

    def test_edge_names_round_trip_through_list_dir_glob_grep_read(self) -> None:
        root = "/workspace/edge"
        for name in EDGE_NAMES:
            self.sandbox.write_file(f"{root}/{name}", f"needle in {name!r}\n")
        listed = self.sandbox.list_dir(root, max_depth=1)
        self.assertEqual(sorted(listed), sorted(f"{root}/{name}" for name in EDGE_NAMES), listed)
        matches, truncated = self.sandbox.glob(root, "*")
        self.assertFalse(truncated)
        self.assertEqual(sorted(matches), sorted(f"{root}/{name}" for name in EDGE_NAMES))
        for name in EDGE_NAMES:
            with self.subTest(name=name):
                path = f"{root}/{name}"
                self.assertEqual(self.sandbox.read_file(path), f"needle in {name!r}\n")
                self.assertEqual(self.sandbox.download_file(path), f"needle in {name!r}\n".encode("utf-8", "surrogateescape"))
        found, truncated = self.sandbox.grep(root, "needle", literal=True)
        self.assertFalse(truncated)
        self.assertEqual(sorted(m.path for m in found), sorted(f"{root}/{name}" for name in EDGE_NAMES))
        self.assertTrue(all(isinstance(m, GrepMatch) and m.line_number == 1 for m in found))

    def test_list_dir_marks_directories_and_respects_depth(self) -> None:
        self.sandbox.write_file("/workspace/tree/a/b/c.txt", "c")
        self.sandbox.write_file("/workspace/tree/top.txt", "t")
        one = self.sandbox.list_dir("/workspace/tree", max_depth=1)
        self.assertEqual(sorted(one), ["/workspace/tree/a/", "/workspace/tree/top.txt"])
        two = self.sandbox.list_dir("/workspace/tree", max_depth=2)
        self.assertIn("/workspace/tree/a/b/", two)
        self.assertNotIn("/workspace/tree/a/b/c.txt", two)

    def test_glob_and_grep_options(self) -> None:
        for i in range(5):
            self.sandbox.write_file(f"/workspace/g/src/m{i}.py", f"value = {i}\nNAME = 'x'\n")
        self.sandbox.write_file("/workspace/g/readme.md", "value in docs\n")
        py, truncated = self.sandbox.glob("/workspace/g", "**/*.py")
        self.assertEqual(len(py), 5)
        self.assertFalse(truncated)
        # DeerFlow's rule: a pattern without "/" matches names at any depth.
        self.assertEqual(sorted(self.sandbox.glob("/workspace/g", "*.py")[0]), sorted(py))
        self.assertEqual(self.sandbox.glob("/workspace/g", "src/*.md"), ([], False))
        capped, truncated = self.sandbox.glob("/workspace/g", "**/*.py", max_results=2)
        self.assertEqual(len(capped), 2)
        self.assertTrue(truncated)
        with_dirs, _ = self.sandbox.glob("/workspace/g", "*", include_dirs=True)
        self.assertIn("/workspace/g/src", with_dirs)
        hits, _ = self.sandbox.grep("/workspace/g", r"value = [0-9]", glob="*.py")
        self.assertEqual(len(hits), 5)
        self.assertEqual({m.line for m in hits}, {f"value = {i}" for i in range(5)})
        insensitive, _ = self.sandbox.grep("/workspace/g", "name", glob="*.py")
        self.assertEqual(len(insensitive), 5)  # DeerFlow's default: case-insensitive
        sensitive, _ = self.sandbox.grep("/workspace/g", "name", glob="*.py", case_sensitive=True)
        self.assertEqual(sensitive, [])
        with self.assertRaises(re.error):
            self.sandbox.grep("/workspace/g", "([unclosed")

    def test_grep_glob_filters_the_relative_path_and_ignored_names_are_skipped(self) -> None:
        root = "/workspace/rel"
        for rel in ("src/a.py", "src/deep/b.py", "top.py", "node_modules/x.py", "app.log", "notes.md"):
            self.sandbox.write_file(f"{root}/{rel}", "needle\n")
        def grep(glob: str, path: str = root) -> list[str]:
            found, truncated = self.sandbox.grep(path, "needle", glob=glob)
            self.assertFalse(truncated)
            return sorted(m.path for m in found)
        # As DeerFlow's path_matches: a "/" anchors the filter at the root.
        self.assertEqual(grep("src/*.py"), [f"{root}/src/a.py"])
        self.assertEqual(grep("src/**/*.py"), [f"{root}/src/a.py", f"{root}/src/deep/b.py"])
        self.assertEqual(grep("*.py"), [f"{root}/src/a.py", f"{root}/src/deep/b.py", f"{root}/top.py"])
        self.assertEqual(grep("top.py", f"{root}/top.py"), [f"{root}/top.py"])
        self.assertEqual(grep("src/*.py", f"{root}/top.py"), [])
        # DeerFlow's IGNORE_PATTERNS: node_modules and *.log are not listed, globbed or grepped.
        self.assertEqual(sorted(self.sandbox.glob(root, "*")[0]), [f"{root}/notes.md", f"{root}/src/a.py", f"{root}/src/deep/b.py", f"{root}/top.py"])
        listed = self.sandbox.list_dir(root, max_depth=1)
        self.assertEqual(sorted(listed), [f"{root}/notes.md", f"{root}/src/", f"{root}/top.py"])
        self.assertEqual(sorted(m.path for m in self.sandbox.grep(root, "needle")[0]), grep("*"))
        self.assertNotIn(f"{root}/app.log", grep("*"))
        # max_depth=0 lists nothing, as DeerFlow's list_dir, and a missing path still raises.
        self.assertEqual(self.sandbox.list_dir(root, max_depth=0), [])
        with self.assertRaises(FileNotFoundError):
            self.sandbox.list_dir(f"{root}/missing", max_depth=0)

    def test_release_then_reacquire_reclaims_the_same_guest(self) -> None:
        sid = self.provider.acquire("thread-release", user_id="user-2")
        sandbox = self.provider.get(sid)
        assert sandbox is not None
        sandbox.write_file("/workspace/kept.txt", "still here")
        self.provider.release(sid)
        self.assertIsNone(self.provider.get(sid))  # a warm session serves no commands
        self.assertEqual(self.provider.acquire("thread-release", user_id="user-2"), sid)
        again = self.provider.get(sid)
        assert again is not None
        self.assertEqual(again.read_file("/workspace/kept.txt"), "still here")
        # Another user's same thread is another guest.
        other = self.provider.acquire("thread-release", user_id="user-3")
        self.assertNotEqual(other, sid)
        self.provider.delete(other)

    def test_reset_releases_what_it_acquired(self) -> None:
        assert MODULE.server is not None
        p = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token)
        sid = p.acquire("thread-reset", user_id="user-4")
        p.reset()
        status, body = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["state"], "warm")
        p.shutdown()
        status, _ = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(status, 404)


if __name__ == "__main__":
    unittest.main()
