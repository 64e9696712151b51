"""Langflow's database-backed services, for tests of what the executor does inside Langflow.

lfx alone (the stand-in, like the real one without Langflow) has no database: its memory
stubs keep nothing (``lfx/memory/stubs.py``) and ``session_scope`` yields a NoopSession, so
variables come from the environment. Inside Langflow, ``lfx.memory`` is Langflow's own
(``langflow/memory.py``: messages in the message table, filtered by session and ordered by
timestamp) and the variable service is ``DatabaseVariableService`` (a user's variables;
``get_variable(user_id, name, field, session)`` raises ``ValueError`` for a name the user
does not have). ``installed()`` puts in-memory equivalents of those in place of lfx's, for
one test.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from datetime import datetime, timezone
from typing import Any
from unittest import mock


class LangflowMemory:
    """langflow.memory's aget_messages / astore_message / aupdate_messages over a list, not the table."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    async def astore_message(self, message: Any, flow_id: Any = None, **_: Any) -> list[Any]:
        if not message.session_id or not message.sender or not message.sender_name:
            msg = (
                f"All of session_id, sender, and sender_name must be provided. Session ID: {message.session_id},"
                f" Sender: {message.sender}, Sender Name: {message.sender_name}"
            )
            raise ValueError(msg)
        stored = copy.deepcopy(message)
        stored.id = str(uuid.uuid4())
        if flow_id:
            stored.flow_id = str(flow_id)
        if not getattr(stored, "timestamp", None):
            stored.timestamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S %Z")
        self.rows.append(stored)
        return [copy.deepcopy(stored)]

    async def aupdate_messages(self, messages: Any) -> list[Any]:
        """langflow.memory.aupdate_messages: the stored row with each message's id replaced."""
        out = []
        for message in messages if isinstance(messages, list) else [messages]:
            at = next((i for i, m in enumerate(self.rows) if m.id == message.id), None)
            if at is None:
                msg = f"Message with id {message.id} not found"
                raise ValueError(msg)
            self.rows[at] = copy.deepcopy(message)
            out.append(copy.deepcopy(message))
        return out

    async def aget_messages(
        self,
        sender: str | None = None,
        sender_name: str | None = None,
        session_id: Any = None,
        context_id: str | None = None,
        order_by: str | None = "timestamp",
        order: str | None = "DESC",
        flow_id: Any = None,
        limit: int | None = None,
    ) -> list[Any]:
        found = [
            m
            for m in self.rows
            if (session_id is None or str(m.session_id) == str(session_id))
            and (sender is None or m.sender == sender)
            and (sender_name is None or m.sender_name == sender_name)
            and (context_id is None or getattr(m, "context_id", None) == context_id)
            and (flow_id is None or str(getattr(m, "flow_id", None)) == str(flow_id))
        ]
        # Stored order breaks timestamp ties, as the table's insertion order does.
        found = sorted(found, key=lambda m: str(getattr(m, order_by or "timestamp", "") or ""))
        if (order or "DESC").upper() == "DESC":
            found.reverse()
        if limit is not None:
            found = found[:limit]
        return [copy.deepcopy(m) for m in found]


class LangflowVariables:
    """DatabaseVariableService.get_variable: a user's variables, ValueError when absent."""

    def __init__(self) -> None:
        self.by_user: dict[str, dict[str, str]] = {}
        self.asked: list[tuple[Any, str, str]] = []

    def set(self, user_id: str, name: str, value: str) -> None:
        self.by_user.setdefault(str(user_id), {})[name] = value

    async def get_variable(self, user_id: Any, name: str, field: str, session: Any) -> str:  # noqa: ARG002
        self.asked.append((user_id, name, field))
        try:
            return self.by_user[str(user_id)][name]
        except KeyError:
            msg = f"{name} variable not found."
            raise ValueError(msg) from None


class _DatabaseSession:
    """What session_scope yields when Langflow has its database (anything but a NoopSession)."""


@contextlib.contextmanager
def installed():
    """(memory, variables) of a Langflow with its database, in place of lfx's for the block."""
    import lfx.memory
    import lfx.services.deps

    memory = LangflowMemory()
    variables = LangflowVariables()

    @contextlib.asynccontextmanager
    async def session_scope():
        yield _DatabaseSession()

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(lfx.memory, "aget_messages", memory.aget_messages))
        stack.enter_context(mock.patch.object(lfx.memory, "astore_message", memory.astore_message))
        stack.enter_context(mock.patch.object(lfx.memory, "aupdate_messages", memory.aupdate_messages, create=True))
        stack.enter_context(mock.patch.object(lfx.services.deps, "session_scope", session_scope))
        stack.enter_context(mock.patch.object(lfx.services.deps, "get_variable_service", lambda: variables))
        yield memory, variables
