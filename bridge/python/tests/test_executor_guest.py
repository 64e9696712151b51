"""GuestflowExecutor end to end: Langflow's behaviour through a real ``guestflow serve`` and guests.

The guests run flows through lfx (``guest/lfx_path.py``) with the stand-in lfx of
``tests/fixtures/lfx_guest`` installed as a guest image (``guestflow image add --python-env``),
the same stand-in this process imports as lfx. So the same flow can run in process (the
stand-in's ``Graph``) and in a guest, and the two are compared: a failed vertex's exception
on both paths. The stand-in's test components (``lfx/components/standin.py``)
make each point observable from outside the guest: ``StreamText`` streams chunks,
``Identity`` reports the user and session it sees, ``KeyCheck`` the SHA-256 of its
``load_from_db`` key, ``SetContext`` writes the graph's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import uuid
from pathlib import Path
from unittest import mock

from lfx.execution.types import RunComplete, StepResult, Unit

from langflow_guestflow.executor import GuestflowExecutor
from tests import _flows, _langflow_services
from tests._fake_serve import RecordingEventManager
from tests._server import REPO, ModuleServer, guestflow_bin

IMAGE = "langflow-standin"
ENV = {"CREATEOS_EXECUTOR_SHAPE": "s-1vcpu-512mb", "CREATEOS_EXECUTOR_ROOTFS": IMAGE}
MODULE = ModuleServer(extra_env=ENV)
_SCRATCH: str | None = None


def setUpModule() -> None:  # noqa: N802 (unittest looks this name up)
    """A state dir with a guest image whose Python has the stand-in lfx (as lfx_test.cpp
    builds it), then serve on that state dir. The image is added before serve starts: the
    embedded control plane is serve's while it runs."""
    global _SCRATCH, MODULE  # noqa: PLW0603
    _SCRATCH = tempfile.mkdtemp(prefix="gf-lfx-guest-")
    state, venv = os.path.join(_SCRATCH, "state"), os.path.join(_SCRATCH, "venv")
    os.mkdir(state)
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", venv], check=True, timeout=120)
        purelib = subprocess.run(
            [f"{venv}/bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()
        shutil.copytree(REPO / "tests" / "fixtures" / "lfx_guest" / "lfx", Path(purelib) / "lfx",
                        ignore=shutil.ignore_patterns("__pycache__"))
        MODULE = ModuleServer(extra_env={**ENV, "GUESTFLOW_STATE_DIR": state})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GUESTFLOW_", "CREATEOS_"))}
        added = subprocess.run([guestflow_bin()[0], "image", "add", IMAGE, "--python-env", venv],
                               env={**env, "GUESTFLOW_STATE_DIR": state}, capture_output=True, text=True,
                               timeout=120, check=False)
        if added.returncode != 0:
            msg = f"guestflow image add failed ({added.returncode}): {added.stderr[-2000:]}"
            raise RuntimeError(msg)
        MODULE.start()
    except BaseException:
        shutil.rmtree(_SCRATCH, ignore_errors=True)
        raise


def tearDownModule() -> None:  # noqa: N802
    try:
        MODULE.stop()
    finally:
        if _SCRATCH:
            shutil.rmtree(_SCRATCH, ignore_errors=True)


def _executor() -> GuestflowExecutor:
    assert MODULE.server is not None
    return GuestflowExecutor(url=MODULE.server.url, token=MODULE.server.token)


def _unit(graph, **opts) -> Unit:
    return Unit(graph=graph, runtime_options={"guestflow_executor": "lfx", **opts})


IO = {"input_value": "", "should_store_message": False}


def _chain(*middle: tuple[str, str, dict, str], text: str = "hi", store: bool = False, load_from_db=()):
    """Chat Input -> each (id, type, fields, output) in turn -> Chat Output, as a stand-in Graph;
    ``load_from_db`` names fields of the middle vertices that name a variable."""
    io = {**IO, "input_value": text, "should_store_message": store}
    nodes = [_flows.node("ChatInput-in", "ChatInput", "Chat Input", io, ["message"])]
    edges = []
    previous, previous_out = "ChatInput-in", "message"
    for vertex_id, vertex_type, fields, output in middle:
        nodes.append(_flows.node(vertex_id, vertex_type, vertex_type, {"input_value": "", **fields}, [output],
                                 load_from_db=tuple(f for f in load_from_db if f in fields)))
        edges.append(_flows.edge(previous, previous_out, vertex_id, "input_value"))
        previous, previous_out = vertex_id, output
    nodes.append(_flows.node("ChatOutput-out", "ChatOutput", "Chat Output", {**IO, "should_store_message": store},
                             ["message"]))
    edges.append(_flows.edge(previous, previous_out, "ChatOutput-out", "input_value"))
    return _flows.graph_of({"data": {"nodes": nodes, "edges": edges}})


async def _in_process(graph) -> list:
    """The same graph run by the stand-in lfx in this process (Graph.async_start)."""
    return [r async for r in graph.async_start()]


class Failures(unittest.IsolatedAsyncioTestCase):
    async def test_a_failed_vertex_stops_the_stream_with_the_in_process_exception(self) -> None:
        from lfx.exceptions.component import ComponentBuildError

        def graph():
            return _chain(("Raise-x", "Raise", {"message": "boom"}, "text"))

        with self.assertRaises(ComponentBuildError) as local:
            await _in_process(graph())
        seen: list = []
        with self.assertRaises(ComponentBuildError) as remote:
            async for item in _executor().execute(_unit(graph())):
                seen.append(item)
        self.assertEqual(str(remote.exception), str(local.exception))
        self.assertIn("Raise", str(remote.exception))
        self.assertEqual([i.payload.vertex.id for i in seen], ["ChatInput-in"], "the steps before the failure")

    async def test_a_failed_vertex_raises_on_the_legacy_path(self) -> None:
        from lfx.exceptions.component import ComponentBuildError

        def graph():
            return _chain(("Raise-x", "Raise", {"message": "boom"}, "text"))

        with self.assertRaises(ValueError) as local:
            await graph()._arun_legacy(inputs=[{}])
        seen: list = []
        with self.assertRaises(ValueError) as remote:
            async for item in _executor().execute(_unit(graph(), _use_arun_legacy=True)):
                seen.append(item)
        self.assertEqual(str(remote.exception), str(local.exception))
        self.assertIsInstance(remote.exception.__cause__, ComponentBuildError)
        self.assertEqual(seen, [], "no outputs of a failed run")


class Streaming(unittest.IsolatedAsyncioTestCase):
    async def test_a_streaming_component_s_chunks_reach_on_token_before_its_vertex_ends(self) -> None:
        manager = RecordingEventManager()
        # Chat Output stores its message (a session, should_store_message): lfx's send_message
        # is what streams a model's chunks to the caller.
        graph = _chain(("StreamText-s", "StreamText", {"chunks": json.dumps(["al", "pha ", "beta"]), "delay": 0.4},
                        "text"), store=True)
        graph.session_id = "stream-" + uuid.uuid4().hex
        seen: list = []

        async def consume() -> None:
            async for item in _executor().execute(_unit(graph, event_manager=manager)):
                seen.append(item)

        task = asyncio.create_task(consume())
        deadline = time.monotonic() + 120
        while "on_token" not in manager.names() and not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # polling the event manager while the guest streams
        self.assertIn("on_token", manager.names(), manager.calls)
        ended = [d["build_data"]["id"] for n, d in manager.calls if n == "on_end_vertex"]
        self.assertNotIn("ChatOutput-out", ended, "a chunk arrived while the streaming vertex was still running")
        await asyncio.wait_for(task, 120)
        chunks = [d["chunk"] for n, d in manager.calls if n == "on_token"]
        self.assertEqual("".join(chunks), "alpha beta")
        last_token = max(i for i, n in enumerate(manager.names()) if n == "on_token")
        out_end = next(i for i, (n, d) in enumerate(manager.calls)
                       if n == "on_end_vertex" and d["build_data"]["id"] == "ChatOutput-out")
        self.assertLess(last_token, out_end)
        self.assertIsInstance(seen[-1], RunComplete)


class RunState(unittest.IsolatedAsyncioTestCase):
    async def test_session_user_and_values_set_after_load_reach_the_guest(self) -> None:
        graph = _chain(("Identity-i", "Identity", {}, "text"))
        graph.session_id = "session-" + uuid.uuid4().hex
        graph.user_id = str(uuid.uuid4())
        graph.get_vertex("ChatInput-in").update_raw_params({"input_value": "set after load"}, overwrite=True)
        items = [i async for i in _executor().execute(_unit(graph))]
        identity = next(i.payload for i in items if isinstance(i, StepResult) and getattr(i.payload, "vertex", None)
                        and i.payload.vertex.id == "Identity-i")
        seen = json.loads(identity.result_dict.results["text"].text)
        self.assertEqual(seen["session_id"], graph.session_id)
        self.assertEqual(seen["user_id"], graph.user_id)
        self.assertEqual(seen["input"], "set after load")

    async def test_what_the_guest_sets_on_the_context_comes_back(self) -> None:
        graph = _chain(("SetContext-c", "SetContext", {"key": "answer", "value": "42"}, "text"))
        graph.context = {"kept": "yes"}
        [i async for i in _executor().execute(_unit(graph))]
        self.assertEqual(graph.context.get("answer"), "42")
        self.assertEqual(graph.context.get("kept"), "yes")


class Secrets(unittest.IsolatedAsyncioTestCase):
    async def test_a_secret_reaches_its_component_and_nothing_else(self) -> None:
        secret = "sk-e2e-" + uuid.uuid4().hex
        name = "GF_E2E_KEY_" + uuid.uuid4().hex[:8].upper()
        graph = _chain(("KeyCheck-k", "KeyCheck", {"api_key": name}, "text"), load_from_db=("api_key",))
        manager = RecordingEventManager()
        events: list = []
        with mock.patch.dict(os.environ, {name: secret}), self.assertLogs("langflow_guestflow", logging.DEBUG) as logs:
            logging.getLogger("langflow_guestflow").debug("capture starts")
            async for item in _executor().execute(_unit(graph, fallback_to_env_vars=True, event_manager=manager)):
                events.append(item)
        check = next(i.payload for i in events if getattr(i.payload, "vertex", None) is not None
                     and i.payload.vertex.id == "KeyCheck-k")
        digest = hashlib.sha256(secret.encode()).hexdigest()
        self.assertEqual(check.result_dict.results["text"].text, f"sha256={digest} length={len(secret)}")
        raw = [i.payload.vertex.event if hasattr(i.payload, "vertex") else getattr(i.payload, "event", None)
               for i in events[:-1]]
        run_id = raw[0]["run_id"]
        assert MODULE.server is not None
        status, replay = MODULE.server.get(f"/v1/runs/{run_id}/events?from_seq=0")
        self.assertEqual(status, 200)
        found = {
            "events": json.dumps(raw) + replay.decode(),
            "event manager": repr(manager.calls),
            "plugin logs": "\n".join(logs.output),
            "metrics": MODULE.server.get("/metrics")[1].decode(),
        }
        MODULE.server.assert_no_guest_pending()
        state_dirs = (MODULE.server.state_dir, MODULE.server.env()["GUESTFLOW_STATE_DIR"])
        for root, _, files in (w for d in state_dirs for w in os.walk(d)):  # serve's log, control plane, guests
            for file in files:
                path = Path(root, file)
                with contextlib.suppress(OSError):
                    if secret.encode() in path.read_bytes():
                        found[str(path)] = secret
        for where, text in found.items():
            self.assertNotIn(secret, text, where)


class Memory(unittest.IsolatedAsyncioTestCase):
    async def test_two_runs_in_two_fresh_guests_remember_through_langflow_s_memory(self) -> None:
        session = "chat-" + uuid.uuid4().hex
        history = {"n_messages": 100, "order": "Ascending", "sender": "Machine and User", "sender_name": "",
                   "session_id": "", "template": "{sender_name}: {text}"}

        def chatbot(text: str):
            nodes = [
                _flows.node("ChatInput-in", "ChatInput", "Chat Input", {**IO, "input_value": text,
                                                                        "should_store_message": True}, ["message"]),
                _flows.node("ChatOutput-out", "ChatOutput", "Chat Output", {**IO, "should_store_message": True},
                            ["message"]),
                _flows.node("Memory-m", "Memory", "Message History", history, ["messages_text"]),
                _flows.node("TextOutput-h", "TextOutput", "History", {"input_value": ""}, ["text"]),
            ]
            edges = [_flows.edge("ChatInput-in", "message", "ChatOutput-out", "input_value"),
                     _flows.edge("Memory-m", "messages_text", "TextOutput-h", "input_value")]
            graph = _flows.graph_of({"data": {"nodes": nodes, "edges": edges}})
            graph.session_id = session
            return graph

        assert MODULE.server is not None
        created = MODULE.server.metrics().get("guestflow_guests_created_total", 0)
        with _langflow_services.installed() as (memory, _):
            first = [i async for i in _executor().execute(_unit(chatbot("my name is Ada")))]
            second = [i async for i in _executor().execute(_unit(chatbot("what is my name?")))]
            stored = await memory.aget_messages(session_id=session, order="ASC")
        self.assertEqual(MODULE.server.metrics().get("guestflow_guests_created_total", 0) - created, 2)

        def history_text(items) -> str:
            built = next(i.payload for i in items if getattr(i.payload, "vertex", None) is not None
                         and i.payload.vertex.id == "TextOutput-h")
            return built.result_dict.results["text"].text

        self.assertIsInstance(first[-1], RunComplete)
        self.assertIn("User: my name is Ada", history_text(second))
        self.assertIn("AI: my name is Ada", history_text(second))
        self.assertEqual([m.text for m in stored],
                         ["my name is Ada", "my name is Ada", "what is my name?", "what is my name?"])


if __name__ == "__main__":
    unittest.main()


class Loop(unittest.IsolatedAsyncioTestCase):
    async def test_a_loop_whose_body_runs_in_a_guest_yields_the_in_process_data(self) -> None:
        from lfx.execution import (Coordinator, ExecutorRegistry, InProcessExecutor, get_default_coordinator,
                                   set_default_coordinator)

        def graph():
            nodes = [
                _flows.node("Lines-l", "Lines", "Lines", {"input_value": "one\ntwo\nthree"}, ["dataframe"]),
                _flows.node("LoopComponent-loop", "LoopComponent", "Loop", {"data": None}, ["item", "done"]),
                _flows.node("Uppercase-u", "Uppercase", "Uppercase", {"input_value": ""}, ["text"]),
            ]
            edges = [_flows.edge("Lines-l", "dataframe", "LoopComponent-loop", "data"),
                     _flows.edge("LoopComponent-loop", "item", "Uppercase-u", "input_value"),
                     _flows.edge("Uppercase-u", "text", "LoopComponent-loop", "item")]
            return _flows.graph_of({"data": {"nodes": nodes, "edges": edges}})

        async def done_output(coordinator) -> list:
            previous = get_default_coordinator()
            set_default_coordinator(coordinator)
            try:
                results = [r async for r in graph().async_start()]
            finally:
                set_default_coordinator(previous)
            loop = next(r for r in results if getattr(r, "vertex", None) is not None
                        and r.vertex.id == "LoopComponent-loop")
            return [d.data for d in loop.result_dict.results["done"].to_data_list()]

        registry = ExecutorRegistry()
        registry.register(InProcessExecutor())
        local = await done_output(Coordinator(registry=registry))
        registry.register(_executor())
        remote = await done_output(Coordinator(registry=registry, executor_kind="guestflow"))
        self.assertEqual(len(local), 3, local)
        self.assertEqual(remote, local)


