"""A scripted stand-in for ``guestflow serve``'s run stream, for the executor's unit tests.

It answers ``POST /v1/runs`` with the run events a test gives it, one NDJSON line per event
in chunked encoding (what serve writes, bridge/API.md), and records each request's body.
``hold_before(i)`` keeps event ``i`` back until the test calls ``release(i)``, so a test can
look at what the executor did with the events before it. ``DELETE /v1/runs/{id}`` answers
``{"cancelled": true}``. Real-server behaviour is tested against ``guestflow serve`` itself
(``_server.py``); this one only lets the parsing and the Langflow-side effects be checked
without guests.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any


class FakeServe:
    def __init__(self, events: list[dict[str, Any]] | None = None, *, status: int = 200) -> None:
        self.events = [dict(e) for e in events or []]
        self.status = status
        self.bodies: list[Any] = []
        self.requests: list[str] = []
        self._holds: dict[int, asyncio.Event] = {}
        self.sent = 0
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold_before(self, index: int) -> None:
        self._holds[index] = asyncio.Event()

    def release(self, index: int) -> None:
        self._holds[index].set()

    async def __aenter__(self) -> FakeServe:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for hold in self._holds.values():
            hold.set()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode()
            self.requests.append(line)
            match = re.search(rb"(?i)content-length: (\d+)", head)
            body = await reader.readexactly(int(match.group(1))) if match else b""
            if line.startswith("DELETE "):
                self._answer(writer, 200, {"run_id": "run-1", "cancelled": True})
                return
            self.bodies.append(json.loads(body) if body else None)
            if self.status != 200:
                self._answer(writer, self.status, {"error": {"code": "bad_request", "message": "refused"}})
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                b"Transfer-Encoding: chunked\r\nX-Guestflow-Run-Id: run-1\r\n\r\n"
            )
            for i, event in enumerate(self.events):
                if i in self._holds:
                    await writer.drain()
                    await self._holds[i].wait()
                line_bytes = json.dumps({"run_id": "run-1", "seq": i, **event}).encode() + b"\n"
                writer.write(b"%x\r\n%s\r\n" % (len(line_bytes), line_bytes))
                self.sent = i + 1
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _answer(writer: asyncio.StreamWriter, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        writer.write(
            b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status, len(data), data)
        )


class RecordingEventManager:
    """Records the event_manager calls an executor makes, in order: ``(name, data)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str):
        if not name.startswith("on_"):
            raise AttributeError(name)

        def record(*, data: Any) -> None:
            self.calls.append((name, data))

        return record

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]
