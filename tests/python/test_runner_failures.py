"""guest/runner.py failure semantics: failing vertices, bad specs, lfx fallback and install."""

from __future__ import annotations

import copy
import importlib.util
import os
import unittest

from .langflow_shapes import note
from .test_runner_harness import (
    PY,
    python_graph,
    FIXTURES,
    assert_well_formed,
    chat,
    flow_graph,
    node_by_id,
    run_runner,
    set_field,
    spec_for,
)


class FailingVertices(unittest.TestCase):
    def test_raising_code_fails_its_vertex_and_the_run_stops_there(self):
        code = "print('before the failure')\nraise ValueError('boom: ' + input_value)\n"
        result = run_runner(spec_for(python_graph(code), [chat("x")]))
        assert_well_formed(self, result)  # still outputs + done, exit 0: the host decides
        step = result.step(PY)
        self.assertFalse(step["valid"])
        self.assertEqual(step["error"], "ValueError: boom: x")  # the exception's own text, as lfx's {exc}
        self.assertIn("before the failure", step["logs"])
        self.assertTrue(step["logs"].endswith(step["error"]))
        self.assertEqual(step["outputs"]["error"], step["error"])  # what the host reports
        trace = step["outputs"]["results"]["message"]["stackTrace"]
        self.assertEqual(step["outputs"]["results"]["type"], "error")
        self.assertIn("line 2", trace)
        self.assertIn("raise ValueError", trace)
        self.assertNotIn("runner.py", trace)  # only the user's frames
        self.assertNotIn("result", step)  # a failed vertex has no ResultData
        # Langflow stops at the first failure: its step is the last, nothing else builds
        self.assertEqual(result.steps[-1]["id"], PY)
        self.assertEqual([s["id"] for s in result.steps], ["ChatInput-Wc5sA", PY])
        self.assertEqual([f["id"] for f in result.of("vertex_start")], ["ChatInput-Wc5sA", PY])
        self.assertEqual(result.run_outputs, [{"inputs": {"input_value": "x"}, "outputs": []}])

    def test_the_run_stops_at_the_first_failure_even_before_independent_branches(self):
        graph = set_field(flow_graph("diamond"), "Prompt-Rt2cE", "template", "{nobody}")
        spec = spec_for(graph, [chat("hi"), chat("second input never runs")],
                        outputs=["Prompt-Lf1bW", "Chat Output"])
        result = run_runner(spec)
        assert_well_formed(self, result)
        # build order: ChatInput, Prompt-Lf1bW, Prompt-Rt2cE (fails), Prompt-Jn3dR, ChatOutput
        self.assertEqual([(s["id"], s["valid"]) for s in result.steps],
                         [("ChatInput-Dm9aQ", True), ("Prompt-Lf1bW", True),
                          ("Prompt-Rt2cE", False)])
        self.assertFalse(any(s.get("error", "").startswith("not built") for s in result.steps))
        self.assertEqual(len(result.run_outputs), 1)  # the second input's run never started
        outputs = result.run_outputs[0]["outputs"]  # what was built and asked for
        self.assertEqual([o["component_id"] for o in outputs], ["Prompt-Lf1bW"])
        self.assertEqual(outputs[0]["results"]["prompt"]["text"], "Shout: hi!")

    def test_user_code_failures_are_vertex_failures(self):
        cases = [
            ("x = (", "", "SyntaxError"),
            ("print(1)", "nosuchmodule_guestflow", "Could not import module nosuchmodule_guestflow"),
            ("import sys\nsys.exit(3)", "", "SystemExit: 3"),
            ("undefined_name", "", "NameError: name 'undefined_name' is not defined"),
        ]
        for code, imports, expected in cases:
            with self.subTest(code=code):
                result = run_runner(spec_for(python_graph(code, imports), [chat("x")]))
                assert_well_formed(self, result)
                self.assertFalse(result.step(PY)["valid"])
                self.assertIn(expected, result.step(PY)["error"])

    def test_sys_exit_zero_ends_the_code_normally(self):
        result = run_runner(spec_for(python_graph("print('ok')\nimport sys\nsys.exit(0)"),
                                     [chat("x")]))
        assert_well_formed(self, result)
        self.assertTrue(result.step(PY)["valid"])
        self.assertEqual(result.run_outputs[0]["outputs"][0]["results"]["message"]["text"], "ok")

    def test_prompt_variable_without_a_value_fails_clearly(self):
        graph = set_field(flow_graph("prompt"), "Prompt-mF4cL", "template", "Hi {nobody}")
        result = run_runner(spec_for(graph, [chat("x")]))
        assert_well_formed(self, result)
        step = result.step("Prompt-mF4cL")
        self.assertFalse(step["valid"])
        self.assertIn("{nobody}", step["error"])

    def test_code_can_arrive_on_the_python_code_edge(self):
        graph = copy.deepcopy(flow_graph("python"))
        graph["edges"][0]["data"]["targetHandle"]["fieldName"] = "python_code"
        result = run_runner(spec_for(graph, [chat("print(6 * 7)")]))
        assert_well_formed(self, result)
        self.assertEqual(result.run_outputs[0]["outputs"][0]["results"]["message"]["text"], "42")


def broken(spec: dict, path: str, value) -> dict:
    """A copy of `spec` with the value at dotted `path` replaced (or deleted if value is ...)."""
    spec = copy.deepcopy(spec)
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    target = spec
    for key in keys[:-1]:
        target = target[key]
    if value is ...:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return spec


class BadSpecs(unittest.TestCase):
    def assert_fatal(self, result, *needles, code="bad_request"):
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["fatal"])
        error = result.fatal["error"]
        for needle in needles:
            self.assertIn(needle, error)
        self.assertEqual(result.fatal["traceback"], "")  # a caller error, not a runner fault
        self.assertEqual(result.fatal.get("code"), code)

    def test_each_bad_spec_is_one_fatal_frame_naming_the_field(self):
        good = spec_for(flow_graph("prompt"), [chat("x")])
        no_field = copy.deepcopy(good)
        del no_field["graph"]["edges"][0]["data"]["targetHandle"]["fieldName"]
        del no_field["graph"]["edges"][0]["targetHandle"]
        dup = copy.deepcopy(good)
        dup["graph"]["nodes"].append(copy.deepcopy(node_by_id(dup["graph"], "ChatInput-Zq1wE")))
        at = {n["id"]: i for i, n in enumerate(good["graph"]["nodes"])}  # other nodes may come and go
        inp, mid, out = at["ChatInput-Zq1wE"], at["Prompt-mF4cL"], at["ChatOutput-Ty7uN"]
        into_out = next(i for i, e in enumerate(good["graph"]["edges"]) if e["target"] == "ChatOutput-Ty7uN")
        cases = [
            (broken(good, "graph.nodes", ...), ["graph.nodes", "required"]),
            (broken(good, "graph.edges", ...), ["graph.edges", "required"]),
            (broken(good, "graph", ...), ["spec.graph", "required"]),
            (broken(good, "graph.nodes", []), ["graph.nodes", "no vertices"]),
            (broken(good, f"graph.nodes.{inp}.id", ...), [f"graph.nodes[{inp}].id"]),
            (broken(good, f"graph.nodes.{mid}.data.type", 7), [f"graph.nodes[{mid}].data.type"]),
            (broken(good, f"graph.nodes.{mid}.data.node.template", []),
             [f"graph.nodes[{mid}].data.node.template"]),
            (broken(good, f"graph.nodes.{mid}.type", 3), [f"graph.nodes[{mid}].type"]),
            # Without a template it is no component: ignored, so the edges into it dangle.
            (broken(good, f"graph.nodes.{out}.data.node.template", ...),
             [f"graph.edges[{into_out}].target", "ChatOutput-Ty7uN", "no data.node.template", "dangles"]),
            (broken(good, "graph.nodes", [note("note-only")]),
             ["graph.nodes", "no vertices", "1 non-component nodes ignored"]),
            (dup, [f"graph.nodes[{len(good['graph']['nodes'])}].id", "duplicate", "ChatInput-Zq1wE"]),
            (broken(good, "graph.edges.1.target", "Nowhere-1"),
             ["graph.edges[1].target", "Nowhere-1", "dangling"]),
            (no_field, ["graph.edges[0].data.targetHandle.fieldName"]),
            (broken(good, "inputs", {"input_value": "x"}), ["spec.inputs", "list"]),
            (broken(good, "inputs.0.input_value", 5), ["spec.inputs[0].input_value"]),
            (broken(good, "inputs.0.type", "voice"), ["spec.inputs[0].type"]),
            (broken(good, "inputs.0.components", "ChatInput-Zq1wE"), ["spec.inputs[0].components"]),
            (broken(good, "outputs", [1]), ["spec.outputs"]),
            (broken(good, "runtime_options", []), ["spec.runtime_options"]),
            (broken(good, "runtime_options", {"max_iterations": "9"}),
             ["spec.runtime_options.max_iterations"]),
            (broken(good, "install_lfx", "yes"), ["spec.install_lfx"]),
            (broken(good, "pip", ["ok", ""]), ["spec.pip[1]"]),
            (broken(good, "executor", "fast"), ["executor:", "auto, core, lfx", "'fast'"]),
            (broken(good, "executor", 7), ["executor:", "auto, core, lfx", "(got 7)"]),
            (broken(good, "executor", "LFX"), ["executor:"]),
            ({**good, "install_lfx": True}, ["install_lfx", "executor lfx or auto"]),
            ([good], ["spec", "JSON object"]),
        ]
        for spec, needles in cases:
            with self.subTest(needles=needles):
                self.assert_fatal(run_runner(spec), "invalid spec", *needles)

    def test_unreadable_or_malformed_spec_files(self):
        self.assert_fatal(run_runner(spec_text='{"graph": '), "invalid spec", "not valid JSON")
        self.assert_fatal(run_runner(spec_text=b"\xff\xfe{}"), "invalid spec", "UTF-8")
        # The host's own mistakes are not the caller's: no code (the host reports guest_failed).
        self.assert_fatal(run_runner(args=["/nonexistent/spec.json"]), "cannot read", code=None)
        self.assert_fatal(run_runner(args=[]), "usage", code=None)

    def test_executor_may_be_absent_or_null_and_means_auto(self):
        absent = spec_for(flow_graph("hello"), [chat("hi")], executor=None)
        for spec in (absent, {**absent, "executor": None}):
            with self.subTest(spec=spec.get("executor", "absent")):
                result = run_runner(spec, env={"PYTHONPATH": str(FIXTURES / "broken_lfx")})
                assert_well_formed(self, result)
                self.assertEqual(result.notes()[0]["executor"], "core")
                self.assertIn("executor auto", result.notes()[0]["reason"])


class LfxPath(unittest.TestCase):
    """Choosing the executor without an lfx (see test_runner_lfx.py for runs through one)."""

    @unittest.skipIf(importlib.util.find_spec("lfx"), "lfx is installed here")
    def test_without_lfx_auto_runs_the_core_executor(self):
        result = run_runner(spec_for(flow_graph("hello"), [chat("hi")], executor="auto"))
        assert_well_formed(self, result)
        self.assertEqual((result.notes()[0]["executor"], result.notes()[0]["reason"]),
                         ("core", "executor auto: lfx is not installed"))

    def test_a_broken_lfx_makes_auto_fall_back_to_the_core_executor(self):
        env = {"PYTHONPATH": str(FIXTURES / "broken_lfx")}
        result = run_runner(spec_for(flow_graph("hello"), [chat("hi")], executor="auto"), env=env)
        assert_well_formed(self, result)
        note = result.notes()[0]
        self.assertEqual(note["executor"], "core")
        self.assertIn("lfx is not usable", note["reason"])
        self.assertIn("guestflow test fixture: a broken lfx", note["reason"])
        self.assertEqual(result.run_outputs[0]["outputs"][0]["results"]["message"]["text"], "hi")

    def test_core_requested_never_imports_lfx(self):
        env = {"PYTHONPATH": str(FIXTURES / "broken_lfx")}
        result = run_runner(spec_for(flow_graph("hello"), [chat("hi")], executor="core"), env=env)
        assert_well_formed(self, result)
        self.assertEqual((result.notes()[0]["executor"], result.notes()[0]["reason"]),
                         ("core", "executor core was requested"))

    def test_requiring_a_broken_lfx_is_unavailable_and_never_falls_back(self):
        env = {"PYTHONPATH": str(FIXTURES / "broken_lfx")}
        result = run_runner(spec_for(flow_graph("hello"), [chat("hi")], executor="lfx"), env=env)
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["fatal"])  # nothing ran
        fatal = result.fatal
        self.assertEqual(fatal["code"], "unavailable")
        for needle in ("lfx is not usable in this guest",
                       "ImportError: No module named 'pydantic' (guestflow test fixture",
                       "guestflow image add NAME --python-env PREFIX",
                       "guestflow run --image NAME --executor lfx"):
            self.assertIn(needle, fatal["error"])

    def test_install_lfx_without_network_is_a_clear_fatal(self):
        # pip may only talk to a closed loopback port: nothing leaves the machine.
        env = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_CONFIG_FILE": os.devnull,
               "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "PIP_NO_CACHE_DIR": "1",
               "NO_PROXY": "*", "no_proxy": "*"}
        spec = spec_for(flow_graph("hello"), [chat("hi")], install_lfx=True,
                        pip=["langchain-experimental"])
        result = run_runner({**spec, "executor": "auto"}, env=env, timeout=60)
        assert_well_formed(self, result, success=False)
        error = result.fatal["error"]
        self.assertEqual(result.fatal["code"], "unavailable")
        self.assertIn("install_lfx", error)
        self.assertIn("python3 -m pip install lfx langchain-experimental", error)
        self.assertIn("failed", error)
        self.assertIn("guestflow image add NAME --python-env PREFIX", error)
        self.assertIn("CREATEOS_EXECUTOR_ROOTFS", error)
        self.assertIn("127.0.0.1:9", error)  # pip's own output: it only looked at loopback
        self.assertEqual(result.of("vertex_start"), [])
        self.assertEqual(result.notes()[0]["install"], "lfx")


if __name__ == "__main__":
    unittest.main()
