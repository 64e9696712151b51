"""guest/runner.py with what the host ships beside the graph: variables.json (secrets),
spec.tweaks, spec.session_id and the new spec keys' validation (run_services.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import unittest

from .langflow_shapes import chat_input, chat_output, edge, graph, prompt, python_code
from .test_runner_harness import assert_well_formed, chat, run_runner, spec_for

SECRET = "sk-test-3f9a1c77e0b24d19e5"
UNUSED = "an-unused-secret-9c2e"


def secret_flow(variable: str = "OPENAI_API_KEY") -> dict:
    """Prompt "Key Prompt" whose `api_key` field loads `variable` from the database (Langflow's
    way to use a global variable) -> Python Interpreter printing its sha256 -> Chat Output."""
    key_prompt = prompt("Prompt-key", "{api_key}", display_name="Key Prompt", api_key=variable)
    key_prompt["data"]["node"]["template"]["api_key"]["load_from_db"] = True
    hasher = python_code("PythonREPLComponent-h1",
                         "import hashlib\nprint(hashlib.sha256(input_value.encode()).hexdigest())")
    out = chat_output()
    return graph([key_prompt, hasher, out],
                 [edge("Prompt-key", "prompt", "PythonREPLComponent-h1", "input_value"),
                  edge("PythonREPLComponent-h1", "results", out["id"], "input_value")])


def variables(**values) -> dict:
    return {"variables.json": json.dumps(values).encode()}


class RunDir:
    """What the run left in its directory (read before the harness removes it)."""

    def __init__(self) -> None:
        self.files: dict = {}

    def __call__(self, path: str) -> None:
        for root, _, names in os.walk(path):
            for name in names:
                full = os.path.join(root, name)
                with open(full, "rb") as f:
                    self.files[os.path.relpath(full, path)] = f.read()


class Variables(unittest.TestCase):
    def test_a_secret_reaches_its_component_and_is_found_nowhere_else(self):
        left = RunDir()
        result = run_runner(spec_for(secret_flow()),
                            files=variables(OPENAI_API_KEY=SECRET, UNUSED=UNUSED), inspect=left)
        assert_well_formed(self, result)
        # the component got the value: the interpreter hashed it
        hashed = hashlib.sha256(SECRET.encode()).hexdigest()
        self.assertEqual(result.step("PythonREPLComponent-h1")["outputs"],
                         {"results": {"message": {"result": hashed}, "type": "object"}})
        # ... and no frame carries it: what a component outputs is masked on the way out
        self.assertEqual(result.step("Prompt-key")["outputs"]["prompt"]["message"], "********")
        stdout = b"".join(result.lines)
        for value in (SECRET, UNUSED):
            self.assertNotIn(value.encode(), stdout)
            self.assertNotIn(value, result.stderr)
            for name, data in left.files.items():
                self.assertNotIn(value.encode(), data, name)
        self.assertEqual(sorted(left.files), ["spec.json"])  # variables.json was unlinked

    def test_an_unset_variable_fails_the_run_before_any_vertex_naming_it_never_a_value(self):
        left = RunDir()
        result = run_runner(spec_for(secret_flow("MISSING_KEY")), files=variables(OTHER=UNUSED),
                            inspect=left)
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["fatal"])
        self.assertEqual(result.fatal["code"], "bad_request")
        self.assertIn("variable 'MISSING_KEY' (vertex Key Prompt, field api_key) is not set; "
                      "pass it with `guestflow run --var NAME=VALUE`", result.fatal["error"])
        self.assertNotIn(UNUSED.encode(), b"".join(result.lines))
        self.assertEqual(sorted(left.files), ["spec.json"])

    def test_a_field_without_a_variable_name_is_left_alone(self):
        flow = secret_flow("")
        result = run_runner(spec_for(flow), files=variables(OPENAI_API_KEY=SECRET))
        assert_well_formed(self, result)  # Prompt "{api_key}" with an empty value: ""
        self.assertEqual(result.step("Prompt-key")["outputs"]["prompt"]["message"], "")

    def test_a_bad_variables_file_is_refused_without_quoting_it_and_still_unlinked(self):
        cases = [(b'{"A": "broken-secret-value', "variables.json: not a UTF-8 JSON object"),
                 (b'["broken-secret-value"]',
                  "variables.json: expected an object of names to string values"),
                 (b'{"A": 5, "B": "broken-secret-value"}',
                  "variables.json: the value of 'A' is not a string")]
        for data, expected in cases:
            with self.subTest(expected=expected):
                left = RunDir()
                result = run_runner(spec_for(secret_flow()), files={"variables.json": data},
                                    inspect=left)
                assert_well_formed(self, result, success=False)
                self.assertEqual(result.fatal["code"], "bad_request")
                self.assertIn("invalid variables: " + expected, result.fatal["error"])
                self.assertNotIn(b"broken-secret-value", b"".join(result.lines))
                self.assertEqual(sorted(left.files), ["spec.json"])

    def test_variables_are_unlinked_even_when_the_spec_is_bad(self):
        left = RunDir()
        result = run_runner(spec_text="{not json", files=variables(OPENAI_API_KEY=SECRET),
                            inspect=left)
        assert_well_formed(self, result, success=False)
        self.assertIn("invalid spec: spec: not valid JSON", result.fatal["error"])
        self.assertEqual(sorted(left.files), ["spec.json"])


def greeter() -> dict:
    """Chat Input -> Prompt "Greeter" ("{greeting}, {name}!") -> Chat Output."""
    cin, out = chat_input(), chat_output()
    greet = prompt("Prompt-p1", "{greeting}, {name}!", display_name="Greeter", greeting="Hello",
                   name="")
    return graph([cin, greet, out], [edge(cin["id"], "message", "Prompt-p1", "name"),
                                     edge("Prompt-p1", "prompt", out["id"], "input_value")])


def reply(result) -> dict:
    return result.run_outputs[0]["outputs"][0]["results"]["message"]


class Tweaks(unittest.TestCase):
    def run_tweaked(self, tweaks, **kw):
        result = run_runner(spec_for(greeter(), [chat("Ada")], tweaks=tweaks), **kw)
        assert_well_formed(self, result)
        return result

    def test_tweaks_by_vertex_id_and_by_display_name(self):
        self.assertEqual(reply(self.run_tweaked({"Prompt-p1": {"greeting": "Bonjour"}}))["text"],
                         "Bonjour, Ada!")
        self.assertEqual(reply(self.run_tweaked({"Greeter": {"greeting": "Hola"}}))["text"],
                         "Hola, Ada!")
        # a value in Langflow's template form sets the field's keys
        self.assertEqual(reply(self.run_tweaked({"Prompt-p1": {"greeting": {"value": "Hej"}}}))
                         ["text"], "Hej, Ada!")

    def test_a_bare_value_tweaks_that_field_on_every_vertex_that_has_it(self):
        result = self.run_tweaked({"sender_name": "Robot"})
        self.assertEqual(reply(result)["sender_name"], "Robot")
        message = result.step("ChatInput-in1")["result"]["results"]["message"]
        self.assertEqual(message["sender_name"], "Robot")

    def test_unknown_vertices_and_fields_are_skipped_as_lfx_does(self):
        result = self.run_tweaked({"Prompt-p1": {"no_such_field": "x"}, "Nobody": {"greeting": "x"}})
        self.assertEqual(reply(result)["text"], "Hello, Ada!")

    def test_a_tweak_can_point_a_field_at_a_variable(self):
        result = self.run_tweaked({"Prompt-p1": {"greeting": {"value": "GREETING",
                                                              "load_from_db": True}}},
                                  files=variables(GREETING="Ciao"))
        self.assertEqual(reply(result)["text"], "********, Ada!")  # resolved, and a secret

    def test_a_protected_field_is_refused_as_lfx_refuses_it(self):
        flow = secret_flow()
        result = run_runner(spec_for(flow, tweaks={"PythonREPLComponent-h1": {
            "python_code": "print('replaced')"}}), files=variables(OPENAI_API_KEY=SECRET))
        assert_well_formed(self, result, success=False)
        self.assertEqual([f["t"] for f in result.frames], ["fatal"])
        self.assertEqual(result.fatal["code"], "bad_request")
        self.assertEqual(result.fatal["error"], "Refused tweak keys ['python_code']: The field is "
                         "protected and keeps the value set by the flow author.")


class SessionId(unittest.TestCase):
    def test_the_run_session_id_is_set_on_every_vertex_with_the_field(self):
        result = run_runner(spec_for(greeter(), [chat("Ada")], session_id="sess-1"))
        assert_well_formed(self, result)
        self.assertEqual(reply(result)["session_id"], "sess-1")
        chat_in = result.step("ChatInput-in1")["result"]["results"]["message"]
        self.assertEqual(chat_in["session_id"], "sess-1")
        self.assertEqual(result.run_outputs[0]["outputs"][0]["messages"][0]["session_id"], "sess-1")

    def test_it_replaces_a_session_id_set_in_the_flow(self):
        flow = greeter()
        flow["nodes"][0]["data"]["node"]["template"]["session_id"]["value"] = "from-the-flow"
        result = run_runner(spec_for(flow, [chat("Ada")], session_id="sess-2"))
        assert_well_formed(self, result)
        chat_in = result.step("ChatInput-in1")["result"]["results"]["message"]
        self.assertEqual(chat_in["session_id"], "sess-2")

    def test_without_one_the_flow_keeps_its_own(self):
        flow = greeter()
        flow["nodes"][0]["data"]["node"]["template"]["session_id"]["value"] = "from-the-flow"
        result = run_runner(spec_for(flow, [chat("Ada")]))
        assert_well_formed(self, result)
        chat_in = result.step("ChatInput-in1")["result"]["results"]["message"]
        self.assertEqual(chat_in["session_id"], "from-the-flow")
        self.assertEqual(reply(result)["session_id"], "")


class NewSpecKeys(unittest.TestCase):
    def test_each_wrong_type_is_one_fatal_naming_the_field(self):
        good = spec_for(greeter(), [chat("Ada")])
        cases = [("session_id", 5, "spec.session_id: expected a string"),
                 ("user_id", ["u"], "spec.user_id: expected a string"),
                 ("context", "x", "spec.context: expected an object"),
                 ("tweaks", [], "spec.tweaks: expected an object"),
                 ("history", {}, "spec.history: expected a list"),
                 ("history", ["hi"], "spec.history[0]: expected an object"),
                 ("history", [{"text": 5}], "spec.history[0].text: expected a string"),
                 ("history", [{"text": "a"}, {"error": "no"}], "spec.history[1].error: expected a "
                                                               "boolean")]
        for key, value, expected in cases:
            with self.subTest(key=key, value=value):
                spec = copy.deepcopy(good)
                spec[key] = value
                result = run_runner(spec)
                assert_well_formed(self, result, success=False)
                self.assertEqual([f["t"] for f in result.frames], ["fatal"])
                self.assertEqual(result.fatal["code"], "bad_request")
                self.assertIn("invalid spec: " + expected, result.fatal["error"])

    def test_null_means_absent(self):
        spec = spec_for(greeter(), [chat("Ada")], session_id=None, user_id=None, context=None,
                        tweaks=None, history=None)
        result = run_runner(spec)
        assert_well_formed(self, result)
        self.assertEqual(result.of("state"), [])

    def test_the_context_comes_back_in_a_state_frame_before_done(self):
        context = {"request": {"path": "/run", "n": 3}, "flag": True}
        result = run_runner(spec_for(greeter(), [chat("Ada")], context=context, user_id="u-1"))
        assert_well_formed(self, result)
        self.assertEqual([f["t"] for f in result.frames[-3:]], ["outputs", "state", "done"])
        self.assertEqual(result.frames[-2], {"t": "state", "context": context})


if __name__ == "__main__":
    unittest.main()
