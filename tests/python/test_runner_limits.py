"""guest/runner.py under hostile output: 100 MB prints, stray fd-1 writes, oversized frames
(frame_protocol.py)."""

from __future__ import annotations

import copy
import json
import unittest

from .test_runner_harness import (
    PY,
    python_graph,
    FRAME_MAX,
    assert_well_formed,
    chat,
    flow_graph,
    import_guest,
    node_by_id,
    run_runner,
    set_field,
    spec_for,
)

RSS_LIMIT_KIB = 100 * 1024
LOG_CAP = 256 << 10



class HugeOutput(unittest.TestCase):
    def assert_bounded(self, result, what):
        assert_well_formed(self, result)
        logs = result.step(PY)["logs"]
        self.assertLessEqual(len(logs.encode()), LOG_CAP + 200)
        self.assertTrue("bytes of output omitted here" in logs, logs[-300:])
        self.assertIsNotNone(result.max_rss_kib, result.stderr[-300:])
        self.assertLess(result.max_rss_kib, RSS_LIMIT_KIB,
                        f"runner peak RSS {result.max_rss_kib} KiB after {what}")

    def test_printing_100_mb_keeps_logs_and_memory_bounded(self):
        code = "chunk = 'x' * 1048575\nfor _ in range(100):\n    print(chunk)\n"
        result = run_runner(spec_for(python_graph(code), [chat("x")]), measure_rss=True)
        self.assert_bounded(result, "print()ing 100 MB")
        self.assertTrue(result.step(PY)["valid"])
        text = result.run_outputs[0]["outputs"][0]["results"]["message"]["text"]
        self.assertTrue(text.startswith("xxxx"))

    def test_a_subprocess_writing_100_mb_to_fd_1_is_bounded_too(self):
        code = ("import subprocess, sys\n"
                "subprocess.run([sys.executable, '-c', "
                "'import os\\nb = b\"y\" * 1048576\\nfor _ in range(100): os.write(1, b)'], check=True)\n"
                "print('after')\n")
        result = run_runner(spec_for(python_graph(code), [chat("x")]), measure_rss=True)
        self.assert_bounded(result, "a subprocess writing 100 MB")
        self.assertTrue(result.step(PY)["valid"])
        self.assertTrue(result.step(PY)["logs"].startswith("yyyy"))

    def test_a_huge_single_line_is_clipped_to_fit_one_frame(self):
        code = "print('\\u00e9\\x01' * 600000)"  # escapes and multi-byte UTF-8 inflate the JSON
        result = run_runner(spec_for(python_graph(code), [chat("x")]))
        assert_well_formed(self, result)
        biggest = max(len(line) for line in result.lines)
        self.assertLessEqual(biggest, FRAME_MAX)
        self.assertIn("[guestflow: truncated", json.dumps(result.frames))


class StrayWrites(unittest.TestCase):
    def test_writes_to_fd_1_cannot_forge_or_break_frames(self):
        code = (
            "import os, subprocess, sys\n"
            "os.write(1, b'{\"t\":\"done\"}\\n')\n"
            "subprocess.run(['echo', '{\"t\":\"fatal\",\"error\":\"forged\"}'], check=True)\n"
            "sys.stdout.buffer.write(b'half a line, no newline')\n"
            "sys.__stdout__.write('via __stdout__\\n')\n"
            "print('result line')\n"
        )
        result = run_runner(spec_for(python_graph(code), [chat("x")]))
        assert_well_formed(self, result)  # exactly one done (last), no fatal
        logs = result.step(PY)["logs"]
        for piece in ('{"t":"done"}', '"error":"forged"', "half a line, no newline",
                      "via __stdout__", "result line"):
            self.assertIn(piece, logs)
        result_text = result.run_outputs[0]["outputs"][0]["results"]["message"]["text"]
        self.assertIn("result line", result_text)  # print()s are the interpreter's result
        self.assertNotIn("forged", result_text)  # fd-level writes are logs only

    def test_a_vertex_that_hijacks_stdout_does_not_blind_the_next_one(self):
        graph = copy.deepcopy(flow_graph("python"))
        first = node_by_id(graph, PY)
        first["data"]["node"]["template"]["python_code"]["value"] = (
            "import os, sys\nsys.stdout = open(os.devnull, 'w')\nos.close(1)\nprint('lost')\n")
        second = copy.deepcopy(first)
        second["id"] = second["data"]["id"] = "PythonREPLComponent-Second"
        second["data"]["node"]["template"]["python_code"]["value"] = (
            "import os\nos.write(1, b'fd ok\\n')\nprint('print ok')\n")
        graph["nodes"].append(second)
        edge = copy.deepcopy(graph["edges"][0])
        edge.update(source=PY, target="PythonREPLComponent-Second")
        graph["edges"].append(edge)
        result = run_runner(spec_for(graph, [chat("x")]))
        assert_well_formed(self, result)
        self.assertEqual(result.step(PY)["logs"], "")
        logs = result.step("PythonREPLComponent-Second")["logs"]
        self.assertIn("fd ok", logs)
        self.assertIn("print ok", logs)

    def test_late_output_from_a_background_process_stays_off_the_frame_channel(self):
        code = ("import subprocess, sys\n"
                "subprocess.Popen([sys.executable, '-c', "
                "'import time; time.sleep(0.3); print(\"late from the background\")'])\n")
        graph = python_graph(code)
        graph = set_field(graph, "ParseData-Gv8nD", "template", "{result}")
        # A later slow vertex keeps the run alive while the background process writes.
        slow = set_field(flow_graph("slow"), "PythonREPLComponent-Sl2gU", "python_code",
                         "time.sleep(1)")
        graph["nodes"].append(node_by_id(slow, "PythonREPLComponent-Sl2gU"))
        result = run_runner(spec_for(graph, [chat("x")]))
        assert_well_formed(self, result)
        seen = json.dumps([s["logs"] for s in result.steps] + [n.get("stdout", "")
                                                               for n in result.notes()])
        self.assertIn("late from the background", seen)


class FrameEncoding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.frames = import_guest("frame_protocol")
        import_guest("frame_limits")  # encode_frame's import for a frame too large, done here
        # (import_guest writes no bytecode into guest/)
        cls.RunnerFatal = import_guest("run_errors").RunnerFatal

    def decode(self, line: bytes):
        self.assertTrue(line.endswith(b"\n"))
        self.assertLessEqual(len(line), FRAME_MAX)
        return json.loads(line.decode("utf-8"))

    def test_values_json_cannot_carry_are_made_safe(self):
        nested = current = {}
        for _ in range(200):
            current["x"] = {}
            current = current["x"]
        frame = {"t": "note", "nan": float("nan"), "inf": float("-inf"), "bytes": b"\xffok",
                 "surrogate": "a\udcffb", 3: "int key", "deep": nested, "set": {1}}
        out = self.decode(self.frames.encode_frame(frame))
        self.assertEqual(out["nan"], "nan")
        self.assertEqual(out["inf"], "-inf")
        self.assertEqual(out["bytes"], "\ufffdok")
        self.assertEqual(out["surrogate"], "a?b")
        self.assertEqual(out["3"], "int key")
        self.assertIn("nested deeper than", json.dumps(out["deep"]))
        self.assertEqual(out["set"], [1])

    def test_oversized_frames_are_clipped_with_a_marker(self):
        big = "\x00" * (3 << 20)
        out = self.decode(self.frames.encode_frame(
            {"t": "step", "event": {"type": "vertex", "id": "a", "name": "A", "valid": True,
                                    "duration_ms": 1, "outputs": {"o": big}, "logs": big}}))
        self.assertIn("[guestflow: truncated", out["event"]["logs"])
        def outputs_frame(n, size):
            return {"t": "outputs", "run_outputs": [{"inputs": {}, "outputs": [
                {"component_id": f"V-{i}", "component_display_name": "V",
                 "results": {"r": "x" * size}} for i in range(n)] + [None]}]}

        out = self.decode(self.frames.encode_frame(outputs_frame(2000, 3000)))
        self.assertEqual(len(out["run_outputs"][0]["outputs"]), 2001)  # no entry dropped
        self.assertIsNone(out["run_outputs"][0]["outputs"][-1])
        self.assertIn("[guestflow: truncated", out["run_outputs"][0]["outputs"][0]["results"]["r"])
        with self.assertRaises(self.RunnerFatal):  # main() reports it as a fatal frame
            self.frames.encode_frame(outputs_frame(20000, 10))

    def test_sync_marker_prefix_detection(self):
        marker = b"\x00\x1b[guestflow-sync abc 1]\x00"
        self.assertEqual(self.frames._marker_prefix_len(b"data\x00\x1b[guest", marker), 8)
        self.assertEqual(self.frames._marker_prefix_len(b"data\x00", marker), 1)
        self.assertEqual(self.frames._marker_prefix_len(b"data", marker), 0)
        self.assertEqual(self.frames._marker_prefix_len(b"\x00x\x00", marker), 1)


if __name__ == "__main__":
    unittest.main()
