"""HTTP to the guestflow server, standard library only.

Two clients, one per calling convention:

* ``request_json`` (blocking, ``http.client``) for the sandbox backend and the component:
  lfx calls ``SandboxBackend.run`` synchronously from arbitrary threads, and one request /
  one JSON answer is all either needs.
* ``open_stream`` (``asyncio.open_connection`` plus a small HTTP/1.1 reader) for the
  executor's NDJSON run stream. Chosen over a thread doing blocking ``http.client`` reads
  because cancellation must be prompt and clean: ``aclose()`` or task cancellation lands on
  an ``await`` of this reader and closing the transport ends everything at once, whereas a
  thread blocked in ``recv`` can only be interrupted by closing its socket from another
  thread (racy) and costs one OS thread per concurrent run. The reader decodes
  ``Transfer-Encoding: chunked`` and hands out each NDJSON line as soon as its newline has
  arrived; nothing buffers the whole body.

Every non-2xx answer becomes a :class:`GuestflowError` carrying the server's
``{"error":{"code","message"}}``; a transport failure (refused, reset, timed out, not
HTTP) becomes :class:`GuestflowConnectionError` with code ``unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from langflow_guestflow._settings import Endpoint

CONNECT_TIMEOUT_SECONDS = 10.0
MAX_JSON_BODY = 256 << 20  # a component's returned files ride base64 inside the answer
MAX_HEADER_BYTES = 64 << 10


class GuestflowError(RuntimeError):
    """The server answered with an error (or could not be reached: see the subclass)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        run_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"guestflow {code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.run_id = run_id
        self.retry_after = retry_after


class GuestflowConnectionError(GuestflowError):
    """The server could not be reached or did not speak HTTP/JSON."""

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message)


def error_from_answer(status: int, body: bytes, headers: dict[str, str]) -> GuestflowError:
    """Turn a non-2xx answer into a GuestflowError (tolerating a body that is not ours)."""
    code, message, run_id = _status_code_name(status), "", None
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            code = str(err.get("code") or code)
            message = str(err.get("message") or "")
        if isinstance(doc.get("run_id"), str):
            run_id = doc["run_id"]
    if not message:
        message = f"HTTP {status}" + (f": {body[:200].decode('utf-8', 'replace')}" if body else "")
    retry_after = None
    with contextlib.suppress(KeyError, ValueError):
        retry_after = float(headers["retry-after"])
    return GuestflowError(code, message, status=status, run_id=run_id, retry_after=retry_after)


def _status_code_name(status: int) -> str:
    return {
        400: "bad_request",
        401: "policy_refused",
        403: "policy_refused",
        404: "not_found",
        409: "paused",
        413: "bad_request",
        429: "capacity",
        502: "guest_failed",
        503: "unavailable",
        504: "timeout",
        507: "oom",
    }.get(status, "transient")


def _json_bytes(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=_json_default).encode("utf-8")


def _json_default(value: Any) -> Any:
    """Serialize what Graph.dump() or InputValueRequest may carry beyond plain JSON."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    as_dict = getattr(value, "dict", None)
    if callable(as_dict):
        return as_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


# -- blocking client ---------------------------------------------------------------------


def request_json(
    ep: Endpoint,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float,
) -> Any:
    """One request, one JSON answer. Raises GuestflowError on any non-2xx answer."""
    payload = None if body is None else _json_bytes(body)
    headers = ep.headers() | {"Accept": "application/json", "Connection": "close"}
    if payload is not None:
        headers["Content-Type"] = "application/json"
    cls = http.client.HTTPSConnection if ep.scheme == "https" else http.client.HTTPConnection
    conn = cls(ep.host, ep.port, timeout=min(CONNECT_TIMEOUT_SECONDS, timeout))
    try:
        conn.connect()
        # The connect budget is short; the answer may legitimately take the whole run.
        conn.sock.settimeout(timeout)
        conn.request(method, path, body=payload, headers=headers)
        resp = conn.getresponse()
        data = resp.read(MAX_JSON_BODY + 1)
        answer_headers = {k.lower(): v for k, v in resp.getheaders()}
        status = resp.status
    except (OSError, http.client.HTTPException) as exc:
        msg = f"{method} {ep.base}{path} failed: {type(exc).__name__}: {exc}"
        raise GuestflowConnectionError(msg) from exc
    finally:
        conn.close()
    if len(data) > MAX_JSON_BODY:
        msg = f"{method} {path}: answer larger than {MAX_JSON_BODY} bytes"
        raise GuestflowConnectionError(msg)
    if not 200 <= status < 300:
        raise error_from_answer(status, data, answer_headers)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        msg = f"{method} {path}: answer is not JSON: {data[:200]!r}"
        raise GuestflowConnectionError(msg) from exc


# -- asyncio client ----------------------------------------------------------------------


class AsyncResponse:
    """An HTTP/1.1 response being read off an asyncio stream (one request per connection)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self._closed = False

    async def _read_head(self, timeout: float) -> None:
        try:
            head = await asyncio.wait_for(self._reader.readuntil(b"\r\n\r\n"), timeout)
        except asyncio.LimitOverrunError as exc:
            msg = "response headers too large"
            raise GuestflowConnectionError(msg) from exc
        lines = head.decode("iso-8859-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            msg = f"not an HTTP/1.x status line: {lines[0][:100]!r}"
            raise GuestflowConnectionError(msg)
        self.status = int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if sep:
                self.headers[name.strip().lower()] = value.strip()

    async def _pieces(self, idle_timeout: float) -> AsyncIterator[bytes]:
        """The body as it arrives, de-chunked."""
        reader = self._reader

        async def timed(awaitable):
            # asyncio.wait_for before 3.12 returns the result, and drops the cancellation,
            # when the read completes just as this task is cancelled: a cancelled consumer
            # would go on reading the run. A cancel requested during this wait is honoured.
            task = asyncio.current_task()
            cancelling = getattr(task, "cancelling", None)
            before = cancelling() if cancelling else 0
            result = await asyncio.wait_for(awaitable, idle_timeout)
            if cancelling and cancelling() > before:
                raise asyncio.CancelledError
            return result

        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await timed(reader.readuntil(b"\r\n"))
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError as exc:
                    msg = f"bad chunk size line {size_line[:40]!r}"
                    raise GuestflowConnectionError(msg) from exc
                if size == 0:
                    while (await timed(reader.readuntil(b"\r\n"))) != b"\r\n":
                        pass  # trailers
                    return
                data = await timed(reader.readexactly(size))
                if await timed(reader.readexactly(2)) != b"\r\n":
                    msg = "chunk not terminated by CRLF"
                    raise GuestflowConnectionError(msg)
                yield data
        elif "content-length" in self.headers:
            remaining = int(self.headers["content-length"])
            while remaining > 0:
                data = await timed(reader.read(min(remaining, 1 << 16)))
                if not data:
                    msg = f"connection closed with {remaining} body bytes missing"
                    raise GuestflowConnectionError(msg)
                remaining -= len(data)
                yield data
        else:  # delimited by the connection closing (we always send Connection: close)
            while data := await timed(reader.read(1 << 16)):
                yield data

    async def read_all(self, *, limit: int = MAX_JSON_BODY, idle_timeout: float = 60.0) -> bytes:
        out = bytearray()
        async for piece in self._pieces(idle_timeout):
            out += piece
            if len(out) > limit:
                msg = f"answer larger than {limit} bytes"
                raise GuestflowConnectionError(msg)
        return bytes(out)

    async def lines(self, *, max_line: int, idle_timeout: float) -> AsyncIterator[bytes]:
        """Each newline-terminated line as soon as it is complete (NDJSON)."""
        buf = bytearray()
        async for piece in self._pieces(idle_timeout):
            buf += piece
            start = 0
            while (nl := buf.find(b"\n", start)) >= 0:
                line = bytes(buf[start:nl]).rstrip(b"\r")
                start = nl + 1
                if line:
                    yield line
            del buf[:start]
            if len(buf) > max_line:
                msg = f"a stream line exceeded {max_line} bytes"
                raise GuestflowConnectionError(msg)
        if buf.strip():
            msg = "the stream ended in the middle of a line"
            raise GuestflowConnectionError(msg)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 2.0)


async def open_stream(
    ep: Endpoint,
    method: str,
    path: str,
    body: Any = None,
    *,
    accept: str = "application/json",
    header_timeout: float = 60.0,
) -> AsyncResponse:
    """Send one request on a fresh connection and read the status line and headers."""
    payload = b"" if body is None else _json_bytes(body)
    headers = ep.headers() | {"Accept": accept, "Connection": "close"}
    if body is not None or method in ("POST", "PUT"):
        headers["Content-Type"] = "application/json"
        headers["Content-Length"] = str(len(payload))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    ssl_ctx = ssl.create_default_context() if ep.scheme == "https" else None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                ep.host,
                ep.port,
                ssl=ssl_ctx,
                server_hostname=ep.host if ssl_ctx else None,
                limit=MAX_HEADER_BYTES,
            ),
            CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, asyncio.TimeoutError) as exc:
        msg = f"{method} {ep.base}{path}: cannot connect: {type(exc).__name__}: {exc}"
        raise GuestflowConnectionError(msg) from exc
    resp = AsyncResponse(reader, writer)
    try:
        with contextlib.suppress(OSError, AttributeError):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.write(head.encode("iso-8859-1") + payload)
        await asyncio.wait_for(writer.drain(), header_timeout)
        await resp._read_head(header_timeout)  # noqa: SLF001 - same module
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        await resp.aclose()
        msg = f"{method} {ep.base}{path}: {type(exc).__name__}: {exc}"
        raise GuestflowConnectionError(msg) from exc
    except BaseException:
        await resp.aclose()
        raise
    return resp


async def request_json_async(
    ep: Endpoint, method: str, path: str, body: Any = None, *, timeout: float = 30.0
) -> Any:
    """The asyncio twin of request_json (used for DELETE on cancellation)."""
    resp = await open_stream(ep, method, path, body, header_timeout=timeout)
    try:
        data = await resp.read_all(idle_timeout=timeout)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        msg = f"{method} {path}: {type(exc).__name__}: {exc}"
        raise GuestflowConnectionError(msg) from exc
    finally:
        await resp.aclose()
    if not 200 <= resp.status < 300:
        raise error_from_answer(resp.status, data, resp.headers)
    try:
        return json.loads(data.decode("utf-8")) if data else None
    except (UnicodeDecodeError, ValueError) as exc:
        msg = f"{method} {path}: answer is not JSON"
        raise GuestflowConnectionError(msg) from exc
