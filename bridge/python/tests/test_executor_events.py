"""GuestflowExecutor against a scripted run stream: Langflow's shapes, failures, events, run state.

The stream comes from ``_fake_serve.FakeServe`` (serve's NDJSON format, scripted), so each
Langflow-side effect is checked on its own: what a consumer of ``Coordinator.stream`` reads
(``VertexBuildResult`` / ``Finish`` from lfx, ``Message`` rebuilt), what is raised, which
``event_manager`` calls happen and when, what the request carries. ``test_executor.py`` runs
the same executor against a real ``guestflow serve`` and real guests.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import unittest

from lfx.execution.types import RunComplete, StepResult, Unit

from langflow_guestflow.executor import GuestflowExecutor, GuestflowRunError
from tests import _flows
from tests._fake_serve import FakeServe, RecordingEventManager

IN, OUT = "ChatInput-hK3vQ", "ChatOutput-p8RtZ"


def _message(text: str, node: str = OUT) -> dict:
    return {
        "text_key": "text", "default_value": "", "text": text, "sender": "Machine", "sender_name": "AI",
        "files": [], "session_id": "s1", "timestamp": "2026-12-06 23:00:00 UTC", "flow_id": None,
        "error": False, "edit": False, "category": "message", "content_blocks": [],
        "properties": {"source": {"id": node, "display_name": "Chat Output", "source": None}},
    }


def _built(vertex: str, name: str, text: str) -> dict:
    return {
        "type": "vertex_built", "id": vertex, "name": name, "valid": True, "duration_ms": 3,
        "outputs": {"message": {"message": text, "type": "text"}}, "logs": "",
        "result": {
            "results": {"message": _message(text, vertex)},
            "artifacts": {"message": text, "sender": "Machine", "sender_name": "AI", "files": [], "type": "object"},
            "outputs": {"message": {"message": text, "type": "text"}},
            "logs": {"message": []}, "messages": [], "timedelta": 0.003, "duration": "3 ms",
            "component_display_name": name, "component_id": vertex, "used_frozen_result": False,
        },
        "types": {"message": "Message"},
    }


def _complete(text: str, **extra) -> dict:
    result = copy.deepcopy(_built(OUT, "Chat Output", text)["result"])
    return {"type": "complete", "ok": True, "executor": "core",
            "outputs": [{"inputs": {"input_value": text}, "outputs": [result]}], **extra}


def _failure(message: str, failed: list[str] | None) -> dict:
    event = {"type": "error", "code": "guest_failed", "message": message, "executor": "core"}
    if failed is not None:
        event["failed"] = failed
    return event


HAPPY = [
    {"type": "vertex_started", "id": IN, "name": "Chat Input"},
    _built(IN, "Chat Input", "hi"),
    {"type": "vertex_started", "id": OUT, "name": "Chat Output"},
    {"type": "token", "id": OUT, "data": {"chunk": "h", "id": "m1"}},
    {"type": "token", "id": OUT, "data": {"chunk": "i", "id": "m1"}},
    _built(OUT, "Chat Output", "hi"),
    _complete("hi"),
]
COMPONENT_ERROR = "Error building Component Chat Output: \n\nRuntimeError: boom"


async def _drain(gen, into: list) -> None:
    async for item in gen:
        into.append(item)


class Shapes(unittest.IsolatedAsyncioTestCase):
    async def test_the_stream_reads_as_lfx_s_own(self) -> None:
        from lfx.graph.graph.constants import Finish
        from lfx.graph.graph.schema import VertexBuildResult
        from lfx.schema.message import Message

        async with FakeServe(HAPPY) as serve:
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"initial_inputs": "hi"})
            items = [i async for i in GuestflowExecutor(url=serve.url, token="t").execute(unit)]
        self.assertEqual([type(i) for i in items], [StepResult, StepResult, StepResult, RunComplete])
        first, second, last = (i.payload for i in items[:3])
        for built, vertex_id, name in ((first, IN, "Chat Input"), (second, OUT, "Chat Output")):
            self.assertIsInstance(built, VertexBuildResult)
            self.assertTrue(built.valid)
            self.assertEqual(built.vertex.id, vertex_id)
            self.assertEqual(built.vertex.display_name, name)
            self.assertEqual(built.vertex.custom_component.display_name, name)
            self.assertEqual([o["name"] for o in built.vertex.outputs], ["message"])
            self.assertIsInstance(built.result_dict.results["message"], Message)
            self.assertEqual(built.result_dict.results["message"].text, "hi")
            self.assertIs(built.vertex.result, built.result_dict)
            self.assertEqual(built.vertex.event["type"], "vertex_built", "the raw event stays reachable")
        # What loop_utils.extract_loop_output and the lfx run CLI read.
        self.assertEqual(second.result_dict.outputs["message"]["message"], "hi")
        self.assertEqual(second.artifacts["message"], "hi")
        self.assertIsInstance(last, Finish)
        self.assertEqual(items[-1].outputs[0].outputs[0].component_id, OUT)

    async def test_the_legacy_path_yields_only_the_outputs(self) -> None:
        async with FakeServe(HAPPY) as serve:
            unit = Unit(graph=_flows.hello_graph(), inputs=[{"input_value": "hi"}],
                        runtime_options={"_use_arun_legacy": True})
            items = [i async for i in GuestflowExecutor(url=serve.url, token="t").execute(unit)]
        self.assertEqual([type(i) for i in items], [RunComplete])
        self.assertEqual(items[0].outputs[0].outputs[0].results["message"]["text"], "hi")

    async def test_a_data_output_is_lfx_s_data_and_a_table_its_dataframe(self) -> None:
        from lfx.schema.data import Data
        from lfx.schema.dataframe import DataFrame

        built = _built(OUT, "Chat Output", "x")
        built["result"]["results"] = {
            "data": {"text_key": "text", "data": {"text": "a", "n": 1}, "default_value": ""},
            "table": [{"n": 1}, {"n": 2}],
            "plain": {"k": "v"},
        }
        built["types"] = {"data": "Data", "table": "DataFrame", "plain": "dict"}
        async with FakeServe([built, _complete("x")]) as serve:
            items = [i async for i in GuestflowExecutor(url=serve.url, token="t").execute(Unit(graph=_flows.hello_graph()))]
        results = items[0].payload.result_dict.results
        self.assertIsInstance(results["data"], Data)
        self.assertEqual(results["data"].data, {"text": "a", "n": 1})
        self.assertIsInstance(results["table"], DataFrame)
        self.assertEqual(len(results["table"]), 2)
        self.assertEqual(results["plain"], {"k": "v"})


class Failures(unittest.IsolatedAsyncioTestCase):
    async def test_the_stream_yields_the_steps_before_a_failed_vertex_then_raises_lfx_s_error(self) -> None:
        from lfx.exceptions.component import ComponentBuildError

        events = [_built(IN, "Chat Input", "hi"), {"type": "vertex_failed", "id": OUT, "name": "Chat Output",
                  "message": COMPONENT_ERROR}, _failure(COMPONENT_ERROR, [OUT])]
        seen: list = []
        async with FakeServe(events) as serve:
            gen = GuestflowExecutor(url=serve.url, token="t").execute(Unit(graph=_flows.hello_graph()))
            with self.assertRaises(ComponentBuildError) as ctx:
                await _drain(gen, seen)
        self.assertEqual(str(ctx.exception), COMPONENT_ERROR)
        self.assertEqual(ctx.exception.message, COMPONENT_ERROR)
        self.assertEqual([i.payload.vertex.id for i in seen], [IN], "only the step before the failure")

    async def test_the_legacy_path_raises_what_graph_run_raises(self) -> None:
        from lfx.exceptions.component import ComponentBuildError

        manager = RecordingEventManager()
        async with FakeServe([_built(IN, "Chat Input", "hi"), _failure(COMPONENT_ERROR, [OUT])]) as serve:
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"_use_arun_legacy": True, "event_manager": manager})
            seen: list = []
            with self.assertRaises(ValueError) as ctx:
                await _drain(GuestflowExecutor(url=serve.url, token="t").execute(unit), seen)
        # Graph._run: `raise ValueError(f"Error running graph: {exc}") from exc`.
        self.assertEqual(str(ctx.exception), f"Error running graph: {COMPONENT_ERROR}")
        self.assertIsInstance(ctx.exception.__cause__, ComponentBuildError)
        self.assertEqual(seen, [], "no RunComplete, no partial outputs")
        self.assertEqual(manager.calls, [], "the run endpoint sends its own error event, as in process")

    async def test_a_run_that_failed_without_a_vertex_raises_guestflow_s_error(self) -> None:
        timeout = {"type": "error", "code": "timeout", "message": "the run took longer than 2 s"}
        async with FakeServe([_built(IN, "Chat Input", "hi"), timeout]) as serve:
            with self.assertRaises(GuestflowRunError) as ctx:
                await _drain(GuestflowExecutor(url=serve.url, token="t").execute(Unit(graph=_flows.hello_graph())), [])
        self.assertEqual((ctx.exception.code, ctx.exception.run_id), ("timeout", "run-1"))

    async def test_a_guest_failure_without_failed_vertices_is_guestflow_s_error(self) -> None:
        async with FakeServe([_failure("the runner died", None)]) as serve:
            with self.assertRaises(GuestflowRunError) as ctx:
                await _drain(GuestflowExecutor(url=serve.url, token="t").execute(Unit(graph=_flows.hello_graph())), [])
        self.assertEqual(ctx.exception.code, "guest_failed")


class Events(unittest.IsolatedAsyncioTestCase):
    async def test_events_reach_the_event_manager_as_they_arrive(self) -> None:
        manager = RecordingEventManager()
        async with FakeServe(HAPPY) as serve:
            serve.hold_before(5)  # OUT's vertex_built waits until the test has looked
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"event_manager": manager})
            seen: list = []
            task = asyncio.create_task(_drain(GuestflowExecutor(url=serve.url, token="t").execute(unit), seen))
            deadline = time.monotonic() + 10
            while manager.names().count("on_token") < 2 and time.monotonic() < deadline and not task.done():
                await asyncio.sleep(0.01)  # polling what the executor has done so far
            self.assertEqual(manager.names().count("on_token"), 2, manager.calls)
            self.assertEqual(manager.names().count("on_end_vertex"), 1, "the output vertex has not ended yet")
            serve.release(5)
            await asyncio.wait_for(task, 10)
        self.assertEqual(
            manager.names(),
            ["on_build_start", "on_end_vertex", "on_build_start", "on_token", "on_token", "on_end_vertex"],
        )
        self.assertEqual(manager.calls[0][1], {"id": IN})
        self.assertEqual(manager.calls[3][1], {"chunk": "h", "id": "m1"})
        build_data = manager.calls[5][1]["build_data"]
        self.assertEqual((build_data["id"], build_data["valid"]), (OUT, True))
        self.assertEqual(build_data["data"]["component_id"], OUT)

    async def test_the_legacy_path_passes_tokens_and_messages_only(self) -> None:
        # Graph._run builds through process(): components send tokens and messages, but the
        # build_start / end_vertex events are async_start's.
        manager = RecordingEventManager()
        async with FakeServe(HAPPY) as serve:
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"_use_arun_legacy": True, "event_manager": manager})
            await _drain(GuestflowExecutor(url=serve.url, token="t").execute(unit), [])
        self.assertEqual(manager.names(), ["on_token", "on_token"])

    async def test_an_error_reaches_on_error_before_the_raise(self) -> None:
        manager = RecordingEventManager()
        async with FakeServe([_failure(COMPONENT_ERROR, [OUT])]) as serve:
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"event_manager": manager})
            with self.assertRaises(Exception):  # noqa: B017 - the type is the failure tests' subject
                await _drain(GuestflowExecutor(url=serve.url, token="t").execute(unit), [])
        self.assertEqual(manager.calls, [("on_error", {"error": COMPONENT_ERROR})])

    async def test_lfx_s_event_manager_gets_langflow_s_event_names(self) -> None:
        import json

        from lfx.events.event_manager import create_default_event_manager

        sent: list[bytes] = []

        class Queue:
            def put_nowait(self, item) -> None:
                sent.append(item[1])

        async with FakeServe(HAPPY) as serve:
            unit = Unit(graph=_flows.hello_graph(), runtime_options={"event_manager": create_default_event_manager(Queue())})
            await _drain(GuestflowExecutor(url=serve.url, token="t").execute(unit), [])
        names = [json.loads(raw.decode())["event"] for raw in sent]
        self.assertEqual(names, ["build_start", "end_vertex", "build_start", "token", "token", "end_vertex"])


class Refusals(unittest.IsolatedAsyncioTestCase):
    async def test_a_refused_run_raises_with_no_event(self) -> None:
        async with FakeServe([], status=400) as serve:
            with self.assertRaises(GuestflowRunError) as ctx:
                await _drain(GuestflowExecutor(url=serve.url, token="t").execute(Unit(graph=_flows.hello_graph())), [])
        self.assertEqual(ctx.exception.code, "bad_request")


if __name__ == "__main__":
    logging.basicConfig()
    unittest.main()
