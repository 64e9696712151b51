"""The DeerFlow provider's contract, checked offline against the stand-in of DeerFlow's ABCs
(tests/stand_in/deerflow, which reproduces DeerFlow's ``Sandbox`` and ``SandboxProvider``
signatures): it subclasses them, matches every abstract method's signature exactly, refuses
bad env keys and traversal before any request, and imports and works duck-typed without
DeerFlow. test_deerflow.py runs it against a real ``guestflow serve``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import os
import subprocess
import sys
import unittest

from deerflow.sandbox.exceptions import SandboxCapacityExceededError
from deerflow.sandbox.sandbox import Sandbox
from deerflow.sandbox.sandbox_provider import SandboxProvider
from deerflow.sandbox.search import GrepMatch

from langflow_guestflow import deerflow as provider_module
from langflow_guestflow.deerflow import GuestflowSandbox, GuestflowSandboxProvider

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ContractTest(unittest.TestCase):
    """DeerFlow's ABCs, checked without a server."""

    def test_subclasses_deerflows_abcs_when_importable(self) -> None:
        self.assertTrue(provider_module.DEERFLOW_AVAILABLE)
        self.assertTrue(issubclass(GuestflowSandbox, Sandbox))
        self.assertTrue(issubclass(GuestflowSandboxProvider, SandboxProvider))
        self.assertIs(provider_module.GrepMatch, GrepMatch)
        self.assertIs(provider_module.SandboxCapacityExceededError, SandboxCapacityExceededError)
        # Instantiable: every abstract method is implemented.
        self.assertEqual(GuestflowSandbox("gf-b-x").id, "gf-b-x")
        GuestflowSandboxProvider(url="http://127.0.0.1:9", config={})

    def test_signatures_match_the_abcs_exactly(self) -> None:
        checked = (
            (Sandbox, GuestflowSandbox, set()),
            (SandboxProvider, GuestflowSandboxProvider, {"acquire_async", "reset"}),
        )
        for base, cls, concrete in checked:
            for name in sorted(base.__abstractmethods__ | concrete):
                with self.subTest(method=f"{cls.__name__}.{name}"):
                    want = inspect.signature(getattr(base, name))
                    got = inspect.signature(getattr(cls, name))
                    self.assertEqual(
                        [(p.name, p.kind, p.default) for p in got.parameters.values()],
                        [(p.name, p.kind, p.default) for p in want.parameters.values()],
                    )
        self.assertTrue(asyncio.iscoroutinefunction(GuestflowSandboxProvider.acquire_async))

    def test_nothing_deerflow_lacks(self) -> None:
        """DeerFlow's Sandbox has no command scopes or shell-session flag; neither has ours."""
        for name in ("execute_command_in_scope", "release_command_scope", "persistent_shell_sessions"):
            with self.subTest(name=name):
                self.assertFalse(hasattr(Sandbox, name))
                self.assertFalse(hasattr(GuestflowSandbox, name))

    def test_bad_env_key_is_value_error_before_any_request(self) -> None:
        sandbox = GuestflowSandbox("gf-b-x", client=_NoCalls())
        for key in ("A-B", "1X", "", "X Y", "A=B", "PATH;rm"):
            with self.subTest(key=key), self.assertRaises(ValueError):
                sandbox.execute_command("true", env={key: "v"})

    def test_traversal_is_permission_error_before_any_request(self) -> None:
        sandbox = GuestflowSandbox("gf-b-x", client=_NoCalls())
        for path in ("/workspace/../etc/passwd", "/..", "/workspace/a/../../b"):
            with self.subTest(path=path):
                for call in (
                    lambda p: sandbox.read_file(p),
                    lambda p: sandbox.download_file(p),
                    lambda p: sandbox.write_file(p, "x"),
                    lambda p: sandbox.update_file(p, b"x"),
                    lambda p: sandbox.list_dir(p),
                    lambda p: sandbox.glob(p, "*"),
                    lambda p: sandbox.grep(p, "x"),
                ):
                    with self.assertRaises(PermissionError):
                        call(path)
        with self.assertRaises(ValueError):
            sandbox.read_file("relative/path")

    def test_duck_typed_without_deerflow(self) -> None:
        """In a fresh interpreter where ``import deerflow`` fails."""
        script = """
import sys
sys.modules["deerflow"] = None  # any import of it now raises ImportError
import asyncio
from langflow_guestflow import deerflow as d
assert not d.DEERFLOW_AVAILABLE
s = d.GuestflowSandbox("gf-b-y")
assert s.id == "gf-b-y" and not hasattr(s, "persistent_shell_sessions")
for name in ("execute_command", "read_file", "write_file", "update_file", "download_file",
             "list_dir", "glob", "grep"):
    assert callable(getattr(s, name)), name
p = d.GuestflowSandboxProvider(url="http://127.0.0.1:9")  # no DeerFlow: no config to read
assert p.settings == d.SessionSettings()
for name in ("acquire", "acquire_async", "get", "release", "reset"):
    assert callable(getattr(p, name)), name
assert asyncio.iscoroutinefunction(p.acquire_async)
m = d.GrepMatch(path="/a", line_number=1, line="x")
assert m.line_number == 1
try:
    s.list_dir("/workspace/../x")
except PermissionError:
    pass
else:
    raise AssertionError("no PermissionError")
print("duck ok")
"""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = _PACKAGE_ROOT
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("duck ok", out.stdout)


class _NoCalls:
    """A client that fails the test if the sandbox sends anything."""

    def call(self, *args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError(f"unexpected request {args}")

    json = call


class _Canned:
    """A client that records each request and answers the next canned JSON value."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[object] = []

    def json(self, method: str, path: str, **kwargs: object) -> object:
        self.requests.append((method, path))
        self.bodies.append(kwargs.get("json_body"))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def call(self, method: str, path: str, **_: object) -> bytes:
        self.requests.append((method, path))
        answer = self.answers.pop(0) if self.answers else b""
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]


class WireMappingTest(unittest.TestCase):
    """How DeerFlow's calls become the session API's requests, and its answers results."""

    def test_names_come_back_byte_exact_and_directories_marked(self) -> None:
        raw = b"/workspace/odd-\xe9\x85 "
        client = _Canned(
            {
                "entries": [
                    {"path": "/workspace/ trailing \n", "type": "file", "size": 1},
                    {"path": "/workspace/odd-\ufffd\ufffd ", "path_b64": base64.b64encode(raw).decode(), "type": "file", "size": 1},
                    {"path": "/workspace/dir\x0b", "type": "dir", "size": 0},
                ],
                "truncated": False,
            }
        )
        listed = GuestflowSandbox("gf-b-x", client=client).list_dir("/workspace")
        self.assertEqual(listed, ["/workspace/ trailing \n", os.fsdecode(raw), "/workspace/dir\x0b/"])
        self.assertEqual(os.fsencode(listed[1]), raw)
        self.assertEqual(client.requests, [("GET", "/v1/sessions/gf-b-x/files/list?path=/workspace&max_depth=2")])

    def test_paths_are_sent_as_percent_encoded_bytes(self) -> None:
        client = _Canned()
        name = os.fsdecode(b"/workspace/a b\n+\xff")
        GuestflowSandbox("gf-b-x", client=client).update_file(name, b"x")
        self.assertEqual(client.requests, [("PUT", "/v1/sessions/gf-b-x/files/update?path=/workspace/a%20b%0A%2B%FF")])

    def test_list_dir_depth_within_the_servers_range(self) -> None:
        client = _Canned(*({"entries": [], "truncated": False} for _ in range(3)))
        sandbox = GuestflowSandbox("gf-b-x", client=client)
        for depth in (0, -3, 1000):
            self.assertEqual(sandbox.list_dir("/w", max_depth=depth), [])
        self.assertEqual(
            [path for _, path in client.requests],
            [f"/v1/sessions/gf-b-x/files/list?path=/w&max_depth={d}" for d in (0, 0, 64)],
        )

    def test_glob_patterns_go_to_the_server_as_given(self) -> None:
        # The server applies DeerFlow's rule (no "/": the name at any depth).
        client = _Canned({"matches": [], "truncated": False}, {"matches": [], "truncated": False})
        sandbox = GuestflowSandbox("gf-b-x", client=client)
        sandbox.glob("/w", "*.py")
        sandbox.glob("/w", "src/*.py", include_dirs=True, max_results=5)
        self.assertEqual(
            [path for _, path in client.requests],
            [
                "/v1/sessions/gf-b-x/files/glob?path=/w&pattern=%2A.py&include_dirs=0&max_results=200",
                "/v1/sessions/gf-b-x/files/glob?path=/w&pattern=src/%2A.py&include_dirs=1&max_results=5",
            ],
        )

    def test_grep_defaults_and_line_summary(self) -> None:
        long_line = "x" * 300
        client = _Canned({"matches": [{"path": "/w/a", "line_number": 7, "line": long_line}], "truncated": True})
        matches, truncated = GuestflowSandbox("gf-b-x", client=client).grep("/w", "x+")
        self.assertTrue(truncated)
        self.assertEqual(matches, [GrepMatch(path="/w/a", line_number=7, line="x" * 197 + "...")])
        # DeerFlow's default is case-insensitive; the API's is sensitive: sent explicitly.
        self.assertIn("&literal=0&case_sensitive=0&max_results=100", client.requests[0][1])

    def test_max_results_zero_returns_nothing_and_says_if_anything_matched(self) -> None:
        client = _Canned({"matches": [{"path": "/w/a"}], "truncated": False}, {"matches": [], "truncated": False})
        sandbox = GuestflowSandbox("gf-b-x", client=client)
        self.assertEqual(sandbox.glob("/w", "*", max_results=0), ([], True))
        self.assertEqual(sandbox.glob("/w", "*", max_results=0), ([], False))
        self.assertTrue(all("max_results=1" in path for _, path in client.requests))

    def test_a_full_pool_is_deerflows_capacity_error(self) -> None:
        from langflow_guestflow._http import GuestflowError

        class _Full:
            def json(self, *_: object, **__: object) -> object:
                raise GuestflowError("capacity", "4 of 4 session guests are active", status=429, retry_after=2.0)

        provider = GuestflowSandboxProvider(url="http://127.0.0.1:9", config={"overflow_policy": "reject", "sync_thread_dir": False})
        provider._client = _Full()  # type: ignore[assignment]
        with self.assertRaises(SandboxCapacityExceededError) as caught:
            provider.acquire("t", user_id="u")
        self.assertEqual(caught.exception.retry_after_seconds, 2.0)


class DeerFlowBehaviourTest(unittest.TestCase):
    """DeerFlow's smaller semantics, each as its own code or test has it."""

    def test_line_range_drops_each_line_ending_as_local_sandbox(self) -> None:
        # LocalSandbox.read_file: lines rstrip("\\r\\n"), joined by "\\n"; the server sends
        # the lines with their endings. (E2B/BoxLite tests: "line 2\\nline 3\\nline 4".)
        client = _Canned(b"line 2\nline 3\r\nline 4\n", b"line 4\nline 5", b"whole\n", b"x\n")
        sandbox = GuestflowSandbox("gf-b-x", client=client)
        self.assertEqual(sandbox.read_file("/mnt/user-data/workspace/r.txt", start_line=2, end_line=4), "line 2\nline 3\nline 4")
        self.assertEqual(sandbox.read_file("/mnt/user-data/workspace/r.txt", start_line=4), "line 4\nline 5")
        self.assertEqual(sandbox.read_file("/mnt/user-data/workspace/r.txt"), "whole\n")
        # An empty range (end before start) is "" once the file is known to be there.
        self.assertEqual(sandbox.read_file("/mnt/user-data/workspace/r.txt", start_line=3, end_line=2), "")
        self.assertEqual(
            [path.split("?", 1)[1] for _, path in client.requests],
            [
                "path=/mnt/user-data/workspace/r.txt&start_line=2&end_line=4",
                "path=/mnt/user-data/workspace/r.txt&start_line=4",
                "path=/mnt/user-data/workspace/r.txt",
                "path=/mnt/user-data/workspace/r.txt&start_line=1&end_line=1",
            ],
        )

    def test_timeout_notice_says_what_deerflow_says(self) -> None:
        # test_local_sandbox_command_timeout.py: "after 1.5 seconds", "after 1 second".
        timed_out = {"stdout": "partial", "stderr": "", "exit_code": -1, "timed_out": True}
        client = _Canned(dict(timed_out), dict(timed_out, stdout=""))
        sandbox = GuestflowSandbox("gf-b-x", client=client)
        out = sandbox.execute_command("wait", timeout=1.5)
        self.assertIn("after 1.5 seconds", out)
        self.assertTrue(out.startswith("partial\nCommand timed out after 1.5 seconds and was terminated."), out)
        self.assertNotIn("Exit Code", out)  # LocalSandbox adds none after its notice
        self.assertIn("after 1 second and", sandbox.execute_command("wait", timeout=1))
        self.assertEqual([b["timeout_seconds"] for b in client.bodies], [2, 1])  # whole seconds, rounded up

    def test_download_only_under_mnt_user_data(self) -> None:
        sandbox = GuestflowSandbox("gf-b-x", client=_NoCalls())
        for path in ("/etc/passwd", "/workspace/a.txt", "/mnt/user-datax/a", "/mnt/skills/x"):
            with self.subTest(path=path), self.assertRaises(PermissionError) as caught:
                sandbox.download_file(path)
            self.assertIn("path must be under '/mnt/user-data'", str(caught.exception))
        client = _Canned(b"bytes")
        self.assertEqual(GuestflowSandbox("gf-b-x", client=client).download_file("/mnt/user-data/outputs/a.bin"), b"bytes")

    def test_config_environment_under_every_command_the_call_env_over_it(self) -> None:
        client = _Canned({"stdout": "ok", "exit_code": 0}, {"stdout": "ok", "exit_code": 0})
        sandbox = GuestflowSandbox("gf-b-x", client=client, environment={"A": "1", "B": "2"}, command_timeout=42)
        sandbox.execute_command("true", env={"B": "3"})
        sandbox.execute_command("true")
        self.assertEqual(client.bodies, [{"command": "true", "timeout_seconds": 42, "env": {"A": "1", "B": "3"}}, {"command": "true", "timeout_seconds": 42, "env": {"A": "1", "B": "2"}}])

    def test_an_object_held_across_a_release_acquires_again(self) -> None:
        from langflow_guestflow._http import GuestflowError

        released = GuestflowError("bad_request", "session gf-b-x is released: acquire it again", status=400)
        client = _Canned(released, {"session_id": "gf-b-x", "state": "warm", "user_id": "u", "thread_id": "t"}, {"stdout": "back", "exit_code": 0})
        again: list[tuple[str, str]] = []

        def reacquire(thread: str, user: str) -> str:
            again.append((user, thread))
            return "gf-b-x"

        sandbox = GuestflowSandbox("gf-b-x", client=client, reacquire=reacquire, owner=("u", "t"))
        self.assertEqual(sandbox.execute_command("echo back"), "back")
        self.assertEqual(again, [("u", "t")])
        # A deleted session is not brought back: its 404 is the answer.
        gone = _Canned(GuestflowError("not_found", "no session gf-b-x", status=404))
        self.assertIn("Error: no session", GuestflowSandbox("gf-b-x", client=gone, reacquire=reacquire).execute_command("true"))
        self.assertEqual(len(again), 1)
