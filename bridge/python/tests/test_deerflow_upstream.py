"""DeerFlow's own sandbox tests, rewritten against a real ``guestflow serve`` with the same
assertions (bytedance/deer-flow ``backend/tests``, the revision in
stand_in/deerflow/SOURCES.md). Each class names the file it follows; each test the test.
Where DeerFlow's test builds its tree on the host, this one builds it in the guest through
the sandbox. Tests of DeerFlow internals (LocalSandbox's caches, LRU bound, Windows paths,
mocked SDK calls) have no counterpart here."""

from __future__ import annotations

import errno
import re
import shlex
import threading
import time
import unittest

from langflow_guestflow.deerflow import GuestflowSandbox, GuestflowSandboxProvider
from tests._deerflow_server import DeerFlowServer

# DeerFlow's home as the server's mount root, its download prefix, and a small download cap
# for the EFBIG case.
DOWNLOAD_CAP = 1 << 20
MODULE = DeerFlowServer(extra_env={"GUESTFLOW_SESSION_REPLICAS": "12", "GUESTFLOW_DOWNLOAD_PREFIX": "/mnt/user-data", "GUESTFLOW_DOWNLOAD_CAP_BYTES": str(DOWNLOAD_CAP)})


def setUpModule() -> None:  # noqa: N802
    MODULE.start()


def tearDownModule() -> None:  # noqa: N802
    MODULE.stop()


def _provider() -> GuestflowSandboxProvider:
    assert MODULE.server is not None
    return GuestflowSandboxProvider(url=MODULE.server.url, token=MODULE.server.token, config={})


class _WithProvider(unittest.TestCase):
    provider: GuestflowSandboxProvider

    @classmethod
    def setUpClass(cls) -> None:
        cls.provider = _provider()

    @classmethod
    def tearDownClass(cls) -> None:
        for sid in list(cls.provider._objects):
            cls.provider.delete(sid)

    def sandbox(self, thread: str, user: str = "default") -> GuestflowSandbox:
        sandbox = self.provider.get(self.provider.acquire(thread, user_id=user))
        assert sandbox is not None
        return sandbox

    def fresh(self, name: str) -> GuestflowSandbox:
        """The class's sandbox, its /mnt/user-data emptied of the tests before (``name``
        says whose tree it is in a failure's output)."""
        sandbox = self.sandbox(f"{type(self).__name__}-tree")
        sandbox.execute_command("mkdir -p /mnt/user-data && find /mnt/user-data -mindepth 1 -delete; mkdir -p /mnt/user-data/workspace /mnt/user-data/uploads /mnt/user-data/outputs")
        return sandbox


class VirtualPathContractTest(_WithProvider):
    """test_local_sandbox_virtual_path_contract.py."""

    def test_acquire_with_thread_id_returns_per_thread_id(self) -> None:
        self.assertEqual(self.provider.acquire("alpha", user_id="default"), self.provider.acquire("alpha", user_id="default"))
        self.assertNotEqual(self.provider.acquire("alpha", user_id="default"), self.provider.acquire("beta", user_id="default"))

    def test_acquire_with_thread_id_uses_uniform_user_scoped_id(self) -> None:
        self.assertNotEqual(self.provider.acquire("alpha", user_id="alice"), self.provider.acquire("alpha", user_id="default"))

    def test_write_then_read_via_public_api_with_virtual_path(self) -> None:
        sbx = self.sandbox("alpha")
        sbx.write_file("/mnt/user-data/workspace/hello.txt", "hi there")
        self.assertEqual(sbx.read_file("/mnt/user-data/workspace/hello.txt"), "hi there")

    def test_list_dir_via_public_api_with_virtual_path(self) -> None:
        sbx = self.sandbox("alpha")
        sbx.write_file("/mnt/user-data/workspace/foo.txt", "x")
        entries = sbx.list_dir("/mnt/user-data/workspace")
        self.assertTrue(any("/mnt/user-data/workspace/foo.txt" in e for e in entries), entries)

    def test_execute_command_with_virtual_path(self) -> None:
        sbx = self.sandbox("alpha")
        sbx.write_file("/mnt/user-data/uploads/note.txt", "payload")
        self.assertIn("note.txt", sbx.execute_command("ls /mnt/user-data/uploads"))

    def test_glob_with_virtual_path(self) -> None:
        sbx = self.sandbox("alpha")
        sbx.write_file("/mnt/user-data/outputs/report.md", "# r")
        matches, _ = sbx.glob("/mnt/user-data/outputs", "*.md")
        self.assertTrue(any(m.endswith("/mnt/user-data/outputs/report.md") for m in matches), matches)

    def test_grep_with_virtual_path(self) -> None:
        sbx = self.sandbox("alpha")
        sbx.write_file("/mnt/user-data/workspace/findme.txt", "needle line\nother line")
        matches, _ = sbx.grep("/mnt/user-data/workspace", "needle", literal=True)
        self.assertTrue(matches)
        self.assertTrue(matches[0].path.endswith("/mnt/user-data/workspace/findme.txt"))

    def test_execute_command_lists_aggregate_user_data_root(self) -> None:
        sbx = self.sandbox("alpha")
        for sub in ("workspace", "uploads", "outputs"):
            sbx.write_file(f"/mnt/user-data/{sub}/.keep", "")
        output = sbx.execute_command("ls /mnt/user-data")
        for sub in ("workspace", "uploads", "outputs"):
            self.assertIn(sub, output)

    def test_list_dir_on_user_data_root_does_not_duplicate_subdir_mounts(self) -> None:
        sbx = self.sandbox("alpha")
        for sub in ("workspace", "uploads", "outputs"):
            sbx.write_file(f"/mnt/user-data/{sub}/.keep", "")
        entries = sbx.list_dir("/mnt/user-data")
        for sub in ("workspace", "uploads", "outputs"):
            self.assertEqual(len([e for e in entries if e.rstrip("/") == f"/mnt/user-data/{sub}"]), 1, entries)

    def test_update_file_with_virtual_path_for_remote_sync_scenario(self) -> None:
        sbx = self.sandbox("alpha")
        sbx.update_file("/mnt/user-data/uploads/blob.bin", b"\x00\x01\x02binary")
        self.assertTrue(sbx.read_file("/mnt/user-data/uploads/blob.bin").startswith("\x00\x01\x02"))

    def test_two_threads_get_distinct_sandboxes(self) -> None:
        sid_a, sid_b = self.provider.acquire("alpha"), self.provider.acquire("beta")
        self.assertNotEqual(sid_a, sid_b)
        self.assertIsNot(self.provider.get(sid_a), self.provider.get(sid_b))

    def test_per_thread_user_data_mapping_isolated(self) -> None:
        sbx_a, sbx_b = self.sandbox("alpha"), self.sandbox("beta")
        sbx_a.write_file("/mnt/user-data/workspace/secret.txt", "alpha-only")
        with self.assertRaises(FileNotFoundError):
            sbx_b.read_file("/mnt/user-data/workspace/secret.txt")

    def test_same_thread_different_users_are_isolated(self) -> None:
        sid_alice = self.provider.acquire("alpha", user_id="alice")
        sid_bob = self.provider.acquire("alpha", user_id="bob")
        self.assertNotEqual(sid_alice, sid_bob)
        sbx_alice, sbx_bob = self.provider.get(sid_alice), self.provider.get(sid_bob)
        assert sbx_alice is not None and sbx_bob is not None
        self.assertIsNot(sbx_alice, sbx_bob)
        sbx_alice.write_file("/mnt/user-data/outputs/report.md", "alice-only")
        with self.assertRaises(FileNotFoundError):
            sbx_bob.read_file("/mnt/user-data/outputs/report.md")

    def test_get_returns_cached_instance_for_known_id(self) -> None:
        sid = self.provider.acquire("alpha")
        self.assertIs(self.provider.get(sid), self.provider.get(sid))

    def test_get_unknown_id_returns_none(self) -> None:
        self.assertIsNone(self.provider.get("gf-b-nonexistent"))

    def test_release_keeps_instance_available(self) -> None:
        # DeerFlow: test_release_is_noop_keeps_instance_available.
        sid = self.provider.acquire("gamma")
        before = self.provider.get(sid)
        self.provider.release(sid)
        after = self.provider.get(sid)
        self.assertIs(before, after)
        assert after is not None
        after.write_file("/mnt/user-data/workspace/after-release.txt", "ok")  # and it works
        self.assertEqual(after.read_file("/mnt/user-data/workspace/after-release.txt"), "ok")

    def test_concurrent_acquire_same_thread_yields_single_instance(self) -> None:
        barrier = threading.Barrier(8)
        results: list[str] = []
        lock = threading.Lock()

        def racer() -> None:
            barrier.wait()
            sid = self.provider.acquire("racing", user_id="default")
            with lock:
                results.append(sid)

        threads = [threading.Thread(target=racer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(len(results), 8)
        self.assertEqual(len(set(results)), 1, results)
        self.assertEqual(len({id(self.provider.get(results[0])) for _ in range(3)}), 1)

    def test_concurrent_acquire_distinct_threads_yields_distinct_instances(self) -> None:
        barrier = threading.Barrier(3)
        sids: dict[str, str] = {}
        lock = threading.Lock()

        def racer(name: str) -> None:
            barrier.wait()
            sid = self.provider.acquire(name, user_id="default")
            with lock:
                sids[name] = sid

        threads = [threading.Thread(target=racer, args=(f"t{i}",)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(sorted(sids), ["t0", "t1", "t2"])
        self.assertEqual(len(set(sids.values())), 3)


class SearchToolsTest(_WithProvider):
    """test_sandbox_search_tools.py, at the Sandbox API the tools call."""

    def test_glob_returns_virtual_paths_and_ignores_common_dirs(self) -> None:
        sbx = self.fresh("glob")
        sbx.write_file("/mnt/user-data/workspace/app.py", "print('hi')\n")
        sbx.write_file("/mnt/user-data/workspace/pkg/util.py", "print('util')\n")
        sbx.write_file("/mnt/user-data/workspace/node_modules/skip.py", "ignored\n")
        matches, truncated = sbx.glob("/mnt/user-data/workspace", "**/*.py")
        self.assertIn("/mnt/user-data/workspace/app.py", matches)
        self.assertIn("/mnt/user-data/workspace/pkg/util.py", matches)
        self.assertFalse(any("node_modules" in m for m in matches), matches)
        self.assertFalse(truncated)

    def test_grep_filters_by_glob_and_skips_binary_files(self) -> None:
        sbx = self.fresh("grep-glob")
        sbx.write_file("/mnt/user-data/workspace/main.py", "TODO = 'ship it'\nprint(TODO)\n")
        sbx.write_file("/mnt/user-data/workspace/notes.txt", "TODO in txt should be filtered\n")
        sbx.update_file("/mnt/user-data/workspace/image.bin", b"\0binary TODO")
        matches, _ = sbx.grep("/mnt/user-data/workspace", "TODO", glob="**/*.py")
        self.assertIn(("/mnt/user-data/workspace/main.py", 1, "TODO = 'ship it'"), [(m.path, m.line_number, m.line) for m in matches])
        self.assertFalse(any("notes.txt" in m.path or "image.bin" in m.path for m in matches))

    def test_grep_accepts_single_file_path(self) -> None:
        sbx = self.fresh("grep-file")
        sbx.write_file("/mnt/user-data/uploads/report.md", "Revenue grew 20%\n")
        matches, _ = sbx.grep("/mnt/user-data/uploads/report.md", "Revenue")
        self.assertEqual([(m.path, m.line_number, m.line) for m in matches], [("/mnt/user-data/uploads/report.md", 1, "Revenue grew 20%")])
        # With a basename glob too (test_e2b_sandbox_provider.py: test_grep_single_file_path_with_matching_glob).
        self.assertEqual(len(sbx.grep("/mnt/user-data/uploads/report.md", "Revenue", glob="*.md")[0]), 1)

    def test_grep_truncates_results(self) -> None:
        sbx = self.fresh("grep-cap")
        sbx.write_file("/mnt/user-data/workspace/main.py", "TODO one\nTODO two\nTODO three\n")
        matches, truncated = sbx.grep("/mnt/user-data/workspace", "TODO", max_results=2)
        self.assertEqual([m.line for m in matches], ["TODO one", "TODO two"])
        self.assertTrue(truncated)

    def test_glob_include_dirs_filters_nested_ignored_paths(self) -> None:
        sbx = self.fresh("glob-dirs")
        sbx.write_file("/mnt/user-data/workspace/src/main.py", "x\n")
        sbx.execute_command("mkdir -p /mnt/user-data/workspace/node_modules/lib")
        matches, truncated = sbx.glob("/mnt/user-data/workspace", "**", include_dirs=True)
        self.assertIn("/mnt/user-data/workspace/src", matches)
        self.assertFalse(any("node_modules" in m for m in matches), matches)
        self.assertFalse(truncated)

    def test_glob_include_dirs_enforces_root_boundary(self) -> None:
        sbx = self.fresh("glob-root")
        sbx.execute_command("mkdir -p /mnt/user-data/workspace/src /mnt/user-data/workspace2/src2")
        matches, _ = sbx.glob("/mnt/user-data/workspace", "**", include_dirs=True)
        self.assertEqual(matches, ["/mnt/user-data/workspace/src"])

    def test_grep_literal_mode(self) -> None:
        sbx = self.fresh("grep-literal")
        sbx.write_file("/mnt/user-data/workspace/file.py", "price = (a+b)\nresult = a+b\n")
        lines = [m.line for m in sbx.grep("/mnt/user-data/workspace", "(a+b)", literal=True)[0]]
        self.assertIn("price = (a+b)", lines)
        self.assertNotIn("result = a+b", lines)

    def test_grep_case_sensitive(self) -> None:
        sbx = self.fresh("grep-case")
        sbx.write_file("/mnt/user-data/workspace/file.py", "TODO: fix\ntodo: also fix\n")
        lines = [m.line for m in sbx.grep("/mnt/user-data/workspace", "TODO", case_sensitive=True)[0]]
        self.assertIn("TODO: fix", lines)
        self.assertNotIn("todo: also fix", lines)

    def test_grep_invalid_regex_raises(self) -> None:
        with self.assertRaises(re.error):
            self.sandbox("search").grep("/mnt/user-data/workspace", "[invalid")

    def test_grep_drops_matches_outside_requested_root(self) -> None:
        sbx = self.fresh("grep-root")
        sbx.write_file("/mnt/user-data/workspace/app.py", "TODO = True\n")
        sbx.write_file("/mnt/user-data/workspace-sibling/leak.py", "TODO = False\n")
        matches, truncated = sbx.grep("/mnt/user-data/workspace", "TODO")
        self.assertEqual([(m.path, m.line_number, m.line) for m in matches], [("/mnt/user-data/workspace/app.py", 1, "TODO = True")])
        self.assertFalse(truncated)

    def test_glob_on_a_file_raises_not_a_directory(self) -> None:
        # test_find_glob_matches_raises_not_a_directory.
        sbx = self.fresh("glob-file")
        sbx.write_file("/mnt/user-data/workspace/file.txt", "x\n")
        with self.assertRaises(NotADirectoryError):
            sbx.glob("/mnt/user-data/workspace/file.txt", "**/*.py")

    def test_grep_skips_symlink_outside_root(self) -> None:
        sbx = self.fresh("grep-link")
        sbx.write_file("/mnt/user-data/outside.txt", "TODO outside\n")
        sbx.execute_command("ln -s /mnt/user-data/outside.txt /mnt/user-data/workspace/outside-link.txt")
        self.assertEqual(sbx.grep("/mnt/user-data/workspace", "TODO"), ([], False))

    def test_glob_honors_smaller_requested_max_results(self) -> None:
        sbx = self.fresh("glob-cap")
        for name in ("a", "b", "c"):
            sbx.write_file(f"/mnt/user-data/workspace/{name}.py", f"print('{name}')\n")
        matches, truncated = sbx.glob("/mnt/user-data/workspace", "**/*.py", max_results=2)
        self.assertEqual(len(matches), 2)
        self.assertTrue(truncated)

    def test_ls_returns_empty_for_empty_directory(self) -> None:
        self.assertEqual(self.fresh("ls-empty").list_dir("/mnt/user-data/workspace"), [])

    def test_ls_filters_upload_staging_files(self) -> None:
        sbx = self.fresh("ls-staging")
        sbx.write_file("/mnt/user-data/uploads/report.txt", "ready\n")
        sbx.write_file("/mnt/user-data/uploads/.upload-active.part", "partial\n")
        sbx.write_file("/mnt/user-data/uploads/.upload-note.txt", "intentional\n")
        entries = sbx.list_dir("/mnt/user-data/uploads")
        self.assertIn("/mnt/user-data/uploads/report.txt", entries)
        self.assertIn("/mnt/user-data/uploads/.upload-note.txt", entries)
        self.assertFalse(any(".upload-active.part" in e for e in entries), entries)

    def test_grep_scoped_glob_excludes_unrelated_directory_matches(self) -> None:
        # test_e2b_sandbox_provider.py, the grep() glob cases.
        sbx = self.fresh("grep-scoped")
        sbx.write_file("/mnt/user-data/workspace/other_dir/unrelated.js", "console.log('needle in other_dir');\n")
        sbx.write_file("/mnt/user-data/workspace/src/app.js", "console.log('needle in src');\n")
        sbx.write_file("/mnt/user-data/workspace/other_dir/deep/mod.py", "needle in a deeply nested file\n")
        sbx.write_file("/mnt/user-data/workspace/src/app.py", "needle in a python file too\n")
        paths = lambda glob: sorted(m.path for m in sbx.grep("/mnt/user-data/workspace", "needle", glob=glob)[0])  # noqa: E731
        self.assertEqual(paths("src/*.js"), ["/mnt/user-data/workspace/src/app.js"])
        self.assertEqual(paths("*.py"), ["/mnt/user-data/workspace/other_dir/deep/mod.py", "/mnt/user-data/workspace/src/app.py"])
        self.assertEqual(len(paths(None)), 4)  # type: ignore[arg-type]


class LocalListDirSymlinkTest(_WithProvider):
    """test_local_sandbox_provider_mounts.py, TestSymlinkEscapes' list_dir cases."""

    def test_list_dir_does_not_follow_symlink_escape(self) -> None:
        sbx = self.fresh("escape")
        sbx.write_file("/mnt/user-data/outside/secret.txt", "secret")
        sbx.write_file("/mnt/user-data/workspace/visible.txt", "visible")
        sbx.execute_command("ln -s /mnt/user-data/outside /mnt/user-data/workspace/escape")
        entries = sbx.list_dir("/mnt/user-data/workspace", max_depth=2)
        self.assertIn("/mnt/user-data/workspace/visible.txt", entries)
        self.assertTrue(all("secret.txt" not in e for e in entries), entries)
        self.assertTrue(all("outside" not in e for e in entries), entries)

    def test_list_dir_formats_internal_directory_symlink_like_directory(self) -> None:
        sbx = self.fresh("internal-link")
        sbx.execute_command("mkdir -p /mnt/user-data/workspace/nested/linked-dir && ln -s /mnt/user-data/workspace/nested/linked-dir /mnt/user-data/workspace/dir-link")
        entries = sbx.list_dir("/mnt/user-data/workspace", max_depth=1)
        self.assertIn("/mnt/user-data/workspace/nested/", entries)
        self.assertNotIn("/mnt/user-data/workspace/dir-link", entries)
        self.assertIn("/mnt/user-data/workspace/nested/linked-dir/", sbx.list_dir("/mnt/user-data/workspace", max_depth=2))


class CommandTimeoutTest(_WithProvider):
    """test_local_sandbox_command_timeout.py."""

    def test_backgrounded_process_returns_promptly(self) -> None:
        sbx = self.sandbox("commands")
        start = time.monotonic()
        output = sbx.execute_command("sleep 5 & echo serving", timeout=10)
        elapsed = time.monotonic() - start
        self.assertLess(elapsed, 3, f"expected prompt return, took {elapsed:.1f}s")
        self.assertIn("serving", output)

    def test_backgrounded_process_does_not_inherit_deleted_temp_capture(self) -> None:
        sbx = self.sandbox("commands")
        marker = "/mnt/user-data/workspace/fd1"
        script = f"import os, pathlib, time; pathlib.Path({marker!r}).write_text(os.readlink('/proc/self/fd/1')); time.sleep(2)"
        output = sbx.execute_command(f"mkdir -p /mnt/user-data/workspace; rm -f {marker}; python3 -c {shlex.quote(script)} & echo launched", timeout=10)
        self.assertIn("launched", output)
        # The guest polls for the marker, with a deadline (DeerFlow's test: 50 x 0.1 s).
        seen = sbx.execute_command(f"for i in $(seq 50); do [ -s {marker} ] && break; sleep 0.1; done; cat {marker}")
        self.assertNotIn("Exit Code", seen, "the backgrounded process never wrote its marker")
        self.assertRegex(seen, r"^(pipe|socket):\[\d+\]$|^/", seen)  # where its stdout went
        self.assertNotIn(" (deleted)", seen)

    def test_foreground_blocking_command_times_out_with_notice(self) -> None:
        sbx = self.sandbox("commands")
        start = time.monotonic()
        output = sbx.execute_command("while true; do sleep 0.2; done", timeout=1)
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn("timed out", output.lower())

    def test_timeout_notice_formats_fractional_and_singular_timeouts(self) -> None:
        sbx = self.sandbox("commands")
        self.assertIn("after 1.5 seconds", sbx.execute_command("while true; do sleep 0.2; done", timeout=1.5))
        self.assertIn("after 1 second", sbx.execute_command("while true; do sleep 0.2; done", timeout=1))

    def test_foreground_timeout_kills_whole_process_group(self) -> None:
        sbx = self.sandbox("commands")
        marker = "/mnt/user-data/workspace/alive"
        sbx.execute_command(f"mkdir -p /mnt/user-data/workspace; while true; do touch {marker}; sleep 0.2; done", timeout=1)
        # DeerFlow's test then waits 1.5 s and checks the marker did not change: here the
        # guest waits, between two reads of its mtime.
        out = sbx.execute_command(f"a=$(stat -c %Y.%y {marker}); sleep 1.5; b=$(stat -c %Y.%y {marker}); [ \"$a\" = \"$b\" ] && echo still || echo changed")
        self.assertEqual(out, "still\n", "process group survived the timeout")

    def test_command_reading_stdin_does_not_block(self) -> None:
        sbx = self.sandbox("commands")
        start = time.monotonic()
        output = sbx.execute_command("read x; echo got", timeout=10)
        self.assertLess(time.monotonic() - start, 3)
        self.assertIn("got", output)

    def test_normal_command_output_exit_code_and_stderr(self) -> None:
        sbx = self.sandbox("commands")
        self.assertIn("hello", sbx.execute_command("echo hello"))
        self.assertIn("Exit Code: 3", sbx.execute_command("exit 3"))
        combined = sbx.execute_command("echo out; echo oops >&2")
        for part in ("out", "Std Error:", "oops"):
            self.assertIn(part, combined)


class RemoteProviderFilesTest(_WithProvider):
    """The remote providers' read/download tests (test_e2b_sandbox_provider.py,
    test_boxlite_provider.py)."""

    def test_read_file_supports_bounded_ranges(self) -> None:
        sbx = self.sandbox("files")
        path = "/mnt/user-data/workspace/range.txt"
        sbx.write_file(path, "line 1\nline 2\nline 3\nline 4\nline 5")
        self.assertEqual(sbx.read_file(path), "line 1\nline 2\nline 3\nline 4\nline 5")
        self.assertEqual(sbx.read_file(path, start_line=2, end_line=4), "line 2\nline 3\nline 4")
        self.assertEqual(sbx.read_file(path, start_line=4), "line 4\nline 5")
        self.assertEqual(sbx.read_file(path, end_line=2), "line 1\nline 2")

    def test_download_file_returns_full_bytes(self) -> None:
        sbx = self.sandbox("files")
        payload = b"A" * (128 * 1024)
        sbx.update_file("/mnt/user-data/outputs/small.bin", payload)
        self.assertEqual(sbx.download_file("/mnt/user-data/outputs/small.bin"), payload)

    def test_download_file_over_the_cap_raises_efbig(self) -> None:
        sbx = self.sandbox("files")
        sbx.execute_command(f"mkdir -p /mnt/user-data/outputs && head -c {DOWNLOAD_CAP + 1} /dev/zero > /mnt/user-data/outputs/huge.bin")
        with self.assertRaises(OSError) as caught:
            sbx.download_file("/mnt/user-data/outputs/huge.bin")
        self.assertEqual(caught.exception.errno, errno.EFBIG)

    def test_download_file_guards_reject_outside_the_prefix_and_traversal(self) -> None:
        sbx = self.sandbox("files")
        with self.assertRaises(PermissionError):
            sbx.download_file("/etc/passwd")
        with self.assertRaises(PermissionError):
            sbx.download_file("/mnt/user-data/../etc/passwd")

    def test_download_file_blocks_symlink_escape(self) -> None:
        # test_local_sandbox_provider_mounts.py: test_download_file_blocks_symlink_escape_from_mount.
        sbx = self.sandbox("files")
        sbx.execute_command("mkdir -p /tmp/outside /mnt/user-data && printf 'secret' > /tmp/outside/secret.bin && ln -sfn /tmp/outside /mnt/user-data/escape")
        with self.assertRaises(PermissionError) as caught:
            sbx.download_file("/mnt/user-data/escape/secret.bin")
        self.assertEqual(caught.exception.errno, errno.EACCES)


if __name__ == "__main__":
    unittest.main()
