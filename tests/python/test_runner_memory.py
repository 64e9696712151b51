"""guest/runner.py memory: Chat Input / Chat Output store their messages as Langflow's do
(`message` frames, the session's history) and Message History (`Memory`) reads the history
shipped in spec.history plus what the run stored."""

from __future__ import annotations

import unittest

from .langflow_shapes import chat_input, chat_output, component, edge, graph, prompt
from .test_runner_harness import assert_well_formed, chat, run_runner, spec_for


def memory(vid: str = "Memory-m1", name: str = "Message History", **fields) -> dict:
    """lfx's MemoryComponent as a flow exports it (data.type "Memory")."""
    values = {"mode": "Retrieve", "sender_type": "Machine and User", "sender": "",
              "sender_name": "", "n_messages": 100, "session_id": "", "order": "Ascending",
              "template": "{sender_name}: {text}"}
    values.update(fields)
    node = component(vid, "Memory", name, values, ("messages_text", "dataframe"))
    node["data"]["node"]["template"]["n_messages"]["type"] = "int"
    return node


def chatbot() -> dict:
    """Chat Input + Message History -> Prompt ("{history}" then the question) -> Chat Output:
    Langflow's memory chatbot with an echo for a model."""
    cin, hist, out = chat_input(), memory(), chat_output()
    ask = prompt("Prompt-p1", "{history}\n-- asked: {question}", history="", question="")
    return graph([cin, hist, ask, out],
                 [edge(hist["id"], "messages_text", "Prompt-p1", "history"),
                  edge(cin["id"], "message", "Prompt-p1", "question"),
                  edge("Prompt-p1", "prompt", out["id"], "input_value")])


def said(result) -> str:
    return result.run_outputs[0]["outputs"][0]["results"]["message"]["text"]


def stored(sender: str, name: str, text: str, session: str = "s1", **extra) -> dict:
    return {"text": text, "sender": sender, "sender_name": name, "session_id": session,
            "timestamp": "2026-12-01 10:00:00 UTC", "id": f"id-{text}", "flow_id": None,
            "files": [], "properties": {}, **extra}


class StoredMessages(unittest.TestCase):
    def test_chat_input_and_output_store_their_messages_when_the_run_has_a_session(self):
        result = run_runner(spec_for(chatbot(), [chat("hello")], session_id="chat-1"))
        assert_well_formed(self, result)
        messages = result.of("message")
        self.assertEqual([(m["id"], m["data"]["sender"], m["data"]["sender_name"])
                          for m in messages],
                         [("ChatInput-in1", "User", "User"), ("ChatOutput-out1", "Machine", "AI")])
        first, second = (m["data"] for m in messages)
        self.assertEqual(first["text"], "hello")
        self.assertEqual(second["text"], said(result))
        for data in (first, second):
            self.assertEqual(data["session_id"], "chat-1")
            self.assertIsInstance(data["id"], str)
            self.assertEqual(data["category"], "message")
        self.assertNotEqual(first["id"], second["id"])
        # the stored message is what the vertex returns (Langflow: message = stored_message)
        self.assertEqual(result.step("ChatInput-in1")["result"]["results"]["message"]["text"],
                         "hello")
        # each message frame comes while its vertex builds: after its start, before its step
        kinds = [(f["t"], f.get("id") or f.get("event", {}).get("id")) for f in result.frames]
        at = kinds.index(("message", "ChatInput-in1"))
        self.assertEqual(kinds[at - 1], ("vertex_start", "ChatInput-in1"))
        self.assertEqual(kinds[at + 1], ("step", "ChatInput-in1"))

    def test_nothing_is_stored_without_a_session_or_with_should_store_message_off(self):
        result = run_runner(spec_for(chatbot(), [chat("hello")]))
        assert_well_formed(self, result)
        self.assertEqual(result.of("message"), [])
        flow = chatbot()
        for node in flow["nodes"]:
            if node["id"] == "ChatOutput-out1":
                node["data"]["node"]["template"]["should_store_message"] = {
                    "name": "should_store_message", "type": "bool", "value": False}
        result = run_runner(spec_for(flow, [chat("hello")], session_id="chat-1"))
        assert_well_formed(self, result)
        self.assertEqual([m["id"] for m in result.of("message")], ["ChatInput-in1"])


class MessageHistory(unittest.TestCase):
    def test_two_runs_share_history_through_the_message_frames(self):
        first = run_runner(spec_for(chatbot(), [chat("My name is Ada.")], session_id="chat-42"))
        assert_well_formed(self, first)
        # the first run's Memory already sees the input stored just before it
        self.assertEqual(first.step("Memory-m1")["outputs"]["messages_text"]["message"],
                         "User: My name is Ada.")
        history = [f["data"] for f in first.of("message")]
        second = run_runner(spec_for(chatbot(), [chat("What is my name?")], session_id="chat-42",
                                     history=history))
        assert_well_formed(self, second)
        remembered = second.step("Memory-m1")["outputs"]["messages_text"]["message"]
        self.assertEqual(remembered.splitlines()[0], "User: My name is Ada.")
        self.assertEqual(remembered.splitlines()[1], "AI: User: My name is Ada.")
        self.assertEqual(remembered.splitlines()[-1], "User: What is my name?")
        self.assertIn("My name is Ada.", said(second))
        rows = second.step("Memory-m1")["outputs"]["dataframe"]
        self.assertEqual(rows["type"], "array")
        self.assertEqual([r["text"] for r in rows["message"]][:1], ["My name is Ada."])
        self.assertEqual(second.step("Memory-m1")["types"],
                         {"messages_text": "Message", "dataframe": "DataFrame"})
        # a third session does not see them
        other = run_runner(spec_for(chatbot(), [chat("Who am I?")], session_id="chat-43",
                                    history=history))
        assert_well_formed(self, other)
        self.assertEqual(other.step("Memory-m1")["outputs"]["messages_text"]["message"],
                         "User: Who am I?")

    def test_filters_order_and_count_as_lfx_memory_component(self):
        history = [stored("User", "User", "u1"), stored("Machine", "AI", "a1"),
                   stored("User", "User", "u2"), stored("Machine", "Bot", "a2"),
                   stored("User", "User", "other session", session="s2"),
                   stored("Machine", "AI", "an error", error=True)]
        nodes = [memory("Memory-all"), memory("Memory-last2", n_messages=2),
                 memory("Memory-desc", order="Descending", n_messages=3),
                 memory("Memory-machine", sender_type="Machine"),
                 memory("Memory-bot", sender_name="Bot"),
                 memory("Memory-none", n_messages=0),
                 memory("Memory-tpl", template="[{sender}] {text} ({session_id})", n_messages=1)]
        ids = [n["id"] for n in nodes]
        result = run_runner(spec_for(graph(nodes, []), [], outputs=ids, session_id="s1",
                                     history=history))
        assert_well_formed(self, result)

        def text(vid):
            return result.step(vid)["outputs"]["messages_text"]["message"]

        self.assertEqual(text("Memory-all"), "User: u1\nAI: a1\nUser: u2\nBot: a2")
        self.assertEqual(text("Memory-last2"), "User: u2\nBot: a2")  # the newest two
        self.assertEqual(text("Memory-desc"), "Bot: a2\nUser: u2\nAI: a1")
        self.assertEqual(text("Memory-machine"), "AI: a1\nBot: a2")
        self.assertEqual(text("Memory-bot"), "Bot: a2")
        self.assertEqual(text("Memory-none"), "")
        self.assertEqual(text("Memory-tpl"), "[Machine] a2 (s1)")

    def test_store_mode_stores_the_incoming_message(self):
        cin = chat_input()
        cin["data"]["node"]["template"]["should_store_message"] = {
            "name": "should_store_message", "type": "bool", "value": False}
        keeper = memory("Memory-store", mode="Store", message="")
        keeper["data"]["node"]["outputs"] = [{"name": "stored_messages", "types": ["Message"]}]
        reader = memory("Memory-read")  # builds after the store (ties go by position)
        flow = graph([cin, keeper, reader], [edge(cin["id"], "message", keeper["id"], "message")])
        result = run_runner(spec_for(flow, [chat("remember me")], session_id="s9",
                                     outputs=["Memory-read"]))
        assert_well_formed(self, result)
        self.assertEqual([(m["id"], m["data"]["text"], m["data"]["sender"])
                          for m in result.of("message")],
                         [("Memory-store", "remember me", "User")])
        self.assertEqual(result.step("Memory-store")["types"], {"stored_messages": "Message"})
        self.assertEqual(result.step("Memory-read")["outputs"]["messages_text"]["message"],
                         "User: remember me")

    def test_store_mode_without_a_session_fails_as_lfx(self):
        keeper = memory("Memory-store", mode="Store", message="orphan")
        result = run_runner(spec_for(graph([keeper], []), []))
        assert_well_formed(self, result)
        self.assertIn("All of session_id, sender, and sender_name must be provided",
                      result.step("Memory-store")["error"])


if __name__ == "__main__":
    unittest.main()
