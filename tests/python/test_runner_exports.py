"""guest/runner.py on graphs shaped like real Langflow exports, with the core executor:
canvas notes, groups, frozen vertices, and the up-front refusal of what it cannot build."""

from __future__ import annotations

import copy
import os
import tempfile
import unittest

from .langflow_shapes import (
    chain,
    chat_input,
    chat_output,
    component,
    edge,
    graph,
    group,
    into_group,
    note,
    prompt,
    python_code,
)
from .test_runner_harness import (
    FIXTURES,
    assert_well_formed,
    chat,
    flow_graph,
    node_by_id,
    run_runner,
    spec_for,
)


def text_of(result, run: int = 0, at: int = 0) -> str:
    data = result.run_outputs[run]["outputs"][at]
    return data["results"][next(iter(data["results"]))]["text"]


def grouped_flow(*, frozen: bool = False) -> dict:
    """ChatInput -> Group[Prompt-p1 "{greeting}, {name}!" -> Prompt-p2 "<<{inner}>>"] -> ChatOutput.

    The group overrides p1's `greeting` (Hello) with Bonjour through its proxied field.
    """
    p1 = prompt("Prompt-p1", "{greeting}, {name}!", "Greeting", greeting="Hello", name="")
    p2 = prompt("Prompt-p2", "<<{inner}>>", "Brackets", inner="")
    g = group("Group-g1", [p1, p2], [edge("Prompt-p1", "prompt", "Prompt-p2", "inner")],
              fields=[("Prompt-p1", "greeting", "Bonjour"), ("Prompt-p1", "name", "")],
              outputs=[("Prompt-p2", "prompt")], frozen=frozen)
    return graph([chat_input(), g, chat_output()],
                 [into_group("ChatInput-in1", "message", "Group-g1", "Prompt-p1", "name"),
                  edge("Group-g1", "Prompt-p2_prompt", "ChatOutput-out1", "input_value")])


class CanvasNodes(unittest.TestCase):
    def test_notes_and_other_non_component_nodes_are_ignored_not_refused(self):
        base = flow_graph("hello")
        no_type = copy.deepcopy(node_by_id(base, "ChatInput-hK3vQ"))
        no_type["id"] = no_type["data"]["id"] = "Orphan-1"
        del no_type["data"]["type"]
        no_template = copy.deepcopy(no_type)
        no_template["id"] = "Orphan-2"
        no_template["data"]["type"] = "ChatInput"
        del no_template["data"]["node"]["template"]
        other = {"id": "frame-1", "type": "groupFrame", "data": {"label": "a canvas frame"}}
        bare_note = {"id": "note-2", "type": "noteNode", "data": {"node": {"description": "old"}}}
        g = graph([note("note-1", "# Read me")] + base["nodes"] + [no_type, no_template, other, bare_note],
                  base["edges"])
        result = run_runner(spec_for(g, [chat("hi")]))
        assert_well_formed(self, result)
        self.assertEqual([s["id"] for s in result.steps], ["ChatInput-hK3vQ", "ChatOutput-p8RtZ"])
        self.assertEqual(result.notes()[0]["ignored"],
                         ["note-1", "Orphan-1", "Orphan-2", "frame-1", "note-2"])
        self.assertEqual(result.notes()[0]["vertices"], 2)
        self.assertEqual(text_of(result), "hi")

    def test_an_exported_flow_file_loads_as_is(self):
        export = {"id": "8a2c", "name": "Hello", "description": "exported from Langflow",
                  "is_component": False, "endpoint_name": None, "icon": None,
                  "data": {**flow_graph("hello"), "viewport": {"x": 0, "y": 0, "zoom": 1}}}
        result = run_runner(spec_for(export, [chat("from a file")]))
        assert_well_formed(self, result)
        self.assertEqual(text_of(result), "from a file")


class Groups(unittest.TestCase):
    """Langflow flattens a group before it builds anything (process_flow); so does the runner."""

    def test_a_group_runs_its_vertices_with_its_field_values(self):
        result = run_runner(spec_for(grouped_flow(), [chat("Ada")]))
        assert_well_formed(self, result)
        self.assertEqual(text_of(result), "<<Bonjour, Ada!>>")
        self.assertEqual([s["id"] for s in result.steps],
                         ["ChatInput-in1", "Prompt-p1", "Prompt-p2", "ChatOutput-out1"])
        self.assertEqual([s["name"] for s in result.steps],
                         ["Chat Input", "Greeting", "Brackets", "Chat Output"])
        note_ = result.notes()[0]
        self.assertEqual((note_["groups"], note_["vertices"], note_["edges"]), (["Group-g1"], 4, 3))
        result = run_runner(spec_for(grouped_flow(), [chat("Ada")], outputs=["Brackets"]))
        self.assertEqual([o["component_id"] for o in result.run_outputs[0]["outputs"]], ["Prompt-p2"])

    def test_nested_groups_are_flattened_too(self):
        inner = grouped_flow()
        g1 = inner["nodes"][1]
        outer = group("Group-h1", [g1], [],
                      fields=[("Group-g1", "name_Prompt-p1", "")],
                      outputs=[("Group-g1", "Prompt-p2_prompt")], display_name="Outer")
        g = graph([chat_input(), outer, chat_output()],
                  [into_group("ChatInput-in1", "message", "Group-h1", "Group-g1", "name_Prompt-p1"),
                   edge("Group-h1", "Group-g1_Prompt-p2_prompt", "ChatOutput-out1", "input_value")])
        result = run_runner(spec_for(g, [chat("Ada")]))
        assert_well_formed(self, result)
        self.assertEqual(text_of(result), "<<Bonjour, Ada!>>")
        self.assertEqual(result.notes()[0]["groups"], ["Group-h1", "Group-g1"])

    def test_an_output_without_a_proxy_comes_from_the_groups_last_vertex(self):
        g = grouped_flow()
        g["nodes"][1]["data"]["node"]["outputs"] = []
        g["edges"][1]["data"]["sourceHandle"]["name"] = "prompt"
        result = run_runner(spec_for(g, [chat("Ada")]))
        assert_well_formed(self, result)
        self.assertEqual(text_of(result), "<<Bonjour, Ada!>>")

    def test_a_frozen_group_freezes_its_vertices_which_still_build(self):
        result = run_runner(spec_for(grouped_flow(frozen=True), [chat("Ada")]))
        assert_well_formed(self, result)
        warning = next(n for n in result.notes() if "frozen" in n.get("warning", ""))
        self.assertEqual(warning["vertices"], ["Prompt-p1", "Prompt-p2"])
        self.assertEqual(text_of(result), "<<Bonjour, Ada!>>")

    def test_malformed_groups_are_bad_specs_naming_the_field(self):
        no_proxy = grouped_flow()
        del no_proxy["edges"][0]["data"]["targetHandle"]["proxy"]
        stranger = grouped_flow()
        stranger["edges"][0]["data"]["targetHandle"]["proxy"]["id"] = "Prompt-zz"
        no_nodes = grouped_flow()
        del no_nodes["nodes"][1]["data"]["node"]["flow"]["data"]["nodes"]
        bad_inner = grouped_flow()
        bad_inner["nodes"][1]["data"]["node"]["flow"]["data"]["nodes"][0]["data"]["type"] = 5
        cases = [
            (no_proxy, "graph.edges[0].data.targetHandle.proxy: required for an edge into group 'Group-g1'"),
            (stranger, "'Prompt-zz' is not a vertex of group 'Group-g1'"),
            (no_nodes, "graph.nodes[1].data.node.flow.data.nodes: required"),
            (bad_inner, "graph.nodes[1].data.node.flow.data.nodes[0].data.type"),
        ]
        for g, needle in cases:
            with self.subTest(needle=needle):
                result = run_runner(spec_for(g, [chat("Ada")]))
                assert_well_formed(self, result, success=False)
                self.assertEqual(result.fatal["code"], "bad_request")
                self.assertIn("invalid spec: ", result.fatal["error"])
                self.assertIn(needle, result.fatal["error"])


class Frozen(unittest.TestCase):
    def test_a_frozen_vertex_builds_and_a_note_says_so(self):
        g = copy.deepcopy(flow_graph("prompt"))
        node_by_id(g, "Prompt-mF4cL")["data"]["node"]["frozen"] = True
        result = run_runner(spec_for(g, [chat("Ada"), chat("Bob")]))
        assert_well_formed(self, result)
        warning = next(n for n in result.notes() if "frozen" in n.get("warning", ""))
        self.assertEqual(warning["vertices"], ["Prompt-mF4cL"])
        self.assertIn("no results cached", warning["warning"])
        # Each run builds it again: nothing is carried over from an earlier run.
        self.assertEqual([text_of(result, run) for run in (0, 1)],
                         ["Say hello to Ada in French.", "Say hello to Bob in French."])
        self.assertFalse(result.run_outputs[0]["outputs"][0]["used_frozen_result"])


class CoreRefusal(unittest.TestCase):
    def refused_flow(self, marker: str) -> dict:
        """A Python Interpreter that would leave `marker` behind, then two unsupported types."""
        code = f"open({marker!r}, 'w').write('ran')\nprint('side effect done')"
        nodes = [chat_input(), python_code("PythonREPLComponent-py1", code),
                 component("OpenAIModel-m1", "OpenAIModel", "OpenAI", {"input_value": ""}),
                 component("Agent-a1", "Agent", "Agent", {"input_value": ""}), chat_output()]
        return graph(nodes, chain(*nodes))

    def test_every_unsupported_vertex_is_listed_before_any_vertex_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "side-effect")
            result = run_runner(spec_for(self.refused_flow(marker), [chat("hi")]))
            self.assertFalse(os.path.exists(marker), "a vertex ran before the refusal")
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["note", "fatal"])
        self.assertEqual(result.notes()[0]["executor"], "core")
        fatal = result.fatal
        self.assertEqual(fatal["code"], "bad_request")
        self.assertEqual(fatal["traceback"], "")
        self.assertEqual(fatal["unsupported"], [
            {"id": "OpenAIModel-m1", "name": "OpenAI", "type": "OpenAIModel"},
            {"id": "Agent-a1", "name": "Agent", "type": "Agent"}])
        self.assertNotIn("cycle", fatal)
        error = fatal["error"]
        for needle in ("core executor cannot run this flow, so no vertex ran",
                       "2 vertices have component types it does not build",
                       'OpenAIModel-m1 "OpenAI" (OpenAIModel)', 'Agent-a1 "Agent" (Agent)',
                       "PythonREPLComponent",  # what it does build
                       "guestflow image add NAME --python-env PREFIX",
                       "guestflow run --image NAME --executor lfx"):
            self.assertIn(needle, error)
        self.assertNotIn("executor auto", error)

    def test_when_auto_fell_back_the_refusal_says_why(self):
        env = {"PYTHONPATH": str(FIXTURES / "broken_lfx")}
        with tempfile.TemporaryDirectory() as tmp:
            spec = spec_for(self.refused_flow(os.path.join(tmp, "m")), [chat("hi")], executor="auto")
            result = run_runner(spec, env=env)
        assert_well_formed(self, result, success=False)
        self.assertIn("executor auto chose core: executor auto: lfx is not usable (ImportError",
                      result.fatal["error"])

    def test_a_cycle_is_refused_by_the_core_executor_only(self):
        g = copy.deepcopy(flow_graph("prompt"))
        back = copy.deepcopy(g["edges"][1])
        back.update(source="ChatOutput-Ty7uN", target="ChatInput-Zq1wE")
        back.pop("data")
        back["targetHandle"] = back["targetHandle"].replace("ChatOutput-Ty7uN", "ChatInput-Zq1wE")
        g["edges"].append(back)
        result = run_runner(spec_for(g, [chat("x")]))
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["note", "fatal"])
        self.assertEqual(result.fatal["code"], "bad_request")
        self.assertEqual(result.fatal["cycle"], ["ChatInput-Zq1wE", "Prompt-mF4cL", "ChatOutput-Ty7uN"])
        self.assertNotIn("unsupported", result.fatal)
        self.assertIn("the edges form a cycle (through ChatInput-Zq1wE, Prompt-mF4cL, "
                      "ChatOutput-Ty7uN)", result.fatal["error"])
        self.assertIn("--executor lfx", result.fatal["error"])


if __name__ == "__main__":
    unittest.main()
