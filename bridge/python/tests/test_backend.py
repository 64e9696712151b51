"""The sandbox backend against a real ``guestflow serve``: run, env, timeout, OOM, refusal."""

from __future__ import annotations

import os
import threading
import time
import unittest
from unittest import mock

from lfx.utils.sandbox.base import (
    Capabilities,
    SandboxBackend,
    SandboxResult,
    SandboxUnavailableError,
)

import langflow_guestflow
from tests._server import ModuleServer

MODULE = ModuleServer()
setUpModule = MODULE.start  # noqa: N816 (unittest looks these names up)
tearDownModule = MODULE.stop  # noqa: N816


def _env(**overrides: str) -> dict[str, str]:
    assert MODULE.server is not None
    env = {"GUESTFLOW_URL": MODULE.server.url, "GUESTFLOW_TOKEN": MODULE.server.token}
    env.update(overrides)
    return env


_POLICY_VARS = (
    "LANGFLOW_SANDBOX_TIMEOUT_SECONDS",
    "LANGFLOW_SANDBOX_MEMORY_MB",
    "LANGFLOW_SANDBOX_ALLOW_NETWORK",
    "LANGFLOW_SANDBOX_ALLOWED_DOMAINS",
)


class BackendOverServer(unittest.TestCase):
    def setUp(self) -> None:
        # Each test states its own policy; nothing leaks in from the caller's environment.
        patcher = mock.patch.dict(os.environ, _env())
        patcher.start()
        self.addCleanup(patcher.stop)
        for var in _POLICY_VARS:
            os.environ.pop(var, None)
        self.backend = langflow_guestflow.create_backend()

    def test_is_an_lfx_sandbox_backend(self) -> None:
        self.assertIsInstance(self.backend, SandboxBackend)
        self.assertEqual(self.backend.name, "guestflow")

    def test_capabilities_are_the_servers_and_need_no_io(self) -> None:
        caps = self.backend.capabilities()
        self.assertIsInstance(caps, Capabilities)
        # Local guests are namespaces, and the plugin says so (Langflow's gate refuses them).
        self.assertEqual(caps.isolation, "namespaces")
        self.assertNotEqual(caps.isolation, "hardware-virtualized")
        self.assertTrue(caps.supports_deny_all_egress)
        self.assertFalse(caps.supports_domain_allowlist)
        with mock.patch.dict(os.environ, {"GUESTFLOW_URL": "http://127.0.0.1:9"}):
            self.assertEqual(self.backend.capabilities(), caps, "capabilities() must be served from memory")

    def test_run_returns_an_lfx_sandbox_result(self) -> None:
        result = self.backend.run("print(1)")
        self.assertIsInstance(result, SandboxResult)
        self.assertEqual((result.stdout, result.exit_code), ("1\n", 0))
        self.assertTrue(result.success)
        self.assertIsInstance(result.execution_time_ms, int)

    def test_env_stderr_and_exit_code(self) -> None:
        code = "import os, sys\nprint(os.environ['GF_PLUGIN_TEST'])\nsys.stderr.write('oops')\nsys.exit(3)\n"
        result = self.backend.run(code, env={"GF_PLUGIN_TEST": "from the worker"})
        self.assertEqual(result.stdout, "from the worker\n")
        self.assertEqual(result.stderr, "oops")
        self.assertEqual(result.exit_code, 3)
        self.assertEqual(result.error_message(), "oops")

    def test_timeout_is_exit_code_minus_one(self) -> None:
        os.environ["LANGFLOW_SANDBOX_TIMEOUT_SECONDS"] = "1"
        started = time.monotonic()
        result = self.backend.run("import time\nprint('before', flush=True)\ntime.sleep(30)\n")
        self.assertEqual(result.exit_code, -1)
        self.assertLess(time.monotonic() - started, 20)
        self.assertIn("timed out", result.error_message())

    def test_memory_limit_is_exit_code_137(self) -> None:
        os.environ["LANGFLOW_SANDBOX_MEMORY_MB"] = "256"
        code = "chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))\n"
        result = self.backend.run(code)
        self.assertEqual(result.exit_code, 137, result)

    def test_allowed_domains_are_refused_fail_closed(self) -> None:
        os.environ["LANGFLOW_SANDBOX_ALLOWED_DOMAINS"] = "pypi.org"
        with self.assertRaises(SandboxUnavailableError) as ctx:
            self.backend.run("print('must not run')")
        self.assertIn("policy_refused", str(ctx.exception))

    def test_an_isolation_the_server_cannot_give_is_refused_fail_closed(self) -> None:
        os.environ["GUESTFLOW_ISOLATION"] = "firecracker"
        with self.assertRaises(SandboxUnavailableError) as ctx:
            self.backend.run("print('must not run')")
        self.assertIn("GUESTFLOW_ISOLATION=firecracker", str(ctx.exception))

    def test_a_gvisor_guest_answers_from_gvisors_kernel(self) -> None:
        os.environ["GUESTFLOW_ISOLATION"] = "gvisor"
        result = self.backend.run("print(open('/proc/version').read())")
        self.assertEqual(result.exit_code, 0, result)
        self.assertIn("Linux version 4.4.0", result.stdout)

    def test_timeout_over_the_providers_cap_is_refused(self) -> None:
        cap = self.backend.capabilities().max_timeout_seconds
        if cap is None:
            self.skipTest("the server reports no timeout cap")
        os.environ["LANGFLOW_SANDBOX_TIMEOUT_SECONDS"] = str(cap + 1)
        with self.assertRaises(SandboxUnavailableError):
            self.backend.run("print(1)")

    def test_concurrent_runs_from_threads(self) -> None:
        results: dict[int, SandboxResult] = {}

        def one(i: int) -> None:
            results[i] = self.backend.run(f"print({i} * 2)")

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual({i: r.stdout for i, r in results.items()}, {i: f"{i * 2}\n" for i in range(6)})

    def test_shutdown_is_idempotent_and_fails_closed(self) -> None:
        self.backend.shutdown()
        self.backend.shutdown()
        with self.assertRaises(SandboxUnavailableError):
            self.backend.run("print(1)")

    def test_reset_after_fork_replaces_the_lock(self) -> None:
        old = self.backend._lock  # noqa: SLF001
        old.acquire()  # as if another thread held it at fork time
        try:
            self.backend.reset_after_fork()
            self.assertIsNot(self.backend._lock, old)  # noqa: SLF001
            self.assertEqual(self.backend.run("print('after fork')").stdout, "after fork\n")
        finally:
            old.release()


class BackendConfiguredButUnusable(unittest.TestCase):
    def test_wrong_token_fails_closed_at_construction(self) -> None:
        with mock.patch.dict(os.environ, _env(GUESTFLOW_TOKEN="wrong")), self.assertRaises(SandboxUnavailableError):
            langflow_guestflow.create_backend()

    def test_unreachable_server_fails_closed_at_construction(self) -> None:
        with mock.patch.dict(os.environ, _env(GUESTFLOW_URL="http://127.0.0.1:9")), self.assertRaises(
            SandboxUnavailableError
        ):
            langflow_guestflow.create_backend()

    def test_server_gone_after_construction_fails_closed(self) -> None:
        with mock.patch.dict(os.environ, _env()):
            backend = langflow_guestflow.create_backend()
        backend._url = "http://127.0.0.1:9"  # noqa: SLF001 - the server "went away"
        with self.assertRaises(SandboxUnavailableError):
            backend.run("print(1)")

    def test_bad_url_fails_closed(self) -> None:
        with mock.patch.dict(os.environ, _env(GUESTFLOW_URL="ftp://example")), self.assertRaises(
            SandboxUnavailableError
        ):
            langflow_guestflow.create_backend()


if __name__ == "__main__":
    unittest.main()
