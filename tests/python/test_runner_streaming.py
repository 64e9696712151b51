"""guest/runner.py new frames: token frames of a streamed output before its vertex's step
(as Graph._run drains generators), and each step's `result` and `types`."""

from __future__ import annotations

import unittest

from .test_runner_harness import (
    FRAME_MAX,
    PY,
    assert_well_formed,
    chat,
    flow_graph,
    python_graph,
    run_runner,
    spec_for,
)

STREAM = ("def stream(text):\n"
          "    for word in text.split():\n"
          "        yield word.upper() + ' '\n"
          "stream(input_value)\n")
ASYNC_STREAM = ("import asyncio\n"
                "async def stream(text):\n"
                "    for word in text.split():\n"
                "        await asyncio.sleep(0)\n"
                "        yield word + '!'\n"
                "stream(input_value)\n")


def frame_kinds(result) -> list:
    return [(f["t"], f.get("id") or f.get("event", {}).get("id")) for f in result.frames]


class Tokens(unittest.TestCase):
    def assert_streamed(self, result, chunks: list) -> None:
        assert_well_formed(self, result)
        tokens = result.of("token")
        self.assertEqual([t["data"]["chunk"] for t in tokens], chunks)
        self.assertEqual({t["id"] for t in tokens}, {PY})
        self.assertEqual(len({t["data"]["id"] for t in tokens}), 1)  # one message id per stream
        kinds = frame_kinds(result)
        start, step = kinds.index(("vertex_start", PY)), kinds.index(("step", PY))
        self.assertEqual([k for k in kinds[start + 1:step]], [("token", PY)] * len(chunks))
        # the drained text is the result, and flows on to the next vertices
        text = "".join(chunks)
        self.assertEqual(result.step(PY)["outputs"]["results"]["message"], {"result": text})
        self.assertEqual(result.run_outputs[0]["outputs"][0]["results"]["message"]["text"], text)

    def test_a_generator_is_drained_one_token_frame_per_chunk_before_the_step(self):
        result = run_runner(spec_for(python_graph(STREAM), [chat("the cat sat")]))
        self.assert_streamed(result, ["THE ", "CAT ", "SAT "])

    def test_an_async_generator_too(self):
        result = run_runner(spec_for(python_graph(ASYNC_STREAM), [chat("a b")]))
        self.assert_streamed(result, ["a!", "b!"])

    def test_what_a_stream_prints_is_logs_and_a_failing_stream_fails_its_vertex(self):
        code = ("def stream():\n"
                "    print('thinking')\n"
                "    yield 'one'\n"
                "    raise RuntimeError('model went away')\n"
                "stream()\n")
        result = run_runner(spec_for(python_graph(code), [chat("x")]))
        assert_well_formed(self, result)
        step = result.step(PY)
        self.assertFalse(step["valid"])
        self.assertIn("RuntimeError: model went away", step["error"])
        self.assertIn("thinking", step["logs"])
        self.assertEqual([t["data"]["chunk"] for t in result.of("token")], ["one"])
        self.assertEqual(result.steps[-1]["id"], PY)  # the run stops there

    def test_a_last_expression_that_is_not_a_stream_changes_nothing(self):
        result = run_runner(spec_for(python_graph("print('printed')\n[1, 2]\n"), [chat("x")]))
        assert_well_formed(self, result)
        self.assertEqual(result.of("token"), [])
        self.assertEqual(result.step(PY)["outputs"]["results"]["message"], {"result": "printed"})

    def test_a_chunk_larger_than_a_frame_is_clipped_with_a_marker(self):
        code = "(c for c in ['x' * (3 << 20), 'tail'])\n"
        result = run_runner(spec_for(python_graph(code), [chat("x")]))
        assert_well_formed(self, result)  # every line <= 1 MiB
        big, tail = result.of("token")
        self.assertIn("[guestflow: truncated", big["data"]["chunk"])
        self.assertEqual(big["id"], PY)
        self.assertEqual(tail["data"]["chunk"], "tail")
        self.assertTrue(all(len(line) <= FRAME_MAX for line in result.lines))


class StepResult(unittest.TestCase):
    def test_each_step_carries_its_result_data_and_output_types(self):
        result = run_runner(spec_for(flow_graph("python"), [chat("the cat and the hat")]))
        assert_well_formed(self, result)
        harvested = result.run_outputs[0]["outputs"][0]
        self.assertEqual(result.step("ChatOutput-Ju3kM")["result"], harvested)
        self.assertEqual(result.step("ChatOutput-Ju3kM")["types"], {"message": "Message"})
        self.assertEqual(result.step(PY)["types"], {"results": "Data"})
        self.assertEqual(result.step("ParseData-Gv8nD")["types"],
                         {"text": "Message", "data_list": "list"})
        py = result.step(PY)["result"]
        self.assertEqual(py["component_id"], PY)
        self.assertEqual(py["outputs"], result.step(PY)["outputs"])
        self.assertEqual(py["results"]["results"]["data"], {"result": py["outputs"]["results"]
                                                            ["message"]["result"]})

    def test_a_big_result_is_clipped_before_the_step_s_own_fields(self):
        code = "chunk = 'x' * 300000\nfor _ in range(3):\n    print(chunk)\n"
        result = run_runner(spec_for(python_graph(code), [chat("x")]))
        assert_well_formed(self, result)
        step = result.step(PY)
        self.assertNotIn("[guestflow: truncated", step["logs"])  # logs stay as captured
        self.assertIn("[guestflow: truncated", str(step["result"]))


if __name__ == "__main__":
    unittest.main()
