"""The run state a Langflow graph carries, into the request and back, against a scripted stream.

What lives on the graph object and not in ``Graph.dump()``: ``session_id``, ``user_id``,
``context``, values set after load (``update_raw_params``), the user's variables behind
``load_from_db`` fields, and the session's messages in Langflow's memory. Each test checks
what the executor sends (``FakeServe`` records the body) or does with what comes back.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import time
import unittest
import uuid
from unittest import mock

from lfx.execution.types import Unit

from langflow_guestflow.executor import GuestflowExecutor, GuestflowRunError
from tests import _flows, _langflow_services
from tests._fake_serve import FakeServe, RecordingEventManager
from tests.test_executor_events import HAPPY, IN, OUT, _complete, _drain, _failure

SECRET = "sk-guestflow-" + uuid.uuid4().hex  # noqa: S105 - a test value, made up per run


def _with_secret_field(name: str = "GF_TEST_KEY"):
    """hello.json with Chat Output's ``sender_name`` a ``load_from_db`` field naming ``name``."""
    doc = copy.deepcopy(_flows.payload("hello"))
    for node in doc["data"]["nodes"]:
        if node["id"] == OUT:
            field = node["data"]["node"]["template"]["sender_name"]
            field["load_from_db"] = True
            field["value"] = name
    return _flows.graph_of(doc)


async def _run(serve: FakeServe, unit: Unit) -> list:
    seen: list = []
    await _drain(GuestflowExecutor(url=serve.url, token="t").execute(unit), seen)
    return seen


class RunState(unittest.IsolatedAsyncioTestCase):
    async def test_session_user_context_and_values_set_after_load_are_sent(self) -> None:
        graph = _flows.hello_graph()
        graph.session_id = "session-7"
        graph.user_id = "user-3"
        graph.context = {"request": {"lang": "fr"}, "not_json": object()}
        graph.get_vertex(IN).update_raw_params({"input_value": "set after load"}, overwrite=True)
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=graph))
        (body,) = serve.bodies
        self.assertEqual(body["session_id"], "session-7")
        self.assertEqual(body["user_id"], "user-3")
        self.assertEqual(body["context"], {"request": {"lang": "fr"}})
        self.assertEqual(body["tweaks"], {IN: {"input_value": "set after load"}})

    async def test_tweaks_read_as_lfx_s_apply_tweaks_reads_them(self) -> None:
        # apply_tweaks takes a dict as the field's attributes and turns load_from_db off for a
        # plain value: a dict goes as {"value": …}, a variable name keeps load_from_db.
        graph = _with_secret_field()
        graph.get_vertex(IN).update_raw_params({"input_value": {"text": "a dict"}}, overwrite=True)
        graph.get_vertex(OUT).update_raw_params({"sender_name": "GF_OTHER_KEY"}, overwrite=True)
        with mock.patch.dict(os.environ, {"GF_OTHER_KEY": SECRET}):
            async with FakeServe(HAPPY) as serve:
                await _run(serve, Unit(graph=graph, runtime_options={"fallback_to_env_vars": True}))
        body = serve.bodies[0]
        self.assertEqual(body["tweaks"], {IN: {"input_value": {"value": {"text": "a dict"}}},
                                          OUT: {"sender_name": {"value": "GF_OTHER_KEY", "load_from_db": True}}})
        self.assertEqual(body["variables"], {"GF_OTHER_KEY": SECRET}, "the name set after load is the one resolved")

    async def test_an_untouched_graph_sends_no_tweaks(self) -> None:
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=_flows.hello_graph()))
        self.assertNotIn("tweaks", serve.bodies[0])
        self.assertNotIn("session_id", serve.bodies[0])

    async def test_the_legacy_path_s_session_id_wins_and_lands_on_the_graph(self) -> None:
        graph = _flows.hello_graph()
        graph.session_id = "old"
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=graph, runtime_options={"_use_arun_legacy": True, "session_id": "new"}))
        self.assertEqual(serve.bodies[0]["session_id"], "new")
        self.assertEqual(graph.session_id, "new", "as Graph._arun_legacy sets it")

    async def test_the_context_the_guest_set_comes_back_onto_the_graph(self) -> None:
        from lfx.schema.data import Data

        graph = _flows.hello_graph()
        items = [Data(data={"text": "one"})]
        graph.context = {"kept": 1, "items": items, "changed": "before"}
        # The guest returns its whole context as JSON: what it was sent, round-tripped, and
        # what it set.
        returned = {"kept": 1, "items": [items[0].model_dump(mode="json")], "changed": "after", "counter": 3}
        events = [*HAPPY[:-1], _complete("hi", context=returned)]
        async with FakeServe(events) as serve:
            await _run(serve, Unit(graph=graph))
        self.assertEqual(serve.bodies[0]["context"]["items"], returned["items"])
        self.assertEqual(graph.context["counter"], 3)
        self.assertEqual(graph.context["changed"], "after")
        self.assertIs(graph.context["items"], items, "the host's own objects are not replaced by their JSON")

    async def test_an_lfx_object_set_after_load_goes_with_its_class_name(self) -> None:
        from lfx.schema.data import Data

        graph = _flows.hello_graph()
        graph.get_vertex(IN).update_raw_params({"input_value": Data(data={"text": "item"})}, overwrite=True)
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=graph))
        tweak = serve.bodies[0]["tweaks"][IN]["input_value"]
        self.assertEqual(tweak, {"value": Data(data={"text": "item"}).model_dump(mode="json"), "value_type": "Data"})


class Variables(unittest.IsolatedAsyncioTestCase):
    async def test_a_load_from_db_variable_is_sent_as_a_secret_only(self) -> None:
        with mock.patch.dict(os.environ, {"GF_TEST_KEY": SECRET}):
            async with FakeServe(HAPPY) as serve:
                await _run(serve, Unit(graph=_with_secret_field(), runtime_options={"fallback_to_env_vars": True}))
        body = serve.bodies[0]
        self.assertEqual(body["variables"], {"GF_TEST_KEY": SECRET})
        rest = {k: v for k, v in body.items() if k != "variables"}
        self.assertNotIn(SECRET, repr(rest), "the secret is nowhere but in variables")

    async def test_the_graph_context_s_request_variables_win_and_stay_out_of_the_context(self) -> None:
        graph = _with_secret_field()
        graph.context = {"request_variables": {"GF_TEST_KEY": SECRET}, "k": 1}
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=graph))
        self.assertEqual(serve.bodies[0]["variables"], {"GF_TEST_KEY": SECRET})
        self.assertEqual(serve.bodies[0]["context"], {"k": 1})

    async def test_an_unresolvable_variable_fails_before_the_run_naming_it(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "GF_TEST_KEY"}
        with mock.patch.dict(os.environ, env, clear=True):
            async with FakeServe(HAPPY) as serve:
                with self.assertRaises(GuestflowRunError) as ctx:
                    await _run(serve, Unit(graph=_with_secret_field(), runtime_options={"fallback_to_env_vars": True}))
        self.assertEqual(ctx.exception.code, "bad_request")
        self.assertIn("'GF_TEST_KEY'", ctx.exception.message)
        self.assertIn("Chat Output", ctx.exception.message)
        self.assertIn("sender_name", ctx.exception.message)
        self.assertEqual(serve.requests, [], "nothing was sent")

    async def test_the_operator_s_environment_names_are_sent(self) -> None:
        env = {"GUESTFLOW_EXECUTOR_ENV": "GF_A, GF_B", "GF_A": "alpha-value", "GF_B": SECRET}
        with mock.patch.dict(os.environ, env):
            async with FakeServe(HAPPY) as serve:
                await _run(serve, Unit(graph=_flows.hello_graph()))
        self.assertEqual(serve.bodies[0]["variables"], {"GF_A": "alpha-value", "GF_B": SECRET})

    async def test_a_listed_environment_name_that_is_unset_fails_before_the_run(self) -> None:
        with mock.patch.dict(os.environ, {"GUESTFLOW_EXECUTOR_ENV": "GF_UNSET_FOR_TEST"}):
            os.environ.pop("GF_UNSET_FOR_TEST", None)
            async with FakeServe(HAPPY) as serve:
                with self.assertRaises(GuestflowRunError) as ctx:
                    await _run(serve, Unit(graph=_flows.hello_graph()))
        self.assertIn("'GF_UNSET_FOR_TEST'", ctx.exception.message)
        self.assertEqual(serve.requests, [])

    async def test_a_secret_is_in_no_log_line_exception_or_event_of_the_plugin(self) -> None:
        # A failure whose text carries the secret, as a component might print it: the plugin
        # masks it in what it raises and hands on, and never logs it.
        leaked = f"Error building Component Chat Output: \n\nbad key {SECRET}"
        manager = RecordingEventManager()
        with mock.patch.dict(os.environ, {"GF_TEST_KEY": SECRET}), self.assertLogs("langflow_guestflow", logging.DEBUG) as logs:
            logging.getLogger("langflow_guestflow").debug("capture starts")
            async with FakeServe([_failure(leaked, [OUT])]) as serve:
                unit = Unit(graph=_with_secret_field(),
                            runtime_options={"fallback_to_env_vars": True, "event_manager": manager})
                with self.assertRaises(Exception) as ctx:  # noqa: B017 - any failure; its text is the subject
                    await _run(serve, unit)
        self.assertNotIn(SECRET, str(ctx.exception))
        self.assertIn("********", str(ctx.exception))
        self.assertNotIn(SECRET, repr(manager.calls))
        self.assertNotIn(SECRET, "\n".join(logs.output))


class LangflowVariableService(unittest.IsolatedAsyncioTestCase):
    """Inside Langflow (a database): the run's user's variables, then the environment."""

    async def test_the_run_s_user_s_variable_is_resolved(self) -> None:
        user = str(uuid.uuid4())
        graph = _with_secret_field()
        graph.user_id = user
        with _langflow_services.installed() as (_, variables):
            variables.set(user, "GF_TEST_KEY", SECRET)
            variables.set(str(uuid.uuid4()), "GF_TEST_KEY", "someone else's")
            async with FakeServe(HAPPY) as serve:
                await _run(serve, Unit(graph=graph))
        self.assertEqual(serve.bodies[0]["variables"], {"GF_TEST_KEY": SECRET})
        self.assertEqual(variables.asked, [(uuid.UUID(user), "GF_TEST_KEY", "sender_name")])

    async def test_another_user_s_variable_is_not_theirs(self) -> None:
        graph = _with_secret_field()
        graph.user_id = str(uuid.uuid4())
        env = {k: v for k, v in os.environ.items() if k != "GF_TEST_KEY"}
        with _langflow_services.installed() as (_, variables), mock.patch.dict(os.environ, env, clear=True):
            variables.set(str(uuid.uuid4()), "GF_TEST_KEY", SECRET)
            async with FakeServe(HAPPY) as serve:
                with self.assertRaises(GuestflowRunError) as ctx:
                    await _run(serve, Unit(graph=graph))
        self.assertIn("'GF_TEST_KEY'", ctx.exception.message)
        self.assertNotIn(SECRET, str(ctx.exception))
        self.assertEqual(serve.requests, [])

    async def test_the_environment_only_with_fallback_to_env_vars(self) -> None:
        graph = _with_secret_field()
        graph.user_id = str(uuid.uuid4())
        with _langflow_services.installed(), mock.patch.dict(os.environ, {"GF_TEST_KEY": SECRET}):
            async with FakeServe(HAPPY) as serve:
                with self.assertRaises(GuestflowRunError):
                    await _run(serve, Unit(graph=graph))
                await _run(serve, Unit(graph=graph, runtime_options={"fallback_to_env_vars": True}))
        self.assertEqual(serve.bodies[0]["variables"], {"GF_TEST_KEY": SECRET})


class Memory(unittest.IsolatedAsyncioTestCase):
    """Inside Langflow: the session's messages out of and into Langflow's memory."""

    async def asyncSetUp(self) -> None:
        from lfx.schema.message import Message

        self._services = _langflow_services.installed()
        self.memory, _ = self._services.__enter__()
        self.session = "mem-" + uuid.uuid4().hex
        for i, (text, sender) in enumerate((("first question", "User"), ("first answer", "Machine"))):
            await self.memory.astore_message(Message(text=text, sender=sender, sender_name=sender,
                                                     session_id=self.session, timestamp=f"2026-12-06 10:00:0{i} UTC"))
        await self.memory.astore_message(Message(text="elsewhere", sender="User", sender_name="User", session_id="other"))

    async def asyncTearDown(self) -> None:
        self._services.__exit__(None, None, None)

    async def test_the_session_s_history_is_shipped_oldest_first(self) -> None:
        graph = _flows.hello_graph()
        graph.session_id = self.session
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=graph))
        history = serve.bodies[0]["history"]
        self.assertEqual([m["text"] for m in history], ["first question", "first answer"])
        self.assertTrue(all(m["session_id"] == self.session for m in history))

    async def test_a_message_the_guest_stored_lands_in_langflow_s_memory_as_it_arrives(self) -> None:
        graph = _flows.hello_graph()
        graph.session_id = self.session
        manager = RecordingEventManager()
        stored = {"text": "second answer", "sender": "Machine", "sender_name": "AI", "session_id": self.session,
                  "id": "guest-id-1", "files": [], "timestamp": "2026-12-06 10:00:05 UTC"}
        events = [*HAPPY[:-1], {"type": "message", "id": OUT, "data": stored}, HAPPY[-1]]
        async with FakeServe(events) as serve:
            serve.hold_before(len(events) - 1)  # the run has not ended when the message is stored
            task = asyncio.create_task(_run(serve, Unit(graph=graph, runtime_options={"event_manager": manager})))
            deadline = time.monotonic() + 10
            while len(self.memory.rows) < 4 and time.monotonic() < deadline and not task.done():
                await asyncio.sleep(0.01)  # polling the store while the run is held open
            self.assertEqual(len(self.memory.rows), 4, "stored before the run ended")
            serve.release(len(events) - 1)
            await asyncio.wait_for(task, 10)
        texts = [m.text for m in await self.memory.aget_messages(session_id=self.session, order="ASC")]
        self.assertEqual(texts, ["first question", "first answer", "second answer"])
        self.assertNotEqual(self.memory.rows[-1].id, "guest-id-1", "Langflow gives it its own id")
        self.assertIn(("on_message", stored), manager.calls)

    async def test_a_streamed_message_stored_then_updated_is_one_message(self) -> None:
        graph = _flows.hello_graph()
        graph.session_id = self.session
        manager = RecordingEventManager()
        first = {"text": "", "sender": "Machine", "sender_name": "AI", "session_id": self.session, "id": "g-7",
                 "timestamp": "2026-12-06 10:00:05 UTC"}
        final = {**first, "text": "streamed whole"}
        events = [*HAPPY[:3], {"type": "message", "id": OUT, "data": first}, *HAPPY[3:5],
                  {"type": "message", "id": OUT, "data": final}, *HAPPY[5:]]
        async with FakeServe(events) as serve:
            await _run(serve, Unit(graph=graph, runtime_options={"event_manager": manager}))
        texts = [m.text for m in await self.memory.aget_messages(session_id=self.session, order="ASC")]
        self.assertEqual(texts, ["first question", "first answer", "streamed whole"])
        self.assertEqual([d for n, d in manager.calls if n == "on_message"], [first],
                         "lfx sends no message event for a streamed message's update")

    async def test_no_session_no_history(self) -> None:
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=_flows.hello_graph()))
        self.assertNotIn("history", serve.bodies[0])


class WithoutLangflow(unittest.IsolatedAsyncioTestCase):
    async def test_lfx_alone_keeps_no_messages_so_serve_s_own_store_is_used(self) -> None:
        # lfx's memory stubs keep nothing: an empty history would make serve skip its own
        # store. lfx alone has no memory to ship, so no `history` is sent.
        graph = _flows.hello_graph()
        graph.session_id = "s-standalone"
        async with FakeServe(HAPPY) as serve:
            await _run(serve, Unit(graph=graph))
        self.assertEqual(serve.bodies[0]["session_id"], "s-standalone")
        self.assertNotIn("history", serve.bodies[0])


if __name__ == "__main__":
    unittest.main()
