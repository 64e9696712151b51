"""guest/runner.py + guest/lfx_path.py end to end, through the stand-in lfx package.

tests/fixtures/lfx_guest/lfx implements the part of lfx that lfx_path.py drives (see its
__init__.py); it builds ChatInput, ChatOutput, Prompt, ... and the test-only Uppercase,
Sleep and Raise, none of which guestflow's core executor builds, so a flow using them can
only have run through lfx_path.py and the stand-in.
"""

from __future__ import annotations

import copy
import importlib.util
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
