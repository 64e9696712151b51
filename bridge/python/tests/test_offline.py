"""Plugin pieces that need no guestflow server: request bodies, settings, the streaming
HTTP reader, error mapping, packaging and the extension manifest."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest
import zipfile
from pathlib import Path
from unittest import mock

from lfx.execution.types import RunComplete, StepResult, Unit
from lfx.graph.schema import ResultData, RunOutputs
from lfx.schema.schema import InputValueRequest
from lfx.utils.sandbox.base import Capabilities, SandboxExecutionError, SandboxUnavailableError

from langflow_guestflow import _http, _settings
from langflow_guestflow.backend import _unavailable, capabilities_from_server
from langflow_guestflow.executor import GuestflowExecutor, GuestflowRunError, build_run_body, rebuild_run_outputs
from tests import _flows

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


class RunBody(unittest.TestCase):
    def test_initial_inputs_input_value_request(self) -> None:
        unit = Unit(
            graph=_flows.hello_graph(),
            inputs=[],
            runtime_options={
                "initial_inputs": InputValueRequest(input_value="hi", client_request_time=5),
                "max_iterations": 3,
                "config": {"a": 1},
                "reset_output_values": True,
                "fallback_to_env_vars": None,
                "event_manager": object(),
                "session_id": "s",
                "_use_arun_legacy": True,
                "outputs": ["ChatOutput-p8RtZ"],
            },
        )
        body = build_run_body(unit)
        self.assertEqual(body["flow"]["data"]["nodes"][0]["id"], "ChatInput-hK3vQ")
        self.assertTrue(body["stream"])
        self.assertTrue(body["cancel_on_disconnect"])
        self.assertNotIn("inputs", body)
        self.assertEqual(
            body["runtime_options"],
            {
                "initial_inputs": {"input_value": "hi", "type": "any", "components": []},
                "max_iterations": 3,
                "config": {"a": 1},
                "reset_output_values": True,
            },
        )
        self.assertEqual(body["outputs"], ["ChatOutput-p8RtZ"])
        json.dumps(body)  # the whole body is JSON

    def test_seam_inputs_fold_in_components_and_types(self) -> None:
        unit = Unit(
            graph=_flows.hello_graph().dump(),
            inputs=[{"input_value": "a"}, {"input_value": "b", "type": "text"}],
            runtime_options={"inputs_components": [["ChatInput-hK3vQ"], []], "types": ["chat", "chat"]},
        )
        body = build_run_body(unit)
        self.assertEqual(
            body["inputs"],
            [{"input_value": "a", "components": ["ChatInput-hK3vQ"], "type": "chat"}, {"input_value": "b", "type": "text"}],
        )
        self.assertNotIn("runtime_options", body)

    def test_string_and_list_initial_inputs(self) -> None:
        body = build_run_body(Unit(graph={"data": {"nodes": [], "edges": []}}, runtime_options={"initial_inputs": "x"}))
        self.assertEqual(body["runtime_options"]["initial_inputs"], "x")
        body = build_run_body(
            Unit(graph={"nodes": [], "edges": []}, runtime_options={"initial_inputs": [{"input_value": "y", "input_type": "chat"}]})
        )
        self.assertEqual(body["runtime_options"]["initial_inputs"], [{"input_value": "y", "type": "chat"}])

    def test_the_executor_option_reaches_the_body(self) -> None:
        graph = {"nodes": [], "edges": []}
        self.assertEqual(build_run_body(Unit(graph=graph, runtime_options={"guestflow_executor": "core"}))["executor"], "core")
        with mock.patch.dict(os.environ, {"GUESTFLOW_RUNNER_EXECUTOR": "lfx"}):
            self.assertEqual(build_run_body(Unit(graph=graph))["executor"], "lfx")
        with mock.patch.dict(os.environ, {"GUESTFLOW_RUNNER_EXECUTOR": ""}):
            self.assertNotIn("executor", build_run_body(Unit(graph=graph)))
        with self.assertRaises(GuestflowRunError) as ctx:
            build_run_body(Unit(graph=graph, runtime_options={"guestflow_executor": "fast"}))
        self.assertEqual(ctx.exception.code, "bad_request")

    def test_graph_without_dump_is_rejected(self) -> None:
        with self.assertRaises(TypeError):
            build_run_body(Unit(graph=object()))

    def test_rebuilt_outputs_keep_only_known_result_fields(self) -> None:
        raw = [{"inputs": {"input_value": "hi"}, "outputs": [{"results": {"x": 1}, "component_id": "c", "future_field": 1}, None]}]
        (run,) = rebuild_run_outputs(raw)
        self.assertIsInstance(run, RunOutputs)
        self.assertIsInstance(run.outputs[0], ResultData)
        self.assertEqual((run.outputs[0].results, run.outputs[0].component_id), ({"x": 1}, "c"))
        self.assertIsNone(run.outputs[1])
        self.assertEqual(rebuild_run_outputs(None), [])


class Settings(unittest.TestCase):
    def test_defaults(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=True):
            ep = _settings.endpoint()
            self.assertEqual((ep.base, ep.token), ("http://127.0.0.1:8470", None))
            self.assertEqual(_settings.sandbox_policy(), _settings.SandboxPolicy(30, 192, False, ()))

    def test_environment(self) -> None:
        env = {
            "GUESTFLOW_URL": "http://127.0.0.1:1234",
            "GUESTFLOW_TOKEN": "t0k",
            "LANGFLOW_SANDBOX_TIMEOUT_SECONDS": "5",
            "LANGFLOW_SANDBOX_MEMORY_MB": "512",
            "LANGFLOW_SANDBOX_ALLOW_NETWORK": "true",
            "LANGFLOW_SANDBOX_ALLOWED_DOMAINS": '["pypi.org", "files.pythonhosted.org"]',
        }
        with mock.patch.dict(os.environ, env, clear=True):
            ep = _settings.endpoint()
            self.assertEqual(ep.headers()["Authorization"], "Bearer t0k")
            self.assertEqual(ep.port, 1234)
            self.assertEqual(
                _settings.sandbox_policy(),
                _settings.SandboxPolicy(5, 512, True, ("pypi.org", "files.pythonhosted.org")),
            )
        with mock.patch.dict(os.environ, {"LANGFLOW_SANDBOX_ALLOWED_DOMAINS": "a.org, b.org"}, clear=True):
            self.assertEqual(_settings.sandbox_policy().allowed_domains, ("a.org", "b.org"))

    def test_bad_values_are_errors(self) -> None:
        for env in (
            {"GUESTFLOW_URL": "127.0.0.1:8470"},
            {"GUESTFLOW_URL": "http://h/path"},
            {"LANGFLOW_SANDBOX_TIMEOUT_SECONDS": "soon"},
            {"LANGFLOW_SANDBOX_ALLOW_NETWORK": "maybe"},
        ):
            with mock.patch.dict(os.environ, env, clear=True), self.assertRaises(_settings.SettingsError):
                _settings.endpoint()
                _settings.sandbox_policy()


class CapabilitiesAndErrors(unittest.TestCase):
    def test_capabilities_keep_only_fields_lfx_declares(self) -> None:
        caps = capabilities_from_server(
            {
                "provider": "local",
                "isolation": "namespaces",
                "supports_deny_all_egress": True,
                "supports_address_egress_rules": True,
                "supports_domain_allowlist": False,
                "link_local_blocked": True,
                "max_timeout_seconds": 3600,
            }
        )
        self.assertEqual(caps, Capabilities("namespaces", True, False, 3600))

    def test_missing_fields_grant_nothing(self) -> None:
        self.assertEqual(capabilities_from_server({"isolation": 7, "max_timeout_seconds": True}), Capabilities())
        with self.assertRaises(SandboxUnavailableError):
            capabilities_from_server([])

    def test_error_mapping_fails_closed(self) -> None:
        for code in ("policy_refused", "unavailable"):
            self.assertIsInstance(_unavailable(_http.GuestflowError(code, "m")), SandboxUnavailableError)
        self.assertIsInstance(_unavailable(_http.GuestflowConnectionError("down")), SandboxUnavailableError)
        for code in ("guest_failed", "transient", "capacity", "bad_request"):
            err = _unavailable(_http.GuestflowError(code, "m"))
            self.assertIsInstance(err, SandboxExecutionError)
            self.assertNotIsInstance(err, SandboxUnavailableError)

    def test_error_answers_are_decoded(self) -> None:
        err = _http.error_from_answer(
            409, b'{"run_id":"r1","error":{"code":"egress_drift","message":"changed"}}', {"retry-after": "1"}
        )
        self.assertEqual((err.code, err.message, err.run_id, err.retry_after), ("egress_drift", "changed", "r1", 1.0))
        err = _http.error_from_answer(503, b"<html>proxy</html>", {})
        self.assertEqual(err.code, "unavailable")


class _NdjsonServer:
    """A tiny HTTP/1.1 server that streams chunked NDJSON when the test says so."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.request_line = b""
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.request_line = head.split(b"\r\n", 1)[0]
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\nX-Guestflow-Run-Id: run-1\r\n\r\n"
        )

        def chunk(data: bytes) -> bytes:
            return b"%x\r\n%s\r\n" % (len(data), data)

        first = json.dumps({"run_id": "run-1", "seq": 0, "type": "vertex_built", "id": "a", "name": "A"}).encode()
        # The first event split across two chunks, the second event held back.
        writer.write(chunk(first[:10]) + chunk(first[10:] + b"\n"))
        await writer.drain()
        await self.release.wait()
        done = json.dumps({"run_id": "run-1", "seq": 1, "type": "complete", "outputs": []}).encode()
        writer.write(chunk(done + b"\n") + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


class StreamingReader(unittest.IsolatedAsyncioTestCase):
    async def test_events_are_yielded_as_they_arrive(self) -> None:
        server = _NdjsonServer()
        await server.start()
        try:
            gen = GuestflowExecutor(url=f"http://127.0.0.1:{server.port}", token="t").execute(
                Unit(graph={"nodes": [], "edges": []})
            )
            first = await asyncio.wait_for(anext(gen), 5.0)
            # Received while the server still holds the rest of the body back.
            self.assertFalse(server.release.is_set())
            self.assertIsInstance(first, StepResult)
            self.assertEqual(first.payload.vertex.id, "a")
            server.release.set()
            rest = [item async for item in gen]
            self.assertEqual([type(i) for i in rest], [StepResult, RunComplete])
            self.assertEqual(rest[-1].outputs, [])
            self.assertEqual(server.request_line, b"POST /v1/runs HTTP/1.1")
        finally:
            server.release.set()
            await server.stop()


class Packaging(unittest.TestCase):
    def setUp(self) -> None:
        self.pyproject = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())

    def test_entry_points_resolve(self) -> None:
        eps = self.pyproject["project"]["entry-points"]
        self.assertEqual(eps["lfx.executors"], {"guestflow": "langflow_guestflow.executor:GuestflowExecutor"})
        self.assertEqual(eps["lfx.sandbox_backends"], {"guestflow": "langflow_guestflow:create_backend"})
        self.assertEqual(eps["langflow.extensions"], {"langflow-guestflow": "langflow_guestflow"})
        for group in eps.values():
            for target in group.values():
                module, _, attr = target.partition(":")
                obj = importlib.import_module(module)
                if attr:
                    obj = getattr(obj, attr)
                self.assertIsNotNone(obj)
        from lfx.execution.executor import Executor

        executor = GuestflowExecutor()  # lfx instantiates the class with no arguments
        self.assertIsInstance(executor, Executor)
        self.assertEqual(executor.kind, "guestflow")

    def test_package_root_imports_only_the_standard_library(self) -> None:
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); import langflow_guestflow; "
            "assert not any(m == 'lfx' or m.startswith('lfx.') for m in sys.modules), sorted(sys.modules)"
        )
        subprocess.run([sys.executable, "-c", code, str(PACKAGE_ROOT)], check=True, timeout=60)

    def test_extension_manifest(self) -> None:
        manifest_path = PACKAGE_ROOT / "langflow_guestflow" / "extension.json"
        manifest = json.loads(manifest_path.read_text())
        # The rules of lfx.extension.manifest (src/lfx/src/lfx/extension/manifest.py).
        self.assertRegex(manifest["id"], r"^[a-z][a-z0-9-]{1,63}$")
        self.assertRegex(manifest["version"], r"^\d+\.\d+\.\d+$")
        self.assertEqual(manifest["version"], self.pyproject["project"]["version"])
        self.assertIn("1", manifest["lfx"]["compat"])
        self.assertEqual(len(manifest["bundles"]), 1, "one bundle")
        (bundle,) = manifest["bundles"]
        self.assertRegex(bundle["name"], r"^[a-z][a-z0-9_]{1,63}$")
        bundle_dir = manifest_path.parent / bundle["path"]
        self.assertTrue((bundle_dir / "__init__.py").is_file())
        self.assertFalse(Path(bundle["path"]).is_absolute() or ".." in Path(bundle["path"]).parts)
        self.assertLessEqual(
            set(manifest), {"$schema", "id", "version", "name", "description", "lfx", "bundles", "capabilities"}
        )

    @staticmethod
    def _builder() -> str | None:
        """A Python with pip, setuptools and wheel (this one, else Debian's /usr/bin/python3)."""
        probe = "import setuptools, wheel, pip"
        for python in dict.fromkeys((sys.executable, "/usr/bin/python3")):
            if os.access(python, os.X_OK) and not subprocess.run(
                [python, "-c", probe], capture_output=True, check=False, timeout=60
            ).returncode:
                return python
        return None

    def test_wheel_builds_offline_with_entry_points_and_manifest(self) -> None:
        python = self._builder()
        if python is None:
            self.skipTest("no Python here has pip, setuptools and wheel")
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src"
            shutil.copytree(PACKAGE_ROOT, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
            subprocess.run(
                [python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "-q", "-w", tmp, str(src)],
                check=True,
                capture_output=True,
                timeout=300,
            )
            (wheel,) = Path(tmp).glob("langflow_guestflow-0.1.0-*.whl")
            with zipfile.ZipFile(wheel) as zf:
                names = set(zf.namelist())
                self.assertIn("langflow_guestflow/extension.json", names)
                self.assertIn("langflow_guestflow/components/guestflow/guestflow_sandbox.py", names)
                (ep_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
                entry_points = zf.read(ep_name).decode()
        for line in (
            "[lfx.executors]",
            "guestflow = langflow_guestflow.executor:GuestflowExecutor",
            "[lfx.sandbox_backends]",
            "guestflow = langflow_guestflow:create_backend",
            "[langflow.extensions]",
            "langflow-guestflow = langflow_guestflow",
        ):
            self.assertIn(line, entry_points)


if __name__ == "__main__":
    unittest.main()
