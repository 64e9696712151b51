"""guest/runner.py + guest/lfx_path.py end to end, through the stand-in lfx package.

tests/fixtures/lfx_guest/lfx implements the part of lfx that lfx_path.py drives (see its
__init__.py); it builds ChatInput, ChatOutput, Prompt, ... and the test-only Uppercase,
Sleep and Raise, none of which guestflow's core executor builds, so a flow using them can
only have run through lfx_path.py and the stand-in.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import importlib.util
import json
import os
import shutil
import tempfile
import unittest

from .langflow_shapes import (
    chain,
    chat_input,
    chat_output,
    component,
    edge,
    graph,
    note,
    prompt,
    raising,
    sleep,
    uppercase,
)
from .test_runner_exports import grouped_flow
from .test_runner_harness import (
    FIXTURES,
    LFX_STANDIN,
    GUEST,
    RUN_FILES,
    assert_well_formed,
    chat,
    import_guest,
    run_runner,
    spec_for,
)

STANDIN = {"PYTHONPATH": str(LFX_STANDIN)}
LFX_INSTALLED = importlib.util.find_spec("lfx") is not None


def lfx_spec(g: dict, inputs=None, outputs=None, **extra) -> dict:
    return spec_for(g, inputs, outputs, executor="lfx", **extra)


def upper_flow() -> dict:
    nodes = [chat_input(), uppercase("Uppercase-up1"), chat_output()]
    return graph(nodes, chain(*nodes))


def texts(result) -> list:
    return [[r["results"][next(iter(r["results"]))]["text"] for r in run["outputs"]]
            for run in result.run_outputs]


def event_order(result) -> list:
    return [(f["t"], f["id"] if f["t"] == "vertex_start" else f["event"]["id"])
            for f in result.frames if f["t"] in ("vertex_start", "step")]


class RunsThroughLfx(unittest.TestCase):
    def run_lfx(self, spec, **kw):
        result = run_runner(spec, env=STANDIN, **kw)
        assert_well_formed(self, result)
        note = result.notes()[0]
        self.assertEqual((note["executor"], note["lfx_version"]), ("lfx", "0.0.0+guestflow.standin"))
        return result

    def test_each_vertex_starts_then_steps_in_lfx_run_order(self):
        result = self.run_lfx(lfx_spec(upper_flow(), [chat("hi there")]))
        self.assertEqual(result.notes()[0]["reason"], "executor lfx was requested")
        self.assertEqual(event_order(result), [
            ("vertex_start", "ChatInput-in1"), ("step", "ChatInput-in1"),
            ("vertex_start", "Uppercase-up1"), ("step", "Uppercase-up1"),
            ("vertex_start", "ChatOutput-out1"), ("step", "ChatOutput-out1")])
        self.assertEqual(result.of("vertex_start")[1], {"t": "vertex_start", "id": "Uppercase-up1",
                                                        "name": "Uppercase"})
        step = result.step("Uppercase-up1")
        self.assertTrue(step["valid"])
        self.assertEqual(step["outputs"], {"text": {"message": "HI THERE", "type": "message"}})
        self.assertEqual(texts(result), [["HI THERE"]])

    def test_outputs_are_harvested_like_graph_run(self):
        nodes = [chat_output("ChatOutput-zz", "Second Output"), chat_input(),
                 uppercase("Uppercase-up1"), chat_output("ChatOutput-aa", "First Output")]
        edges = [edge("ChatInput-in1", "message", "Uppercase-up1", "input_value"),
                 edge("Uppercase-up1", "text", "ChatOutput-zz", "input_value"),
                 edge("Uppercase-up1", "text", "ChatOutput-aa", "input_value")]
        result = self.run_lfx(lfx_spec(graph(nodes, edges), [chat("x")]))
        # lfx builds ChatOutput-aa first (its run queue is sorted); Graph._run harvests in
        # payload order, every output vertex when no outputs are named.
        self.assertEqual([s["id"] for s in result.steps],
                         ["ChatInput-in1", "Uppercase-up1", "ChatOutput-aa", "ChatOutput-zz"])
        outputs = result.run_outputs[0]["outputs"]
        self.assertEqual([o["component_id"] for o in outputs], ["ChatOutput-zz", "ChatOutput-aa"])
        first = outputs[0]
        self.assertEqual(first["component_display_name"], "Second Output")
        self.assertEqual(first["results"]["message"]["text"], "X")
        self.assertEqual(first["results"]["message"]["sender"], "Machine")
        self.assertEqual(first["outputs"], {"message": {"message": "X", "type": "message"}})
        self.assertEqual(first["messages"], [{"message": "X", "sender": "Machine", "sender_name": "AI",
                                              "session_id": "", "component_id": "ChatOutput-zz",
                                              "files": [], "type": "message"}])
        self.assertFalse(first["used_frozen_result"])
        # Named outputs: by display name or id, still in payload order.
        result = self.run_lfx(lfx_spec(graph(nodes, edges), [chat("x")],
                                       outputs=["Uppercase", "ChatInput-in1"]))
        self.assertEqual([o["component_id"] for o in result.run_outputs[0]["outputs"]],
                         ["ChatInput-in1", "Uppercase-up1"])

    def test_each_caller_input_is_one_run_targeted_like_set_inputs(self):
        nodes = [chat_input("ChatInput-a1", "A-default"), chat_input("ChatInput-b1", "B-default", "Second"),
                 uppercase("Uppercase-up1"), chat_output()]
        edges = [edge("ChatInput-a1", "message", "Uppercase-up1", "input_value"),
                 edge("ChatInput-b1", "message", "ChatOutput-out1", "sender_name"),
                 edge("Uppercase-up1", "text", "ChatOutput-out1", "input_value")]
        spec = lfx_spec(graph(nodes, edges), [chat("one"), chat("two", "Second")])
        result = self.run_lfx(spec)
        self.assertEqual([n["run"] for n in result.notes() if "run" in n], [0, 1])
        self.assertEqual(texts(result), [["ONE"], ["A-DEFAULT"]])
        senders = [run["outputs"][0]["results"]["message"]["sender_name"] for run in result.run_outputs]
        self.assertEqual(senders, ["one", "two"])
        self.assertEqual(len(result.steps), 8)  # a fresh graph per run: every vertex builds twice

    def test_the_first_failing_vertex_is_the_last_step_as_langflow_raises_there(self):
        nodes = [chat_input(), raising("Raise-r1", "boom"), uppercase("Uppercase-a1"),
                 chat_output("ChatOutput-c1"), uppercase("Uppercase-x1"),
                 chat_output("ChatOutput-x2", "Other Output")]
        edges = [edge("ChatInput-in1", "message", "Raise-r1", "input_value"),
                 edge("Raise-r1", "text", "Uppercase-a1", "input_value"),
                 edge("Uppercase-a1", "text", "ChatOutput-c1", "input_value"),
                 edge("ChatInput-in1", "message", "Uppercase-x1", "input_value"),
                 edge("Uppercase-x1", "text", "ChatOutput-x2", "input_value")]
        result = self.run_lfx(lfx_spec(graph(nodes, edges), [chat("hi"), chat("again")],
                                       outputs=["Chat Input"]))
        # lfx's second layer is [Raise-r1, Uppercase-x1] (sorted): r1 fails first, nothing after.
        self.assertEqual(event_order(result), [("vertex_start", "ChatInput-in1"), ("step", "ChatInput-in1"),
                                               ("vertex_start", "Raise-r1"), ("step", "Raise-r1")])
        failed = result.step("Raise-r1")
        self.assertFalse(failed["valid"])
        # What Langflow puts after "Error building Component Raise: \n\n" (SOURCES.md).
        self.assertEqual(failed["error"], "boom (input: hi)")
        self.assertEqual(failed["outputs"]["error"], failed["error"])
        self.assertEqual(failed["outputs"]["text"]["type"], "error")
        self.assertIn("RuntimeError: boom", failed["outputs"]["text"]["message"]["stackTrace"])
        self.assertEqual(failed["logs"], "about to fail: boom\nboom (input: hi)")
        # Outputs (built vertices only) and done, exit 0: the host decides from the step; the
        # second input never ran (Langflow's run raised on the first).
        self.assertEqual([n for n in result.notes() if "run" in n], [{"t": "note", "run": 0,
                                                                      "inputs": {"input_value": "hi"}}])
        self.assertEqual([[o["component_id"] for o in run["outputs"]] for run in result.run_outputs],
                         [["ChatInput-in1"]])

    def test_output_of_a_vertex_is_its_logs_never_a_frame(self):
        nodes = [chat_input(), sleep("Sleep-s1", 0), chat_output()]
        result = self.run_lfx(lfx_spec(graph(nodes, chain(*nodes)), [chat("zzz")]))
        self.assertEqual(result.step("Sleep-s1")["logs"], "sleeping 0.0 s\n")
        self.assertEqual(texts(result), [["zzz"]])

    def test_streaming_run_options_are_named_as_not_used(self):
        options = {"max_iterations": 10, "config": {"output": {"cache": False}},
                   "reset_output_values": True, "fallback_to_env_vars": False}
        result = self.run_lfx(lfx_spec(upper_flow(), [chat("a")], runtime_options=options))
        warning = next(n for n in result.notes() if "warning" in n)
        self.assertEqual(warning["options"], ["max_iterations", "config", "reset_output_values"])
        self.assertEqual(texts(result), [["A"]])

    def test_canvas_notes_and_non_component_nodes_never_reach_lfx(self):
        g = upper_flow()
        orphan = copy.deepcopy(g["nodes"][1])
        orphan["id"] = "Orphan-1"
        del orphan["data"]["type"]  # lfx itself would fail on this one (a KeyError)
        g["nodes"] = [note("note-1", "## How this works")] + g["nodes"] + [orphan]
        result = self.run_lfx(lfx_spec(g, [chat("a")]))
        self.assertEqual(result.notes()[0]["ignored"], ["note-1", "Orphan-1"])
        self.assertEqual([s["id"] for s in result.steps],
                         ["ChatInput-in1", "Uppercase-up1", "ChatOutput-out1"])

    def test_groups_run_as_with_the_core_executor(self):
        lfx = self.run_lfx(lfx_spec(grouped_flow(), [chat("Ada")]))
        core = run_runner(spec_for(grouped_flow(), [chat("Ada")]))
        assert_well_formed(self, core)
        self.assertEqual(texts(lfx), [["<<Bonjour, Ada!>>"]])
        self.assertEqual(texts(lfx), texts(core))
        self.assertEqual([s["id"] for s in lfx.steps], [s["id"] for s in core.steps])
        self.assertEqual(lfx.notes()[0]["groups"], ["Group-g1"])

    def test_a_frozen_vertex_builds_once_per_request_as_in_lfx(self):
        g = upper_flow()
        g["nodes"][1]["data"]["node"]["frozen"] = True
        result = self.run_lfx(lfx_spec(g, [chat("a"), chat("b")]))
        # One graph runs every input (_arun_legacy); a frozen vertex already built keeps its
        # result (Vertex.build: frozen and built), so the second run reuses "A".
        self.assertEqual(texts(result), [["A"], ["A"]])
        warning = next(n for n in result.notes() if "frozen" in n.get("warning", ""))
        self.assertEqual(warning["vertices"], ["Uppercase-up1"])

    def test_a_cycle_is_left_to_lfx(self):
        g = upper_flow()
        g["edges"].append(edge("ChatOutput-out1", "message", "Uppercase-up1", "sender"))
        result = self.run_lfx(lfx_spec(g, [chat("a")]))
        self.assertEqual(result.of("fatal"), [])
        self.assertEqual([s["id"] for s in result.steps], ["ChatInput-in1"])  # the stand-in's loop ends

    def test_a_flow_lfx_cannot_load_is_refused_before_any_vertex_runs(self):
        nodes = [chat_input(), component("OpenAIModel-m1", "OpenAIModel", "OpenAI"), chat_output()]
        result = run_runner(lfx_spec(graph(nodes, chain(*nodes)), [chat("a")]), env=STANDIN)
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["note", "fatal"])
        self.assertEqual(result.fatal["code"], "bad_request")
        self.assertIn("lfx could not load the flow: ValueError: Component 'OpenAIModel' (OpenAIModel-m1)",
                      result.fatal["error"])
        self.assertIn("from_payload", result.fatal["traceback"])


def stream_text(vid: str, chunks: list) -> dict:
    return component(vid, "StreamText", "Model", {"chunks": json.dumps(chunks), "delay": 0})


def memory(vid: str = "Memory-m1") -> dict:
    return component(vid, "Memory", "Message History",
                     {"n_messages": 100, "order": "Ascending", "sender": "Machine and User",
                      "sender_name": "", "session_id": "", "template": "{sender_name}: {text}"},
                     ("messages_text", "dataframe"))


def loop_node(vid: str = "LoopComponent-l1") -> dict:
    node = component(vid, "LoopComponent", "Loop", {"data": None}, ("item", "done"))
    node["data"]["node"]["outputs"][0]["allows_loop"] = True
    return node


def loop_graph(body: dict) -> dict:
    """ChatInput -> Lines -> Loop, whose item goes through `body` and back (the feedback
    edge, last): the Loop runs `body` once per line."""
    bid = body["id"]
    nodes = [chat_input(), component("Lines-x1", "Lines", "Lines", {"input_value": ""}, ("dataframe",)),
             loop_node(), body]
    edges = [edge("ChatInput-in1", "message", "Lines-x1", "input_value"),
             edge("Lines-x1", "dataframe", "LoopComponent-l1", "data"),
             edge("LoopComponent-l1", "item", bid, "input_value"),
             edge(bid, "text", "LoopComponent-l1", "item")]
    return graph(nodes, edges)


def said(sender_name: str, text: str, session: str = "S1") -> dict:
    """A message of the session's history as Langflow's memory API gives it."""
    sender = "User" if sender_name == "User" else "Machine"
    return {"text": text, "sender": sender, "sender_name": sender_name, "session_id": session,
            "timestamp": "2026-12-01 10:00:00 UTC", "flow_id": None, "id": f"m-{text}", "files": [],
            "properties": {}, "error": False}


def in_process_run(g: dict, text: str, outputs: list):
    """The same flow through the stand-in lfx in this process (Graph.arun: Langflow's run)."""
    import asyncio  # noqa: PLC0415
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(LFX_STANDIN))
    try:
        from lfx.graph import Graph  # noqa: PLC0415

        return asyncio.run(Graph.from_payload(copy.deepcopy(g)).arun([{"input_value": text}], outputs=outputs))
    finally:
        sys.path.remove(str(LFX_STANDIN))


class LangflowRunState(unittest.TestCase):
    """What crosses into the guest's lfx run (session, user, context, history, variables)
    and what comes out of it (tokens, stored messages, the context) - as Langflow's run."""

    def run_lfx(self, spec, **kw):
        result = run_runner(spec, env=STANDIN, **kw)
        assert_well_formed(self, result)
        self.assertEqual(result.notes()[0]["executor"], "lfx")
        return result

    def test_user_session_and_context_reach_the_graph_and_the_context_comes_back(self):
        nodes = [chat_input(), component("Identity-id1", "Identity", "Identity", {"input_value": ""}),
                 component("SetContext-c1", "SetContext", "Set",
                           {"key": "answer", "value": "42", "input_value": ""}),
                 chat_output()]
        spec = lfx_spec(graph(nodes, chain(*nodes)), [chat("hi")], session_id="S1", user_id="u-7",
                        context={"request": "r1"})
        result = self.run_lfx(spec)
        seen = json.loads(texts(result)[0][0])
        self.assertEqual(seen, {"flow_id": None, "input": "hi", "session_id": "S1", "user_id": "u-7"})
        # graph.context: the request's context plus what the flow set, as the state frame.
        self.assertEqual(result.of("state"), [{"t": "state", "context": {"request": "r1", "answer": "42"}}])
        step = result.step("Identity-id1")
        self.assertEqual(step["types"], {"text": "Message"})
        self.assertEqual(step["result"]["component_id"], "Identity-id1")
        self.assertEqual(step["result"]["outputs"], step["outputs"])
        self.assertEqual(step["result"]["results"]["text"]["text"], texts(result)[0][0])
        # Chat Input and Chat Output stored their messages in the session: two message frames.
        stored = result.of("message")
        self.assertEqual([(m["id"], m["data"]["sender"], m["data"]["session_id"]) for m in stored],
                         [("ChatInput-in1", "User", "S1"), ("ChatOutput-out1", "Machine", "S1")])
        self.assertEqual(stored[0]["data"]["text"], "hi")
        self.assertTrue(all(m["data"]["id"] for m in stored))

    def test_without_a_session_nothing_is_stored(self):
        result = self.run_lfx(lfx_spec(upper_flow(), [chat("hi")]))
        self.assertEqual(result.of("message"), [])
        self.assertEqual(result.of("state"), [{"t": "state", "context": {}}])

    def test_memory_reads_the_shipped_history_and_what_the_run_stored(self):
        nodes = [chat_input(), memory(), prompt("Prompt-p1", "{history}|{question}", history="", question=""),
                 chat_output()]
        edges = [edge("ChatInput-in1", "message", "Prompt-p1", "question"),
                 edge("Memory-m1", "messages_text", "Prompt-p1", "history"),
                 edge("Prompt-p1", "prompt", "ChatOutput-out1", "input_value")]
        history = [said("User", "my name is Ada"), said("AI", "hello Ada"),
                   said("User", "another session", session="S2")]
        history[0].update(category="message", edit=False, stored_by="another Langflow")  # unknown keys too
        spec = lfx_spec(graph(nodes, edges), [chat("what is my name?")], session_id="S1", history=history)
        result = self.run_lfx(spec)
        # lfx's first layer is [ChatInput-in1, Memory-m1]: the input is stored before Memory reads.
        self.assertEqual(texts(result), [["User: my name is Ada\nAI: hello Ada\nUser: what is my name?"
                                          "|what is my name?"]])
        frame = result.step("Memory-m1")["result"]["results"]["dataframe"]
        self.assertEqual(result.step("Memory-m1")["types"], {"messages_text": "Message", "dataframe": "DataFrame"})
        self.assertTrue(frame)
        self.assertEqual([m["data"]["text"] for m in result.of("message")],
                         ["what is my name?", texts(result)[0][0]])

    def test_streamed_chunks_arrive_as_tokens_before_the_vertex_step(self):
        nodes = [chat_input(), stream_text("StreamText-s1", ["Hel", "lo", " there"]), chat_output()]
        result = self.run_lfx(lfx_spec(graph(nodes, chain(*nodes)), [chat("go")], session_id="S1"))
        order = [(f["t"], f.get("id") or f.get("event", {}).get("id")) for f in result.frames
                 if f["t"] in ("vertex_start", "step", "token", "message")]
        self.assertEqual(order[-7:], [("vertex_start", "ChatOutput-out1"), ("message", "ChatOutput-out1"),
                                      ("token", "ChatOutput-out1"), ("token", "ChatOutput-out1"),
                                      ("token", "ChatOutput-out1"), ("message", "ChatOutput-out1"),
                                      ("step", "ChatOutput-out1")])
        tokens = result.of("token")
        first, final = result.of("message")[-2:]
        self.assertEqual([t["data"]["chunk"] for t in tokens], ["Hel", "lo", " there"])
        self.assertEqual({t["data"]["id"] for t in tokens}, {first["data"]["id"]})
        # Stored with empty text while it streams, then updated (same id) with the whole text.
        self.assertEqual((first["data"]["text"], final["data"]["text"]), ("", "Hello there"))
        self.assertEqual(final["data"]["id"], first["data"]["id"])
        self.assertEqual(texts(result), [["Hello there"]])

    def test_a_stream_nobody_stores_is_drained_without_tokens(self):
        nodes = [chat_input(), stream_text("StreamText-s1", ["a", "b"]), chat_output()]
        result = self.run_lfx(lfx_spec(graph(nodes, chain(*nodes)), [chat("go")]))
        self.assertEqual(result.of("token"), [])
        self.assertEqual(texts(result), [["ab"]])

    def test_a_variable_reaches_its_component_and_no_frame(self):
        secret = "sk-guestflow-test-0123456789"
        key = component("KeyCheck-k1", "KeyCheck", "Key Check", {"api_key": "OPENAI_API_KEY"})
        key["data"]["node"]["template"]["api_key"]["load_from_db"] = True
        nodes = [chat_input(), key, chat_output()]
        spec = lfx_spec(graph(nodes, [edge("KeyCheck-k1", "text", "ChatOutput-out1", "input_value")]),
                        [chat("x")])
        result = self.run_lfx(spec, files={"variables.json": json.dumps({"OPENAI_API_KEY": secret}).encode()})
        digest = hashlib.sha256(secret.encode()).hexdigest()
        self.assertEqual(texts(result), [[f"sha256={digest} length={len(secret)}"]])
        self.assertNotIn(secret.encode(), b"".join(result.lines))

    def test_a_loop_runs_its_body_once_per_item_inside_the_loop_vertex(self):
        result = self.run_lfx(lfx_spec(loop_graph(uppercase("Uppercase-up1")), [chat("a\nb\nc")], outputs=["Loop"]))
        # The body is a subgraph the Loop runs per item: it gets no step of its own.
        self.assertEqual([s["id"] for s in result.steps], ["ChatInput-in1", "Lines-x1", "LoopComponent-l1"])
        done = result.step("LoopComponent-l1")["outputs"]["done"]
        self.assertEqual(done, {"message": [{"text": "A"}, {"text": "B"}, {"text": "C"}], "type": "array"})
        self.assertEqual(result.step("LoopComponent-l1")["types"], {"item": "Data", "done": "DataFrame"})

    def test_the_guest_s_loop_gives_what_the_stand_in_gives_in_process(self):
        g = loop_graph(uppercase("Uppercase-up1"))
        guest = self.run_lfx(lfx_spec(copy.deepcopy(g), [chat("x\ny\nz")], outputs=["Loop"]))
        in_process = in_process_run(g, "x\ny\nz", ["Loop"])
        done = in_process[0].outputs[0].results["done"]
        self.assertEqual([d.data for d in done.to_data_list()], [{"text": "X"}, {"text": "Y"}, {"text": "Z"}])
        self.assertEqual(guest.run_outputs[0]["outputs"][0]["results"]["done"], done.to_dict())

    def test_a_loop_target_handle_names_the_field_as_lfx_reads_it(self):
        # Langflow writes the edge back into a Loop's `item` with a loop target handle
        # ({name, id, output_types}, no fieldName); lfx's Edge takes its field from `name`.
        nodes = [chat_input(), loop_node(), uppercase("Uppercase-up1")]
        back = edge("Uppercase-up1", "text", "LoopComponent-l1", "item")
        back["data"]["targetHandle"] = {"name": "item", "id": "LoopComponent-l1", "output_types": ["Data"]}
        edges = [edge("ChatInput-in1", "message", "LoopComponent-l1", "data"),
                 edge("LoopComponent-l1", "item", "Uppercase-up1", "input_value"), back]
        parsed = import_guest("flow_graph").Graph(graph(nodes, edges))
        self.assertEqual([(e.source, e.target, e.field) for e in parsed.edges][-1],
                         ("Uppercase-up1", "LoopComponent-l1", "item"))

    def test_a_loop_exported_with_its_loop_target_handle_runs_as_in_process(self):
        # The same Loop flow as Langflow exports it: the feedback edge's handle is the
        # Loop output's ({name, id, output_types}); both the guest and lfx in process read it.
        g = loop_graph(uppercase("Uppercase-up1"))
        g["edges"][-1]["data"]["targetHandle"] = {"name": "item", "id": "LoopComponent-l1", "output_types": ["Data"]}
        guest = self.run_lfx(lfx_spec(copy.deepcopy(g), [chat("p\nq")], outputs=["Loop"]))
        in_process = in_process_run(g, "p\nq", ["Loop"])
        done = in_process[0].outputs[0].results["done"]
        self.assertEqual([d.data for d in done.to_data_list()], [{"text": "P"}, {"text": "Q"}])
        self.assertEqual(guest.run_outputs[0]["outputs"][0]["results"]["done"], done.to_dict())

    def test_a_failing_loop_body_fails_the_loop_with_langflow_s_text(self):
        result = self.run_lfx(lfx_spec(loop_graph(raising("Raise-r1", "bad item")), [chat("a")]))
        failed = result.steps[-1]
        self.assertEqual((failed["id"], failed["valid"]), ("LoopComponent-l1", False))
        self.assertEqual(failed["error"], "Error building Component Raise: \n\nbad item (input: a)")


class StandInInProcess(unittest.TestCase):
    """The stand-in lfx in this process raises and streams as SOURCES.md says Langflow does."""

    def setUp(self):
        import sys  # noqa: PLC0415

        sys.path.insert(0, str(LFX_STANDIN))
        self.addCleanup(sys.path.remove, str(LFX_STANDIN))
        quiet = contextlib.redirect_stdout(io.StringIO())  # Raise prints before it fails
        quiet.__enter__()
        self.addCleanup(quiet.__exit__, None, None, None)

    def failing(self):
        from lfx.graph import Graph  # noqa: PLC0415

        nodes = [chat_input(), raising("Raise-r1", "boom"), chat_output()]
        return Graph.from_payload(graph(nodes, chain(*nodes)))

    def test_the_run_path_raises_error_running_graph(self):
        import asyncio  # noqa: PLC0415

        with self.assertRaises(ValueError) as caught:
            asyncio.run(self.failing().arun([{"input_value": "hi"}]))
        self.assertEqual(str(caught.exception), "Error running graph: Error building Component Raise: \n\nboom (input: hi)")
        self.assertEqual(type(caught.exception.__cause__).__name__, "ComponentBuildError")

    def test_the_stream_yields_the_steps_before_the_failure_then_raises(self):
        import asyncio  # noqa: PLC0415

        from lfx.events.event_manager import create_default_event_manager  # noqa: PLC0415
        from lfx.exceptions.component import ComponentBuildError  # noqa: PLC0415
        from lfx.execution import get_default_coordinator  # noqa: PLC0415
        from lfx.schema.schema import InputValueRequest  # noqa: PLC0415

        queue: asyncio.Queue = asyncio.Queue()
        seen = []

        async def run():
            manager = create_default_event_manager(queue)
            async for item in get_default_coordinator().stream(
                    self.failing(), initial_inputs=InputValueRequest(input_value="hi"), event_manager=manager):
                seen.append(item.vertex.id)

        with self.assertRaises(ComponentBuildError) as caught:
            asyncio.run(run())
        self.assertEqual(seen, ["ChatInput-in1"])
        self.assertEqual(str(caught.exception), "Error building Component Raise: \n\nboom (input: hi)")
        events = [json.loads(queue.get_nowait()[1])["event"] for _ in range(queue.qsize())]
        self.assertEqual(events, ["build_start", "end_vertex", "build_start"])


class Timeout(unittest.TestCase):
    def test_a_run_killed_by_its_timeout_leaves_every_frame_so_far_intact(self):
        nodes = [chat_input(), sleep("Sleep-s1", 120), chat_output()]
        spec = lfx_spec(graph(nodes, chain(*nodes)), [chat("tick")])
        result = run_runner(spec, env=STANDIN, wrap=["timeout", "--signal=KILL", "4"])
        # timeout sends KILL to its whole process group, itself included: a shell sees 137.
        self.assertIn(result.returncode, (-9, 128 + 9), result.stderr)
        self.assertLess(result.elapsed, 60)
        for line in result.lines:  # RunResult parsed every line: none is cut short
            self.assertTrue(line.endswith(b"\n"))
        self.assertEqual([f["t"] for f in result.frames],
                         ["note", "vertex_start", "step", "vertex_start"])
        self.assertEqual(result.frames[0]["executor"], "lfx")
        self.assertEqual(result.step("ChatInput-in1")["valid"], True)
        self.assertEqual(result.frames[-1], {"t": "vertex_start", "id": "Sleep-s1", "name": "Sleep"})
        self.assertNotIn(b"sleeping", b"".join(result.lines))  # its print stayed off the frames


class ExecutorChoice(unittest.TestCase):
    def test_auto_picks_lfx_when_it_is_usable(self):
        result = run_runner(spec_for(upper_flow(), [chat("a")], executor="auto"), env=STANDIN)
        assert_well_formed(self, result)
        note_ = result.notes()[0]
        self.assertEqual((note_["executor"], note_["reason"]), ("lfx", "executor auto: lfx is installed"))
        self.assertEqual(texts(result), [["A"]])

    @unittest.skipIf(LFX_INSTALLED, "lfx is installed here")
    def test_auto_picks_core_when_lfx_is_absent(self):
        result = run_runner(spec_for(grouped_flow(), [chat("Ada")], executor="auto"))
        assert_well_formed(self, result)
        self.assertEqual((result.notes()[0]["executor"], result.notes()[0]["reason"]),
                         ("core", "executor auto: lfx is not installed"))
        self.assertNotIn("lfx_version", result.notes()[0])

    def test_auto_picks_core_when_lfx_is_broken(self):
        env = {"PYTHONPATH": str(FIXTURES / "broken_lfx")}
        result = run_runner(spec_for(grouped_flow(), [chat("Ada")], executor="auto"), env=env)
        assert_well_formed(self, result)
        self.assertEqual(result.notes()[0]["executor"], "core")
        self.assertIn("executor auto: lfx is not usable (ImportError", result.notes()[0]["reason"])

    @unittest.skipIf(LFX_INSTALLED, "lfx is installed here")
    def test_lfx_without_lfx_is_an_unavailable_fatal_at_once(self):
        result = run_runner(lfx_spec(grouped_flow(), [chat("Ada")]))
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["fatal"])
        fatal = result.fatal
        self.assertEqual(fatal["code"], "unavailable")
        self.assertEqual(fatal["traceback"], "")
        for needle in ("executor lfx: lfx is not usable in this guest",
                       "ModuleNotFoundError: No module named 'lfx'",
                       "guestflow image add NAME --python-env PREFIX",
                       "guestflow run --image NAME --executor lfx"):
            self.assertIn(needle, fatal["error"])

    def test_without_lfx_path_py_beside_the_runner(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in RUN_FILES:  # the runner and its modules, without lfx_path.py
                if name != "lfx_path.py":
                    shutil.copy(GUEST / name, os.path.join(tmp, name))
            lonely = os.path.join(tmp, "runner.py")
            result = run_runner(lfx_spec(upper_flow(), [chat("a")]), env=STANDIN, runner=lonely)
            assert_well_formed(self, result, success=False)
            self.assertNotIn("code", result.fatal)  # the host's fault: guest_failed
            self.assertIn("lfx_path.py is missing beside", result.fatal["error"])
            core_only = spec_for(grouped_flow(), [chat("Ada")], executor="auto")
            result = run_runner(core_only, env=STANDIN, runner=lonely)
            assert_well_formed(self, result)
            self.assertEqual(result.notes()[0]["executor"], "core")
            self.assertIn("lfx_path.py is missing", result.notes()[0]["reason"])

    def test_core_refuses_every_type_it_cannot_build_up_front(self):
        nodes = [chat_input(), uppercase("Uppercase-up1", "Shout"), sleep("Sleep-s1", 30),
                 raising("Raise-r1", "boom"), chat_output()]
        result = run_runner(spec_for(graph(nodes, chain(*nodes)), [chat("a")], executor="core"),
                            env=STANDIN)
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["note", "fatal"])
        self.assertEqual(result.fatal["code"], "bad_request")
        self.assertEqual(result.fatal["unsupported"], [
            {"id": "Uppercase-up1", "name": "Shout", "type": "Uppercase"},
            {"id": "Sleep-s1", "name": "Sleep", "type": "Sleep"},
            {"id": "Raise-r1", "name": "Raise", "type": "Raise"}])
        self.assertIn('3 vertices have component types it does not build: Uppercase-up1 "Shout" '
                      '(Uppercase); Sleep-s1 "Sleep" (Sleep); Raise-r1 "Raise" (Raise)',
                      result.fatal["error"])
        self.assertIn("--executor lfx", result.fatal["error"])
        self.assertLess(result.elapsed, 20)  # the 30 s Sleep never started


if __name__ == "__main__":
    unittest.main()
