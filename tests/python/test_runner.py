"""guest/runner.py on the example flows: exact outputs, frame stream shape, live events."""

from __future__ import annotations

import copy
import re
import unittest

from .test_runner_harness import (
    assert_well_formed,
    chat,
    flow_graph,
    node_by_id,
    run_runner,
    set_field,
    spec_for,
    stable,
)

EXAMPLES = ("hello", "prompt", "python", "diamond", "slow")


def texts(result) -> list:
    """Per run, the text of every harvested output vertex."""
    return [[r["results"][next(iter(r["results"]))]["text"] for r in run["outputs"]]
            for run in result.run_outputs]


class ExampleFlows(unittest.TestCase):
    def run_flow(self, name, inputs, **kw):
        result = run_runner(spec_for(flow_graph(name), inputs, **kw))
        assert_well_formed(self, result)
        return result

    def test_hello_echoes_the_input_with_langflow_result_data(self):
        result = self.run_flow("hello", [chat("hi")])
        self.assertEqual(len(result.run_outputs), 1)
        run = result.run_outputs[0]
        self.assertEqual(run["inputs"], {"input_value": "hi"})
        self.assertEqual(len(run["outputs"]), 1)
        data = run["outputs"][0]
        self.assertIsInstance(data["timedelta"], float)
        self.assertGreaterEqual(data["timedelta"], 0.0)
        self.assertRegex(data["duration"], r"^\d+ ms$|^\d+(\.\d+)? seconds?$")
        self.assertRegex(data["results"]["message"]["timestamp"],
                         r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
        self.assertEqual(stable(data), {
            "results": {"message": {
                "text_key": "text", "default_value": "", "text": "hi", "sender": "Machine",
                "sender_name": "AI", "files": [], "session_id": "", "flow_id": None,
                "error": False, "edit": False,
                "properties": {"text_color": "", "background_color": "", "edited": False,
                               "source": {"id": "ChatOutput-p8RtZ", "display_name": "Chat Output",
                                          "source": None},
                               "icon": "", "allow_markdown": False, "positive_feedback": None,
                               "state": "complete", "targets": []},
                "category": "message", "content_blocks": []}},
            "artifacts": {"message": "hi", "sender": "Machine", "sender_name": "AI", "files": [],
                          "type": "object"},
            "outputs": {"message": {"message": "hi", "type": "text"}},
            "logs": {"message": []},
            "messages": [{"message": "hi", "sender": "Machine", "sender_name": "AI",
                          "session_id": "", "component_id": "ChatOutput-p8RtZ", "files": [],
                          "type": "message"}],
            "component_display_name": "Chat Output",
            "component_id": "ChatOutput-p8RtZ",
            "used_frozen_result": False,
        })
        self.assertEqual([(s["id"], s["valid"]) for s in result.steps],
                         [("ChatInput-hK3vQ", True), ("ChatOutput-p8RtZ", True)])
        self.assertEqual(result.step("ChatInput-hK3vQ")["outputs"],
                         {"message": {"message": "hi", "type": "text"}})
        self.assertEqual(result.of("vertex_start"), [
            {"t": "vertex_start", "id": "ChatInput-hK3vQ", "name": "Chat Input"},
            {"t": "vertex_start", "id": "ChatOutput-p8RtZ", "name": "Chat Output"}])

    def test_no_inputs_means_one_run_with_the_template_value(self):
        result = self.run_flow("hello", [])
        self.assertEqual(result.run_outputs[0]["inputs"], {})
        self.assertEqual(texts(result), [["Hello"]])

    def test_prompt_fills_variables_from_an_edge_and_from_a_template_value(self):
        result = self.run_flow("prompt", [chat("Ada")])
        self.assertEqual(texts(result), [["Say hello to Ada in French."]])
        self.assertEqual(result.step("Prompt-mF4cL")["outputs"],
                         {"prompt": {"message": "Say hello to Ada in French.", "type": "text"}})

    def test_python_interpreter_computes_from_the_input(self):
        result = self.run_flow("python", [chat("the cat and the hat")])
        expected = "5 words; most common: the (2); reversed: hat the and cat the"
        self.assertEqual(texts(result), [[expected]])
        step = result.step("PythonREPLComponent-Lr2xB")
        self.assertEqual(step["outputs"], {"results": {"message": {"result": expected},
                                                       "type": "object"}})
        self.assertEqual(step["logs"], expected + "\n")
        self.assertEqual(step["name"], "Python Interpreter")

    def test_diamond_joins_both_branches_in_topological_order(self):
        result = self.run_flow("diamond", [chat("hi")])
        self.assertEqual(texts(result), [["Shout: hi! | Whisper: (hi)"]])
        self.assertEqual([s["id"] for s in result.steps],
                         ["ChatInput-Dm9aQ", "Prompt-Lf1bW", "Prompt-Rt2cE", "Prompt-Jn3dR",
                          "ChatOutput-Dx4eT"])
        self.assertTrue(all(s["valid"] for s in result.steps))

    def test_slow_flow_reports_the_first_vertex_before_the_run_ends(self):
        result = self.run_flow("slow", [chat("tick")])
        self.assertEqual(texts(result), [["slept 2 s for: tick"]])
        first = next(i for i, f in enumerate(result.frames)
                     if f["t"] == "step" and f["event"]["id"] == "ChatInput-Sw1fY")
        # The first vertex's step was on the pipe while the second vertex still slept.
        self.assertGreaterEqual(result.times[-1] - result.times[first], 1.5)
        self.assertGreaterEqual(result.step("PythonREPLComponent-Sl2gU")["duration_ms"], 1900)

    def test_every_example_streams_well_formed_frames(self):
        for name in EXAMPLES[:-1]:  # slow.json has its own test
            with self.subTest(flow=name):
                result = self.run_flow(name, [chat("x y")])
                graph = flow_graph(name)
                self.assertEqual(sorted(s["id"] for s in result.steps),  # canvas notes do not run
                                 sorted(n["id"] for n in graph["nodes"] if n.get("type") != "noteNode"))
                self.assertTrue(all(s["valid"] for s in result.steps))
                note = result.notes()[0]
                self.assertEqual((note["runner"], note["executor"]), ("guestflow", "core"))

    def test_edge_handles_in_langflow_string_form_are_read(self):
        graph = copy.deepcopy(flow_graph("prompt"))
        for edge in graph["edges"]:
            del edge["data"]  # only the œ-quoted sourceHandle/targetHandle strings remain
        result = run_runner(spec_for(graph, [chat("Bob")]))
        assert_well_formed(self, result)
        self.assertEqual(texts(result), [["Say hello to Bob in French."]])


def two_inputs_graph() -> dict:
    """ChatInput-A and ChatInput-B (display name "Second") feed one prompt."""
    base = flow_graph("prompt")
    chat_in = node_by_id(base, "ChatInput-Zq1wE")
    a = copy.deepcopy(chat_in)
    a["id"] = a["data"]["id"] = "ChatInput-Aaaaa"
    a["data"]["node"]["template"]["input_value"]["value"] = "A-default"
    b = copy.deepcopy(chat_in)
    b["id"] = b["data"]["id"] = "ChatInput-Bbbbb"
    b["data"]["node"]["display_name"] = "Second"
    b["data"]["node"]["template"]["input_value"]["value"] = "B-default"
    graph = set_field(base, "Prompt-mF4cL", "template", "{name}+{language}")
    graph["nodes"] = [a, b] + [n for n in graph["nodes"] if n["id"] != "ChatInput-Zq1wE"]
    e1, e2 = copy.deepcopy(graph["edges"][0]), graph["edges"][1]
    graph["edges"][0]["source"] = "ChatInput-Aaaaa"
    e1["source"] = "ChatInput-Bbbbb"
    e1["data"]["targetHandle"]["fieldName"] = "language"
    graph["edges"] = [graph["edges"][0], e1, e2]
    return graph


class CallerInputs(unittest.TestCase):
    def test_each_input_entry_is_one_run(self):
        result = run_runner(spec_for(flow_graph("hello"), [chat("one"), chat("two")]))
        assert_well_formed(self, result)
        self.assertEqual([r["inputs"] for r in result.run_outputs],
                         [{"input_value": "one"}, {"input_value": "two"}])
        self.assertEqual(texts(result), [["one"], ["two"]])
        self.assertEqual(len(result.steps), 4)

    def test_components_target_input_vertices_by_id_or_display_name(self):
        graph = two_inputs_graph()
        cases = [
            (chat("x"), "x+x"),  # no components: every chat input
            (chat("x", "ChatInput-Aaaaa"), "x+B-default"),
            (chat("x", "Second"), "A-default+x"),
            (chat("x", type_="text"), "A-default+B-default"),  # "text" is in neither id
            (chat("x", type_="any"), "x+x"),
        ]
        for entry, expected in cases:
            with self.subTest(entry=entry):
                result = run_runner(spec_for(graph, [entry]))
                assert_well_formed(self, result)
                self.assertEqual(texts(result), [[expected]])

    def test_requested_outputs_by_id_or_display_name_in_payload_order(self):
        graph = flow_graph("prompt")
        result = run_runner(spec_for(graph, [chat("Ada")], outputs=["Prompt"]))
        assert_well_formed(self, result)
        self.assertEqual([r["component_id"] for r in result.run_outputs[0]["outputs"]],
                         ["Prompt-mF4cL"])
        self.assertEqual(result.run_outputs[0]["outputs"][0]["messages"][0]["message"],
                         "Say hello to Ada in French.")
        result = run_runner(spec_for(graph, [chat("Ada")],
                                     outputs=["Chat Output", "ChatInput-Zq1wE"]))
        self.assertEqual([r["component_id"] for r in result.run_outputs[0]["outputs"]],
                         ["ChatInput-Zq1wE", "ChatOutput-Ty7uN"])
        self.assertEqual(result.run_outputs[0]["outputs"][0]["results"]["message"]["sender"],
                         "User")

    def test_unicode_survives_the_round_trip(self):
        text = "héllo 👋 — \"quoted\" \\ back\nslash \u2028 ok"
        result = run_runner(spec_for(flow_graph("hello"), [chat(text)]))
        assert_well_formed(self, result)
        self.assertEqual(texts(result), [[text]])

    def test_prompt_escapes_double_braces(self):
        graph = set_field(flow_graph("prompt"), "Prompt-mF4cL", "template", "{{literal}} {name}")
        result = run_runner(spec_for(graph, [chat("Ada")]))
        assert_well_formed(self, result)
        self.assertEqual(texts(result), [["{literal} Ada"]])

    def test_text_input_and_text_output(self):
        graph = copy.deepcopy(flow_graph("hello"))
        graph["nodes"][0]["data"]["type"] = "TextInput"
        graph["nodes"][0]["id"] = "TextInput-Tx1"
        graph["nodes"][1]["data"]["type"] = "TextOutput"
        graph["nodes"][1]["id"] = "TextOutput-Tx2"
        graph["nodes"][1]["data"]["node"]["outputs"][0]["name"] = "text"
        graph["edges"][0].update(source="TextInput-Tx1", target="TextOutput-Tx2")
        result = run_runner(spec_for(graph, [chat("plain", type_="text")]))
        assert_well_formed(self, result)
        data = result.run_outputs[0]["outputs"][0]
        self.assertEqual(data["component_id"], "TextOutput-Tx2")
        self.assertEqual(data["outputs"], {"text": {"message": "plain", "type": "text"}})
        self.assertEqual(data["results"]["text"]["text"], "plain")
        self.assertTrue(re.match(r"^\d+ ms$", data["duration"]))


if __name__ == "__main__":
    unittest.main()
