"""The Guestflow Sandbox component against a real server: reuse, returned files, refusals."""

from __future__ import annotations

import asyncio
import base64
import os
import unittest
import uuid
from types import SimpleNamespace
from unittest import mock

from lfx.schema.data import Data
from lfx.schema.dataframe import DataFrame
from lfx.utils.sandbox.base import SandboxExecutionError, SandboxUnavailableError

from langflow_guestflow.components.guestflow import GuestflowSandboxComponent
from tests._server import ModuleServer

CAP_BYTES = 256 << 10  # a small returned-files cap so the over-cap case stays cheap
MODULE = ModuleServer(extra_env={"GUESTFLOW_ARTIFACT_CAP_BYTES": str(CAP_BYTES)}, reap_reusable=True)
setUpModule = MODULE.start  # noqa: N816 (unittest looks these names up)
tearDownModule = MODULE.stop  # noqa: N816


def _component(flow_id: str | None, component_id: str, **inputs) -> GuestflowSandboxComponent:
    return GuestflowSandboxComponent(_id=component_id, graph=SimpleNamespace(flow_id=flow_id), **inputs)


class ComponentOverServer(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        assert MODULE.server is not None
        patcher = mock.patch.dict(os.environ, {"GUESTFLOW_URL": MODULE.server.url, "GUESTFLOW_TOKEN": MODULE.server.token})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.flow_id = f"flow-{uuid.uuid4().hex[:8]}"

    async def test_python_program_in_a_fresh_guest(self) -> None:
        comp = _component(self.flow_id, "GuestflowSandbox-a1", python_program="print(6 * 7)")
        result = await comp.run_sandbox()
        self.assertIsInstance(result, Data)
        self.assertEqual(result.data["stdout"], "42\n")
        self.assertEqual((result.data["exit_code"], result.data["outcome"]), (0, "ok"))
        self.assertTrue(result.data["success"])
        self.assertFalse(result.data["reused"])

    async def test_command_with_arguments(self) -> None:
        comp = _component(
            self.flow_id, "GuestflowSandbox-c1", command="python3", command_args=["-c", "import sys; print(sys.argv[1:])", "a b"]
        )
        result = await comp.run_sandbox()
        self.assertEqual(result.data["stdout"], "['a b']\n")

    async def test_reuse_flow_keeps_one_guest_across_executions(self) -> None:
        program = (
            "import pathlib\n"
            "p = pathlib.Path('/workspace/run_count')\n"
            "n = int(p.read_text()) + 1 if p.exists() else 1\n"
            "p.write_text(str(n))\n"
            "print(n)\n"
        )
        seen = []
        for _ in range(3):
            comp = _component(self.flow_id, "GuestflowSandbox-r1", python_program=program, reuse="flow")
            seen.append((await comp.run_sandbox()).data)
        self.assertEqual([d["stdout"] for d in seen], ["1\n", "2\n", "3\n"])
        if "guest" in seen[0]:  # the server names the guest: one name for all three runs
            self.assertEqual(len({d["guest"] for d in seen}), 1, seen)
        # Another component in the same flow gets its own guest.
        other = _component(self.flow_id, "GuestflowSandbox-r2", python_program=program, reuse="flow")
        self.assertEqual((await other.run_sandbox()).data["stdout"], "1\n")
        # Reuse off: a fresh guest every time.
        fresh = _component(self.flow_id, "GuestflowSandbox-r1", python_program=program, reuse="none")
        data = (await fresh.run_sandbox()).data
        self.assertEqual((data["stdout"], data["reused"]), ("1\n", False))

    async def test_answer_reports_reuse_as_api_md_says(self) -> None:
        """API.md: the component answer carries `reused` (false on creation, true on adoption)."""
        seen = []
        for _ in range(2):
            comp = _component(self.flow_id, "GuestflowSandbox-r3", python_program="print(1)", reuse="flow")
            seen.append((await comp.run_sandbox()).data["reused"])
        self.assertEqual(seen, [False, True])

    async def test_reuse_without_a_flow_id_runs_fresh(self) -> None:
        program = "import pathlib; p = pathlib.Path('/workspace/x'); print(p.exists()); p.write_text('1')"
        for _ in range(2):
            comp = _component(None, "GuestflowSandbox-n1", python_program=program, reuse="flow")
            self.assertEqual((await comp.run_sandbox()).data["stdout"], "False\n")
        self.assertTrue(any("saved flow" in line for line in comp.logs))

    async def test_returned_files_text_and_binary(self) -> None:
        program = (
            "import pathlib\n"
            "d = pathlib.Path('/workspace/artifacts')\n"
            "(d / 'sub').mkdir(parents=True, exist_ok=True)\n"
            "(d / 'report.txt').write_text('hello files')\n"
            "(d / 'sub' / 'blob.bin').write_bytes(bytes([0, 255, 1, 254]))\n"
            "print('wrote')\n"
        )
        comp = _component(self.flow_id, "GuestflowSandbox-f1", python_program=program, return_files=True)
        results = await comp.run_sandbox()
        files = await comp.returned_files()
        self.assertIsInstance(files, DataFrame)
        rows = {row["path"]: row for row in files.to_dict("records")}
        self.assertEqual(set(rows), {"report.txt", "sub/blob.bin"}, rows)
        self.assertEqual(rows["report.txt"]["text"], "hello files")
        self.assertEqual(base64.b64decode(rows["sub/blob.bin"]["content_base64"]), bytes([0, 255, 1, 254]))
        self.assertEqual(rows["sub/blob.bin"]["size"], 4)
        self.assertEqual(sorted(results.data["files"]), ["report.txt", "sub/blob.bin"])

    async def test_both_outputs_share_one_execution(self) -> None:
        program = "import pathlib, uuid\nd = pathlib.Path('/workspace/artifacts'); d.mkdir(exist_ok=True)\n(d / 'id').write_text(uuid.uuid4().hex)\n"
        comp = _component(self.flow_id, "GuestflowSandbox-f2", python_program=program, return_files=True)
        files_first = await comp.returned_files()
        await comp.run_sandbox()
        files_again = await comp.returned_files()
        self.assertEqual(files_first.to_dict("records"), files_again.to_dict("records"))

    async def test_returned_files_over_the_cap_fail_loudly_but_keep_the_output(self) -> None:
        program = (
            "import os, pathlib\n"
            "d = pathlib.Path('/workspace/artifacts'); d.mkdir(exist_ok=True)\n"
            f"(d / 'big.bin').write_bytes(os.urandom({2 * CAP_BYTES}))\n"
            "print('done')\n"
        )
        comp = _component(self.flow_id, "GuestflowSandbox-f3", python_program=program, return_files=True)
        results = await comp.run_sandbox()
        self.assertEqual(results.data["stdout"], "done\n")
        self.assertEqual(results.data["files_error"]["code"], "artifact_too_large")
        with self.assertRaises(SandboxExecutionError):
            await comp.returned_files()

    async def test_timeout_outcome(self) -> None:
        comp = _component(
            self.flow_id, "GuestflowSandbox-t1", python_program="import time; print('start', flush=True); time.sleep(30)", timeout_seconds=1
        )
        data = (await comp.run_sandbox()).data
        self.assertEqual(data["outcome"], "timeout")
        self.assertFalse(data["success"])

    async def test_unreachable_server_fails_closed(self) -> None:
        with mock.patch.dict(os.environ, {"GUESTFLOW_URL": "http://127.0.0.1:9"}):
            comp = _component(self.flow_id, "GuestflowSandbox-u1", python_program="print(1)")
            with self.assertRaises(SandboxUnavailableError):
                await comp.run_sandbox()

    async def test_wrong_token_fails_closed(self) -> None:
        with mock.patch.dict(os.environ, {"GUESTFLOW_TOKEN": "wrong"}):
            comp = _component(self.flow_id, "GuestflowSandbox-u2", python_program="print(1)")
            with self.assertRaises(SandboxUnavailableError):
                await comp.run_sandbox()


class ComponentDeclaration(unittest.TestCase):
    def test_no_input_is_named_code(self) -> None:
        names = [inp.name for inp in GuestflowSandboxComponent.inputs]
        self.assertNotIn("code", names)
        self.assertEqual(len(names), len(set(names)))

    def test_outputs_name_existing_methods(self) -> None:
        for output in GuestflowSandboxComponent.outputs:
            self.assertTrue(asyncio.iscoroutinefunction(getattr(GuestflowSandboxComponent, output.method)))


if __name__ == "__main__":
    unittest.main()
