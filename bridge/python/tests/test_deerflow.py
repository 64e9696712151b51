"""The DeerFlow provider against a real ``guestflow serve`` with real guests: sessions keyed by
user and thread, commands, byte-exact file names through list_dir, glob, grep, read and
download, typed file errors, a sandbox held across a release, and the ``sandbox:`` config
keys it honours (test_deerflow_contract.py and test_deerflow_config.py check the contract
and the config offline; test_deerflow_upstream.py runs DeerFlow's own sandbox tests)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import threading
import time
import unittest
import urllib.error
import urllib.request

from deerflow.sandbox.exceptions import SandboxCapacityExceededError
from deerflow.sandbox.search import GrepMatch

from langflow_guestflow.deerflow import GuestflowSandbox, GuestflowSandboxProvider
from tests._deerflow_server import DeerFlowServer
from tests.test_deerflow_config import _section

# DeerFlow's home (its threads' directories) is the server's mount root; DeerFlow's download
# prefix (its VIRTUAL_PATH_PREFIX) the server's too.
MODULE = DeerFlowServer(extra_env={"GUESTFLOW_SESSION_REPLICAS": "12", "GUESTFLOW_DOWNLOAD_PREFIX": "/mnt/user-data"})


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
        cls.provider = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config={})
        cls.sandbox_id = cls.provider.acquire("thread-main", user_id="user-1")
        sandbox = cls.provider.get(cls.sandbox_id)
        assert sandbox is not None
        cls.sandbox = sandbox

    @classmethod
    def tearDownClass(cls) -> None:
        if hasattr(cls, "provider"):
            for sid in list(cls.provider._objects):
                cls.provider.delete(sid)

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
        out = self.sandbox.execute_command("echo started; sleep 30 & sleep 30; echo never", timeout=1)
        # LocalSandbox's layout: the output, a newline, the notice.
        self.assertTrue(out.startswith("started\n\nCommand timed out after 1 second and was terminated."), out)
        self.assertNotIn("never", out)
        self.assertNotIn("Exit Code", out)  # DeerFlow's notice stands alone

    def test_write_read_update_download_round_trip(self) -> None:
        path = "/workspace/rt/notes.txt"
        self.sandbox.write_file(path, "one\ntwo\n")
        self.sandbox.write_file(path, "three\n", append=True)
        self.assertEqual(self.sandbox.read_file(path), "one\ntwo\nthree\n")
        self.assertEqual(self.sandbox.read_file(path, start_line=2, end_line=3), "two\nthree")
        blob = bytes(range(256)) * 4
        self.sandbox.update_file("/mnt/user-data/outputs/rt/blob.bin", blob)
        self.assertEqual(self.sandbox.download_file("/mnt/user-data/outputs/rt/blob.bin"), blob)

    def test_missing_and_wrong_kind_paths(self) -> None:
        with self.assertRaises(FileNotFoundError):
            self.sandbox.list_dir("/workspace/no-such-dir")
        with self.assertRaises(FileNotFoundError):
            self.sandbox.read_file("/workspace/no-such-file")
        with self.assertRaises(FileNotFoundError):
            self.sandbox.download_file("/mnt/user-data/no-such-file")
        self.sandbox.write_file("/workspace/kind/file.txt", "x")
        with self.assertRaises(OSError):
            self.sandbox.list_dir("/workspace/kind/file.txt")
        with self.assertRaises(OSError):
            self.sandbox.write_file("/workspace/kind", "replaces a directory?")
        self.assertEqual(self.sandbox.read_file("/workspace/kind/file.txt"), "x")

    def test_download_outside_the_prefix_or_via_symlink_is_permission_error(self) -> None:
        with self.assertRaises(PermissionError):
            self.sandbox.download_file("/etc/passwd")
        self.sandbox.execute_command("mkdir -p /mnt/user-data/links && ln -sf /etc/passwd /mnt/user-data/links/out")
        with self.assertRaises(PermissionError):
            self.sandbox.download_file("/mnt/user-data/links/out")

    def test_edge_names_round_trip_through_list_dir_glob_grep_read(self) -> None:
        root = "/mnt/user-data/outputs/edge"
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
        self.assertIs(self.provider.get(sid), sandbox)  # as LocalSandbox: the same instance
        self.assertEqual(self.provider.acquire("thread-release", user_id="user-2"), sid)
        again = self.provider.get(sid)
        self.assertIs(again, sandbox)  # one object per session
        self.assertEqual(again.read_file("/workspace/kept.txt"), "still here")
        # Another user's same thread is another guest.
        other = self.provider.acquire("thread-release", user_id="user-3")
        self.assertNotEqual(other, sid)
        self.provider.delete(other)

    def test_an_object_held_across_a_release_keeps_working(self) -> None:
        """As DeerFlow's LocalSandbox (its release keeps the instance usable)."""
        assert MODULE.server is not None
        sid = self.provider.acquire("thread-held", user_id="user-5")
        held = self.provider.get(sid)
        assert held is not None
        held.write_file("/mnt/user-data/workspace/a.txt", "before")
        self.provider.release(sid)
        status, body = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(json.loads(body)["state"], "warm", body)
        self.assertEqual(held.read_file("/mnt/user-data/workspace/a.txt"), "before")
        self.assertEqual(held.execute_command("printf after"), "after")
        status, body = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(json.loads(body)["state"], "active", body)  # acquired again for the call
        self.assertIs(self.provider.get(sid), held)
        self.assertIsNone(self.provider.get("gf-b-no-such-session"))
        # A deleted session stays deleted: the held object's calls fail.
        self.provider.delete(sid)
        self.assertTrue(held.execute_command("true").startswith("Error: "))
        with self.assertRaises(FileNotFoundError):
            held.read_file("/mnt/user-data/workspace/a.txt")

    def test_reset_and_shutdown_release_delete_deletes(self) -> None:
        assert MODULE.server is not None
        p = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config={})
        sid = p.acquire("thread-reset", user_id="user-4")
        p.reset()
        status, body = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["state"], "warm")
        self.assertEqual(p.acquire("thread-reset", user_id="user-4"), sid)
        p.shutdown()  # DeerFlow's app stop: the thread's guest and files stay
        status, body = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(json.loads(body)["state"], "warm", body)
        p.delete(sid)
        status, _ = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(status, 404)


class FileErrorTest(unittest.TestCase):
    """File errors typed as DeerFlow's sandboxes raise them, never a tool's traceback."""

    @classmethod
    def setUpClass(cls) -> None:
        assert MODULE.server is not None
        cls.provider = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config={})
        sandbox = cls.provider.get(cls.provider.acquire("thread-errors", user_id="user-e"))
        assert sandbox is not None
        cls.sandbox = sandbox

    @classmethod
    def tearDownClass(cls) -> None:
        for sid in list(cls.provider._objects):
            cls.provider.delete(sid)

    def test_write_through_a_dangling_link_is_not_found(self) -> None:
        self.sandbox.execute_command("mkdir -p /mnt/user-data/workspace && ln -sfn /nowhere/at/all /mnt/user-data/workspace/dangling")
        for path in ("/mnt/user-data/workspace/dangling", "/mnt/user-data/workspace/dangling/below.txt"):
            with self.subTest(path=path), self.assertRaises(FileNotFoundError) as caught:
                self.sandbox.write_file(path, "x")
            self.assertIn("symlink leads nowhere", str(caught.exception))
            self.assertNotIn("Traceback", str(caught.exception))
        self.assertIn("No such file", self.sandbox.execute_command("ls /nowhere"))

    def test_write_to_a_read_only_place_is_permission_error(self) -> None:
        # /usr is the image's read-only mount (EROFS, as LocalSandbox raises for a read-only
        # mount); /proc/version is not writable (EACCES).
        for path, code in (("/usr/lib/new-file", errno.EROFS), ("/usr/new-dir/file", errno.EROFS), ("/proc/version", errno.EACCES)):
            with self.subTest(path=path):
                with self.assertRaises(PermissionError) as caught:
                    self.sandbox.update_file(path, b"x")
                self.assertEqual(caught.exception.errno, code)
                message = str(caught.exception)
                self.assertNotIn("Traceback", message)
                self.assertEqual(len(message.splitlines()), 1, message)

    def test_the_staging_directory_is_not_writable(self) -> None:
        for path in ("/workspace/.gf-session/planted", "/workspace/.gf-session"):
            with self.subTest(path=path), self.assertRaises(PermissionError) as caught:
                self.sandbox.write_file(path, "x")
            self.assertIn("staging directory", str(caught.exception))
        # Nor through a link to it.
        self.sandbox.execute_command("ln -sfn /workspace/.gf-session /mnt/user-data/stage-link")
        with self.assertRaises(PermissionError):
            self.sandbox.write_file("/mnt/user-data/stage-link/planted", "x")
        self.assertEqual(self.sandbox.execute_command("ls /workspace/.gf-session/planted 2>/dev/null || echo absent"), "absent\n")


class HonouredOnServerTest(unittest.TestCase):
    """The honoured keys with real guests."""

    def provider(self, **keys: object) -> GuestflowSandboxProvider:
        assert MODULE.server is not None
        provider = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config=_section(**keys))
        self.addCleanup(self._delete_all, provider)
        return provider

    @staticmethod
    def _delete_all(provider: GuestflowSandboxProvider) -> None:
        for sid in list(provider._objects):
            provider.delete(sid)

    def test_environment_reaches_every_command(self) -> None:
        provider = self.provider(environment={"NODE_ENV": "production", "DEBUG": "false"})
        sandbox = provider.get(provider.acquire("env-thread", user_id="cfg"))
        assert sandbox is not None
        self.assertEqual(sandbox.execute_command('printf "%s %s" "$NODE_ENV" "$DEBUG"'), "production false")
        # The call's env is layered over it, for that call only.
        self.assertEqual(sandbox.execute_command('printf "%s"  "$DEBUG"', env={"DEBUG": "true"}), "true")
        self.assertEqual(sandbox.execute_command('printf "%s" "$DEBUG"'), "false")

    def test_image_is_the_sessions(self) -> None:
        from langflow_guestflow._http import GuestflowError

        assert MODULE.server is not None
        sid = self.provider(image="debian:12").acquire("image-thread", user_id="cfg")
        status, body = MODULE.server.get("/v1/sessions/" + sid)
        self.assertEqual(json.loads(body)["sandbox"]["image"], "debian:12", body)
        with self.assertRaises(GuestflowError) as caught:
            self.provider(image="no-such-image:1").acquire("image-thread-2", user_id="cfg")
        self.assertIn("no-such-image:1", caught.exception.message)

    def test_allow_network_is_the_sessions(self) -> None:
        assert MODULE.server is not None
        for allow in (False, True):
            with self.subTest(allow_network=allow):
                sid = self.provider(allow_network=allow).acquire(f"net-{allow}", user_id="cfg")
                status, body = MODULE.server.get("/v1/sessions/" + sid)
                self.assertEqual(status, 200, body)
                self.assertIs(json.loads(body)["sandbox"]["allow_network"], allow)

    def test_bash_command_timeout_bounds_a_command_given_no_timeout(self) -> None:
        provider = self.provider(bash_command_timeout=1)
        sandbox = provider.get(provider.acquire("timeout-thread", user_id="cfg"))
        assert sandbox is not None
        started = time.monotonic()
        out = sandbox.execute_command("sleep 20; echo never")
        self.assertLess(time.monotonic() - started, 15)
        self.assertIn("Command timed out after 1 second and was terminated.", out)
        self.assertNotIn("never", out)

    def test_replicas_bounds_this_providers_active_sessions_reject(self) -> None:
        provider = self.provider(replicas=1, overflow_policy="reject")
        first = provider.acquire("rep-1", user_id="cfg")
        self.assertEqual(provider.acquire("rep-1", user_id="cfg"), first)  # the same thread holds no new slot
        started = time.monotonic()
        with self.assertRaises(SandboxCapacityExceededError) as caught:
            provider.acquire("rep-2", user_id="cfg")
        self.assertLess(time.monotonic() - started, 1.0)  # reject: at once
        self.assertEqual((caught.exception.replicas, caught.exception.active), (1, 1))
        provider.release(first)
        second = provider.acquire("rep-2", user_id="cfg")
        self.assertNotEqual(second, first)

    def test_replicas_with_wait_waits_acquire_timeout_then_gives_up_or_gets_the_slot(self) -> None:
        provider = self.provider(replicas=1, overflow_policy="wait", acquire_timeout=2)
        first = provider.acquire("wait-1", user_id="cfg")
        started = time.monotonic()
        with self.assertRaises(SandboxCapacityExceededError):
            provider.acquire("wait-2", user_id="cfg")
        self.assertGreaterEqual(time.monotonic() - started, 2.0)
        # A release while another acquire waits gives it the slot.
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.append(provider.acquire("wait-2", user_id="cfg")))
        waiter.start()
        provider.release(first)
        waiter.join(timeout=60)
        self.assertFalse(waiter.is_alive())
        self.assertEqual(len(got), 1)
        self.assertNotEqual(got[0], first)


    # Python in the guest touching N MiB: it fits the guest's memory limit or is OOM-killed.
    @staticmethod
    def _fill(mib: int) -> str:
        return f"python3 -c \"b = bytearray({mib} << 20); print('filled')\""

    def test_memory_mib_is_the_guests_memory_limit(self) -> None:
        big = self.provider(memory_mib=1024)
        sandbox = big.get(big.acquire("mem-1024", user_id="cfg"))
        assert sandbox is not None
        self.assertEqual(sandbox.execute_command(self._fill(600)), "filled\n")
        # The server's own size (256 MiB here): the same fill is killed.
        default = self.provider()
        small = default.get(default.acquire("mem-default", user_id="cfg"))
        assert small is not None
        out = small.execute_command(self._fill(600))
        self.assertNotIn("filled", out)
        self.assertIn("Exit Code: ", out)

    def test_cpus_gets_a_shape_with_that_many_vcpus(self) -> None:
        from langflow_guestflow._http import GuestflowError

        # cpus 2: the smallest shape with 2 vCPUs (s-2vcpu-2gb), whose 2 GiB a 1500 MiB fill fits.
        provider = self.provider(cpus=2)
        sandbox = provider.get(provider.acquire("cpus-2", user_id="cfg"))
        assert sandbox is not None
        self.assertEqual(sandbox.execute_command(self._fill(1500)), "filled\n")
        with self.assertRaises(GuestflowError) as caught:
            self.provider(cpus=64).acquire("cpus-64", user_id="cfg")
        self.assertEqual(caught.exception.status, 400)
        self.assertIn("cpus: 64 is more than the largest shape has", caught.exception.message)
        with self.assertRaises(GuestflowError) as caught:
            self.provider(memory_mib=10**6).acquire("mem-huge", user_id="cfg")
        self.assertIn("memory_mib: 1000000 is more than the largest shape has", caught.exception.message)

    def test_idle_timeout_stops_a_released_guest_after_its_seconds(self) -> None:
        assert MODULE.server is not None

        def state(sid: str) -> str:
            status, body = MODULE.server.get("/v1/sessions/" + sid)
            self.assertEqual(status, 200, body)
            return str(json.loads(body)["state"])

        # Released first, with the server's own timeout (600 s): stays warm meanwhile.
        server = self.provider()
        kept = server.acquire("idle-server", user_id="cfg")
        server.release(kept)
        quick = self.provider(idle_timeout=1)
        sid = quick.acquire("idle-1", user_id="cfg")
        released = time.monotonic()
        quick.release(sid)
        deadline = time.monotonic() + 30
        while state(sid) != "stopped" and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(state(sid), "stopped")
        self.assertGreaterEqual(time.monotonic() - released, 1.0)
        self.assertEqual(state(kept), "warm")
        # The next acquire wakes it.
        sandbox = quick.get(quick.acquire("idle-1", user_id="cfg"))
        assert sandbox is not None
        self.assertEqual(state(sid), "active")


class ThreadDirectoryTest(unittest.TestCase):
    """DeerFlow's layout on a fresh thread, its ``mounts``, and its thread directory synced
    as its remote providers sync it (uploads in on acquire, outputs back on release)."""

    def provider(self, **keys: object) -> GuestflowSandboxProvider:
        assert MODULE.server is not None
        provider = GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config=_section(**keys))
        self.addCleanup(lambda: [provider.delete(sid) for sid in list(provider._objects)])
        return provider

    def test_a_fresh_threads_first_command_finds_deerflows_layout(self) -> None:
        provider = self.provider()
        sandbox = provider.get(provider.acquire("fresh-thread", user_id="layout"))
        assert sandbox is not None
        # DeerFlow's bash tool prefixes every command with this cd.
        self.assertEqual(sandbox.execute_command("cd /mnt/user-data/workspace; pwd"), "/mnt/user-data/workspace\n")
        self.assertEqual(sorted(sandbox.list_dir("/mnt/user-data", max_depth=1)), ["/mnt/user-data/outputs/", "/mnt/user-data/uploads/", "/mnt/user-data/workspace/"])
        # DeerFlow's other two paths: skills (read-only) and the ACP workspace (writable).
        self.assertEqual(sandbox.execute_command("test -d /mnt/skills && test -d /mnt/acp-workspace && touch /mnt/acp-workspace/x && echo both"), "both\n")
        with self.assertRaises(PermissionError):
            sandbox.write_file("/mnt/skills/planted.md", "x")

    def test_uploads_in_on_acquire_outputs_back_on_release(self) -> None:
        provider = self.provider()
        thread_dir = os.path.join(MODULE.home.path, "users", "sync-user", "threads", "sync-thread", "user-data")
        os.makedirs(os.path.join(thread_dir, "uploads"), exist_ok=True)
        with open(os.path.join(thread_dir, "uploads", "brief.txt"), "wb") as f:
            f.write(b"from the gateway\n")
        sid = provider.acquire("sync-thread", user_id="sync-user")
        sandbox = provider.get(sid)
        assert sandbox is not None
        self.assertEqual(sandbox.read_file("/mnt/user-data/uploads/brief.txt"), "from the gateway\n")
        sandbox.update_file("/mnt/user-data/outputs/report.md", b"# done\n")
        sandbox.update_file("/mnt/user-data/outputs/charts/one.bin", bytes(range(256)))
        provider.release(sid)
        with open(os.path.join(thread_dir, "outputs", "report.md"), "rb") as f:
            self.assertEqual(f.read(), b"# done\n")
        with open(os.path.join(thread_dir, "outputs", "charts", "one.bin"), "rb") as f:
            self.assertEqual(f.read(), bytes(range(256)))

    def test_mounts_from_the_config(self) -> None:
        project = os.path.join(MODULE.home.path, "project")
        os.makedirs(project, exist_ok=True)
        with open(os.path.join(project, "README"), "w", encoding="utf-8") as f:
            f.write("mounted\n")
        provider = self.provider(mounts=[{"host_path": project, "container_path": "/mnt/project", "read_only": True}])
        sandbox = provider.get(provider.acquire("mount-thread", user_id="mounts"))
        assert sandbox is not None
        self.assertEqual(sandbox.read_file("/mnt/project/README"), "mounted\n")
        with self.assertRaises(PermissionError) as caught:
            sandbox.write_file("/mnt/project/new.txt", "x")
        self.assertEqual(caught.exception.errno, errno.EROFS)
        self.assertFalse(os.path.exists(os.path.join(project, "new.txt")))

    def test_a_mount_outside_the_servers_roots_is_refused(self) -> None:
        from langflow_guestflow._http import GuestflowError

        provider = self.provider(mounts=[{"host_path": "/etc", "container_path": "/mnt/etc", "read_only": True}])
        with self.assertRaises(GuestflowError) as caught:
            provider.acquire("outside-thread", user_id="mounts")
        self.assertIn("GUESTFLOW_SESSION_MOUNT_ROOTS", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
