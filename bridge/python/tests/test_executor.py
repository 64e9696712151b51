"""GuestflowExecutor against a real ``guestflow serve``: outputs, inputs, errors, cancellation."""

from __future__ import annotations

import asyncio
import json
import os
import time
import unittest
from unittest import mock

from lfx.execution.types import RunComplete, StepResult, Unit
from lfx.graph.schema import ResultData, RunOutputs
from lfx.schema.schema import InputValueRequest

from langflow_guestflow.executor import GuestflowExecutor, GuestflowRunError
from tests import _flows
from tests._fake_serve import RecordingEventManager
from tests._server import ModuleServer

# Flows of the core executor fit a small guest; the default executor shape (8 GiB where the
# host's budget holds it) would let only two of this module's concurrent runs in at once.
MODULE = ModuleServer(extra_env={"CREATEOS_EXECUTOR_SHAPE": "s-1vcpu-512mb"})
setUpModule = MODULE.start  # noqa: N816 (unittest looks these names up)
tearDownModule = MODULE.stop  # noqa: N816


def _executor(**kwargs) -> GuestflowExecutor:
    assert MODULE.server is not None
    return GuestflowExecutor(url=kwargs.get("url", MODULE.server.url), token=kwargs.get("token", MODULE.server.token))


def _chat_text(outputs: list) -> list[str]:
    texts = []
    for run in outputs:
        for result in run.outputs:
            if result is not None:
                message = (result.results or {}).get("message") or {}
                texts.append(message.get("text"))
    return texts


async def _terminal_event(run_id: str, deadline: float) -> dict:
    """The run's terminal event, read back through GET /v1/runs/{id}/events."""
    assert MODULE.server is not None

    def fetch() -> dict:
        status, body = MODULE.server.get(f"/v1/runs/{run_id}/events?from_seq=0")
        assert status == 200, (status, body[:300])
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
        assert events and events[-1]["type"] in ("complete", "error"), events[-1:]
        return events[-1]

    return await asyncio.wait_for(asyncio.to_thread(fetch), deadline)


class ExecutorOverServer(unittest.IsolatedAsyncioTestCase):
    async def test_outputs_are_rebuilt_run_outputs(self) -> None:
        unit = Unit(
            graph=_flows.hello_graph(),
            inputs=[],
            runtime_options={"initial_inputs": InputValueRequest(input_value="hello guest")},
        )
        items = [item async for item in _executor().execute(unit)]
        built = [i.payload for i in items[:-2]]
        self.assertEqual([b.vertex.id for b in built], ["ChatInput-hK3vQ", "ChatOutput-p8RtZ"])
        self.assertTrue(all(b.valid for b in built))
        events = [b.vertex.event for b in built]
        self.assertEqual(len({e["run_id"] for e in events}), 1)
        self.assertEqual([e["type"] for e in events], ["vertex_built", "vertex_built"])
        finish = items[-2].payload
        self.assertEqual(type(finish).__name__, "Finish")
        self.assertEqual(finish.event["type"], "complete")
        final = items[-1]
        self.assertIsInstance(final, RunComplete)
        self.assertEqual(len(final.outputs), 1)
        self.assertIsInstance(final.outputs[0], RunOutputs)
        self.assertTrue(all(isinstance(r, ResultData) for r in final.outputs[0].outputs))
        self.assertEqual(_chat_text(final.outputs), ["hello guest"])

    async def test_seam_level_inputs_as_graph_arun_passes_them(self) -> None:
        manager = RecordingEventManager()
        unit = Unit(
            graph=_flows.hello_graph(),
            inputs=[{"input_value": "from arun"}],
            runtime_options={"_use_arun_legacy": True, "session_id": "s1", "event_manager": manager, "stream": False},
        )
        items = [item async for item in _executor().execute(unit)]
        self.assertEqual([type(i) for i in items], [RunComplete], "the legacy path yields the outputs only")
        self.assertEqual(_chat_text(items[-1].outputs), ["from arun"])
        self.assertNotIn("on_end_vertex", manager.names(), "Graph._run announces no vertex ends")

    async def test_concurrent_runs_keep_their_own_inputs(self) -> None:
        async def run(text: str) -> list[str]:
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"initial_inputs": {"input_value": text}})
            items = [item async for item in _executor().execute(unit)]
            return _chat_text(items[-1].outputs)

        results = await asyncio.gather(*(run(f"run-{i}") for i in range(4)))
        self.assertEqual(results, [[f"run-{i}"] for i in range(4)])

    async def test_aclose_mid_run_cancels_it_within_10_seconds(self) -> None:
        gen = _executor().execute(Unit(graph=_flows.sleeping_graph(60), runtime_options={"initial_inputs": "x"}))
        first = await asyncio.wait_for(anext(gen), 30.0)
        self.assertIsInstance(first, StepResult)
        run_id = first.payload.vertex.event["run_id"]
        started = time.monotonic()
        await asyncio.wait_for(gen.aclose(), 10.0)
        terminal = await _terminal_event(run_id, 10.0)
        self.assertLess(time.monotonic() - started, 10.0)
        self.assertEqual(terminal["type"], "error", terminal)
        self.assertEqual(terminal["code"], "cancelled", terminal)

    async def test_task_cancellation_mid_run_cancels_it(self) -> None:
        seen: list[dict] = []

        async def consume() -> None:
            async for item in _executor().execute(Unit(graph=_flows.sleeping_graph(60), runtime_options={"initial_inputs": "x"})):
                seen.append(item.payload.vertex.event)

        task = asyncio.create_task(consume())
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # waiting for the first event to be consumed
        self.assertTrue(seen, "no run event within 30 s")
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10.0)
        terminal = await _terminal_event(seen[0]["run_id"], 10.0)
        self.assertEqual(terminal["type"], "error", terminal)
        self.assertEqual(terminal["code"], "cancelled", terminal)

    async def test_a_run_that_times_out_raises_after_the_steps_before(self) -> None:
        unit = Unit(
            graph=_flows.sleeping_graph(30),
            runtime_options={"initial_inputs": "x", "guestflow_timeout_seconds": 2},
        )
        seen: list = []
        with self.assertRaises(GuestflowRunError) as ctx:
            async for item in _executor().execute(unit):
                seen.append(item)
        self.assertEqual(ctx.exception.code, "timeout", ctx.exception)
        self.assertEqual([i.payload.vertex.id for i in seen], ["ChatInput-Sw1fY"], "the step before the timeout")
        self.assertFalse(any(isinstance(i, RunComplete) for i in seen))

    async def test_the_terminal_event_says_which_executor_ran(self) -> None:
        seen = [item async for item in _executor().execute(Unit(graph=_flows.hello_graph().dump(), inputs=[{"input_value": "hi"}]))]
        complete = seen[-2].payload.event
        self.assertEqual(complete["type"], "complete", complete)
        self.assertIn(complete["executor"], ("core", "lfx"))
        self.assertFalse(complete.get("failed"), "a complete run has no failed vertex")

    async def test_an_executor_the_guest_lacks_fails_the_run(self) -> None:
        # The guests here have no lfx: asking for it fails at once, never falling back.
        unit = Unit(graph=_flows.hello_graph().dump(), runtime_options={"guestflow_executor": "lfx"})
        with self.assertRaises(GuestflowRunError) as ctx:
            async for _ in _executor().execute(unit):
                pass
        self.assertEqual(ctx.exception.code, "unavailable", ctx.exception)
        self.assertIn("lfx", ctx.exception.message)

    async def test_refused_before_admission_raises_without_events(self) -> None:
        seen: list = []
        with self.assertRaises(GuestflowRunError) as ctx:
            async for item in _executor().execute(Unit(graph={"data": {"nodes": "not a list", "edges": []}})):
                seen.append(item)
        self.assertEqual(ctx.exception.code, "bad_request")
        self.assertEqual(seen, [])

    async def test_wrong_token_is_refused(self) -> None:
        with self.assertRaises(GuestflowRunError) as ctx:
            async for _ in _executor(token="wrong").execute(Unit(graph=_flows.hello_graph())):
                pass
        self.assertEqual(ctx.exception.code, "policy_refused")

    async def test_unreachable_server_is_unavailable(self) -> None:
        with self.assertRaises(GuestflowRunError) as ctx:
            async for _ in _executor(url="http://127.0.0.1:9").execute(Unit(graph=_flows.hello_graph())):
                pass
        self.assertEqual(ctx.exception.code, "unavailable")

    async def test_settings_come_from_the_environment(self) -> None:
        assert MODULE.server is not None
        env = {"GUESTFLOW_URL": MODULE.server.url, "GUESTFLOW_TOKEN": MODULE.server.token}
        with mock.patch.dict(os.environ, env):
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"initial_inputs": "env"})
            items = [item async for item in GuestflowExecutor().execute(unit)]
        self.assertEqual(_chat_text(items[-1].outputs), ["env"])


if __name__ == "__main__":
    unittest.main()
