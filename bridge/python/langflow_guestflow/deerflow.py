"""DeerFlow sandbox provider backed by ``guestflow serve``'s sessions (bridge/API.md "Sessions").

``GuestflowSandboxProvider`` hands DeerFlow one guest per (user, thread): ``acquire`` is
``POST /v1/sessions`` (the same user and thread always get the same guest, reclaimed from
the server's warm pool after a ``release``), and ``GuestflowSandbox`` maps DeerFlow's
``Sandbox`` contract onto the session's commands and file API.

Configure DeerFlow with ``sandbox.use: langflow_guestflow.deerflow:GuestflowSandboxProvider``
and ``GUESTFLOW_URL`` / ``GUESTFLOW_TOKEN`` in its environment.

When ``deerflow`` is importable the classes subclass its ``Sandbox`` and ``SandboxProvider``
ABCs (and grep returns its ``GrepMatch``, a full pool raises its
``SandboxCapacityExceededError``); without it they work duck-typed with local stand-ins of
the same names. Standard library only.

Names are byte-exact: the server lists with NUL separators and answers the bytes of any
name that is not UTF-8 (``path_b64``); they are returned here as ``os.fsdecode`` strings
(undecodable bytes kept as surrogate escapes, so ``os.fsencode`` gives the bytes back) and
are never stripped or split, so names with edge whitespace, newlines or ``\\v \\f \\x1c-\\x1e
\\x85`` survive ``list_dir`` and ``glob``. Paths sent are percent-encoded bytes.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import http.client
import json
import math
import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from langflow_guestflow._http import (
    CONNECT_TIMEOUT_SECONDS,
    GuestflowConnectionError,
    GuestflowError,
    error_from_answer,
)
from langflow_guestflow._settings import Endpoint, endpoint

try:  # DeerFlow's ABCs when it is installed; each module on its own (they import differently)
    from deerflow.sandbox.sandbox import Sandbox as _SandboxBase
except ImportError:  # pragma: no cover - exercised by the duck-typed test in a subprocess
    _SandboxBase = None  # type: ignore[assignment,misc]
try:
    from deerflow.sandbox.sandbox_provider import SandboxProvider as _ProviderBase
except ImportError:  # pragma: no cover
    _ProviderBase = None  # type: ignore[assignment,misc]
try:
    from deerflow.sandbox.search import GrepMatch
except ImportError:  # pragma: no cover

    @dataclass(frozen=True)
    class GrepMatch:  # type: ignore[no-redef]
        """DeerFlow's ``deerflow.sandbox.search.GrepMatch``."""

        path: str
        line_number: int
        line: str


try:
    from deerflow.sandbox.exceptions import SandboxCapacityExceededError
except ImportError:  # pragma: no cover

    class SandboxCapacityExceededError(RuntimeError):  # type: ignore[no-redef]
        """DeerFlow's error for a provider with no free replica slot."""

        CODE = "SANDBOX_CAPACITY_EXCEEDED"

        def __init__(self, message: str = "All sandbox replica slots are in use", *, retry_after_seconds: float = 5.0, reason: str = "capacity", **_: Any) -> None:
            super().__init__(message)
            self.message = message
            self.retry_after_seconds = retry_after_seconds
            self.reason = reason


DEERFLOW_AVAILABLE = _SandboxBase is not None and _ProviderBase is not None

__all__ = ["DEERFLOW_AVAILABLE", "GrepMatch", "GuestflowSandbox", "GuestflowSandboxProvider", "SandboxCapacityExceededError"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_COMMAND_TIMEOUT_SECONDS = 600
FILE_CALL_TIMEOUT_SECONDS = 300.0
MAX_ANSWER_BYTES = 128 << 20  # the server's download cap is 100 MiB by default
GREP_LINE_CHARS = 200  # DeerFlow's DEFAULT_LINE_SUMMARY_LENGTH
MAX_LIST_DEPTH = 64  # the server's limit


class _DuckSandbox:
    """What DeerFlow's ``Sandbox`` gives its subclasses, when DeerFlow is not installed."""

    persistent_shell_sessions: bool | None = None

    def __init__(self, id: str) -> None:  # noqa: A002 (DeerFlow's parameter name)
        self._id = id

    @property
    def id(self) -> str:
        return self._id

    def execute_command_in_scope(self, command: str, env: dict[str, str] | None = None, timeout: float | None = None, *, scope_id: str | None = None) -> str:
        del scope_id
        return self.execute_command(command, env=env, timeout=timeout)  # type: ignore[attr-defined]

    def release_command_scope(self, scope_id: str) -> None:
        del scope_id


class _DuckProvider:
    """What DeerFlow's ``SandboxProvider`` gives its subclasses, when DeerFlow is not installed."""

    uses_thread_data_mounts: bool = False
    needs_upload_permission_adjustment: bool = True


def _validate_env(env: dict[str, str] | None) -> None:
    """DeerFlow's rule for per-call env keys (``ValueError``), checked before any request."""
    for key in env or {}:
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            msg = f"extra_env key {key!r} is not a valid POSIX environment variable name (must match ^[A-Za-z_][A-Za-z0-9_]*$)"
            raise ValueError(msg)


def _guard_path(path: str) -> bytes:
    """The path's exact bytes; a ``..`` component is ``PermissionError`` (nothing is sent)."""
    if not isinstance(path, str) or not path:
        msg = "path must be a non-empty string"
        raise ValueError(msg)
    raw = os.fsencode(path)
    if any(part == b".." for part in raw.split(b"/")):
        msg = f"Access denied: path traversal detected in {path!r}"
        raise PermissionError(errno.EACCES, msg, path)
    if not raw.startswith(b"/"):
        msg = f"path must be absolute inside the sandbox, got {path!r}"
        raise ValueError(msg)
    return raw


def _name_of(entry: dict[str, Any]) -> str:
    """An entry's exact name as a str: ``path_b64`` bytes when given, else the text."""
    b64 = entry.get("path_b64")
    if isinstance(b64, str):
        return os.fsdecode(base64.b64decode(b64))
    return str(entry["path"])


def _summary(line: str, max_chars: int = GREP_LINE_CHARS) -> str:
    """A matched line as DeerFlow's grep reports it (``search.truncate_line``)."""
    line = line.rstrip("\n\r")
    return line if len(line) <= max_chars else line[: max_chars - 3] + "..."


def _capped(found: list, cap: int, truncated: bool) -> tuple[list, bool]:
    """DeerFlow allows ``max_results=0`` (nothing returned, truncated if anything matched);
    the server's minimum is 1, so such a call asks for one match and returns none."""
    if cap <= 0:
        return [], truncated or bool(found)
    return found, truncated


def _query(params: dict[str, Any]) -> str:
    parts = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8")
        parts.append(f"{key}={quote(raw, safe='/')}")
    return "&".join(parts)


class _Client:
    """Blocking HTTP to the server: one connection per call, errors as GuestflowError."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep

    def call(self, method: str, path: str, *, json_body: Any = None, raw_body: bytes | None = None, timeout: float = FILE_CALL_TIMEOUT_SECONDS) -> bytes:
        headers = self.ep.headers() | {"Connection": "close"}
        body = raw_body
        if json_body is not None:
            body = json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif raw_body is not None:
            headers["Content-Type"] = "application/octet-stream"
        if body is None and method in ("POST", "PUT"):
            body = b""
        cls = http.client.HTTPSConnection if self.ep.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.ep.host, self.ep.port, timeout=min(CONNECT_TIMEOUT_SECONDS, timeout))
        try:
            conn.connect()
            conn.sock.settimeout(timeout)
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read(MAX_ANSWER_BYTES + 1)
            status = resp.status
            answer_headers = {k.lower(): v for k, v in resp.getheaders()}
        except (OSError, http.client.HTTPException) as exc:
            msg = f"{method} {self.ep.base}{path} failed: {type(exc).__name__}: {exc}"
            raise GuestflowConnectionError(msg) from exc
        finally:
            conn.close()
        if len(data) > MAX_ANSWER_BYTES:
            msg = f"{method} {path}: answer larger than {MAX_ANSWER_BYTES} bytes"
            raise GuestflowConnectionError(msg)
        if not 200 <= status < 300:
            raise error_from_answer(status, data, answer_headers)
        return data

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        data = self.call(method, path, **kwargs)
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            msg = f"{method} {path}: answer is not JSON: {data[:200]!r}"
            raise GuestflowConnectionError(msg) from exc


def _file_error(err: GuestflowError, path: str, *, directory_expected: bool = False) -> OSError:
    """The server's refusal of a file call as the exception DeerFlow's callers expect."""
    status, code = err.status, err.code
    if status == 404 or code == "not_found":
        return FileNotFoundError(errno.ENOENT, err.message, path)
    if status == 403 or code == "policy_refused":
        return PermissionError(errno.EACCES, err.message, path)
    if status == 413 or code == "artifact_too_large":
        return OSError(errno.EFBIG, err.message, path)
    if status == 400 and "director" in err.message.lower():
        cls = NotADirectoryError if directory_expected else IsADirectoryError
        return cls(errno.ENOTDIR if directory_expected else errno.EISDIR, err.message, path)
    return OSError(errno.EIO, f"guestflow {code}: {err.message}", path)


class GuestflowSandbox(_SandboxBase or _DuckSandbox):  # type: ignore[misc]
    """One session's guest as a DeerFlow ``Sandbox``; ``id`` is the session id.

    Every command is a fresh ``sh -lc`` (no shell state carries over between calls).
    """

    persistent_shell_sessions = False

    def __init__(self, id: str, *, client: _Client | None = None) -> None:  # noqa: A002
        super().__init__(id)
        self._client = client or _Client(endpoint())
        self._base = "/v1/sessions/" + quote(id, safe="")

    # -- commands ------------------------------------------------------------------------

    def execute_command(self, command: str, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
        """Runs ``sh -lc command`` in the guest; the output as DeerFlow's LocalSandbox
        formats it (stdout, then ``Std Error:`` and stderr, then ``Exit Code: N`` when not
        0). A failed call (server gone, session released) is an ``Error: …`` string, as
        DeerFlow's remote sandboxes answer; a bad env key is ``ValueError``."""
        _validate_env(env)
        seconds = DEFAULT_COMMAND_TIMEOUT_SECONDS if timeout is None else min(max(1, math.ceil(timeout)), 86400)
        body: dict[str, Any] = {"command": command, "timeout_seconds": seconds}
        if env:
            body["env"] = dict(env)
        try:
            answer = self._client.json("POST", self._base + "/commands", json_body=body, timeout=seconds + 60.0)
        except GuestflowError as err:
            return f"Error: {err.message}"
        stdout = str(answer.get("stdout") or "")
        stderr = str(answer.get("stderr") or "")
        output = stdout
        if stderr:
            output += f"\nStd Error:\n{stderr}" if output else stderr
        if answer.get("timed_out"):
            notice = f"Command timed out after {seconds} seconds"
            output += f"\n{notice}" if output else notice
            output += "\nExit Code: 124"
        elif answer.get("exit_code", 0) != 0:
            output += f"\nExit Code: {answer.get('exit_code')}"
        return output or "(no output)"

    # -- files ---------------------------------------------------------------------------

    def _files(self, op: str, **params: Any) -> str:
        return f"{self._base}/files/{op}?{_query(params)}"

    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        raw = _guard_path(path)
        try:
            data = self._client.call("GET", self._files("read", path=raw, start_line=start_line, end_line=end_line))
        except GuestflowError as err:
            raise _file_error(err, path) from err
        return data.decode("utf-8", "replace")

    def download_file(self, path: str) -> bytes:
        raw = _guard_path(path)
        try:
            return self._client.call("GET", self._files("download", path=raw))
        except GuestflowError as err:
            raise _file_error(err, path) from err

    def write_file(self, path: str, content: str, append: bool = False) -> None:
        self._put("write", path, content.encode("utf-8"), append=append)

    def update_file(self, path: str, content: bytes) -> None:
        self._put("update", path, bytes(content))

    def _put(self, op: str, path: str, data: bytes, *, append: bool | None = None) -> None:
        raw = _guard_path(path)
        try:
            self._client.call("PUT", self._files(op, path=raw, append=append), raw_body=data)
        except GuestflowError as err:
            raise _file_error(err, path) from err

    def list_dir(self, path: str, max_depth=2) -> list[str]:
        """Everything under ``path`` to ``max_depth`` levels, directories marked with a
        trailing ``/`` and DeerFlow's ignored names (``node_modules``, ``*.log``, …) left out,
        as DeerFlow's LocalSandbox does; ``max_depth`` 0 (or less) is ``[]``. A missing path
        is ``FileNotFoundError``, never ``[]``."""
        raw = _guard_path(path)
        depth = min(max(0, int(max_depth)), MAX_LIST_DEPTH)
        try:
            answer = self._client.json("GET", self._files("list", path=raw, max_depth=depth))
        except GuestflowError as err:
            raise _file_error(err, path, directory_expected=True) from err
        out = []
        for entry in answer.get("entries", []):
            name = _name_of(entry)
            out.append(name + "/" if entry.get("type") == "dir" and not name.endswith("/") else name)
        return out

    def glob(self, path: str, pattern: str, *, include_dirs: bool = False, max_results: int = 200) -> tuple[list[str], bool]:
        """Paths under ``path`` matching ``pattern`` with DeerFlow's rule, which the server
        applies: a pattern without ``/`` matches the name at any depth (``*.py``); any other
        is anchored at ``path`` (``**`` spans directories). DeerFlow's ignored names are
        skipped."""
        raw = _guard_path(path)
        cap = int(max_results)
        try:
            answer = self._client.json("GET", self._files("glob", path=raw, pattern=pattern, include_dirs=include_dirs, max_results=max(cap, 1)))
        except GuestflowError as err:
            raise _file_error(err, path, directory_expected=True) from err
        found = [_name_of(m) for m in answer.get("matches", [])]
        return _capped(found, cap, bool(answer.get("truncated")))

    def grep(
        self,
        path: str,
        pattern: str,
        *,
        glob: str | None = None,
        literal: bool = False,
        case_sensitive: bool = False,
        max_results: int = 100,
    ) -> tuple[list[GrepMatch], bool]:
        """Lines matching ``pattern`` (Python ``re`` over bytes, as the server runs it: a
        bad pattern is ``re.error`` here, before any request); ``glob`` filters the path
        relative to ``path`` with glob's rule, as DeerFlow's does."""
        raw = _guard_path(path)
        if not literal:
            re.compile(pattern.encode("utf-8"), 0 if case_sensitive else re.IGNORECASE)
        cap = int(max_results)
        params = {"path": raw, "pattern": pattern, "glob": glob, "literal": literal, "case_sensitive": case_sensitive, "max_results": max(cap, 1)}
        try:
            answer = self._client.json("GET", self._files("grep", **params))
        except GuestflowError as err:
            raise _file_error(err, path) from err
        matches = [GrepMatch(path=_name_of(m), line_number=int(m["line_number"]), line=_summary(str(m.get("line", "")))) for m in answer.get("matches", [])]
        return _capped(matches, cap, bool(answer.get("truncated")))


class GuestflowSandboxProvider(_ProviderBase or _DuckProvider):  # type: ignore[misc]
    """DeerFlow ``SandboxProvider`` over ``guestflow serve``'s sessions.

    ``acquire`` gives the same (user, thread) the same guest; ``release`` returns it to the
    server's warm pool (reclaimable only by the same user and thread); ``reset`` releases
    what this instance acquired; ``shutdown`` deletes it. A thread of ``None`` gets a
    guest of its own (a fresh thread id); a user of ``None`` is ``"default"``.
    """

    uses_thread_data_mounts = False
    needs_upload_permission_adjustment = False

    def __init__(self, url: str | None = None, token: str | None = None, *, image: str | None = None, allow_network: bool = False, **_: Any) -> None:
        self._client = _Client(endpoint(url, token))
        self._image = image
        self._allow_network = allow_network
        self._lock = threading.Lock()
        self._sandboxes: dict[str, GuestflowSandbox] = {}  # active, acquired here
        self._acquired: set[str] = set()  # every session acquired here and not deleted

    def acquire(self, thread_id: str | None = None, *, user_id: str | None = None) -> str:
        body: dict[str, Any] = {
            "user_id": user_id or "default",
            "thread_id": thread_id or f"deerflow-{uuid.uuid4().hex}",
            "allow_network": bool(self._allow_network),
        }
        if self._image:
            body["image"] = self._image
        try:
            session = self._client.json("POST", "/v1/sessions", json_body=body, timeout=FILE_CALL_TIMEOUT_SECONDS)
        except GuestflowError as err:
            if err.status == 429 or err.code == "capacity":
                raise SandboxCapacityExceededError(err.message, retry_after_seconds=err.retry_after or 5.0) from err
            raise
        sandbox_id = str(session["session_id"])
        with self._lock:
            self._acquired.add(sandbox_id)
            if sandbox_id not in self._sandboxes:
                self._sandboxes[sandbox_id] = GuestflowSandbox(sandbox_id, client=self._client)
        return sandbox_id

    async def acquire_async(self, thread_id: str | None = None, *, user_id: str | None = None) -> str:
        return await asyncio.to_thread(self.acquire, thread_id, user_id=user_id)

    def get(self, sandbox_id: str) -> GuestflowSandbox | None:
        """The active session's sandbox; ``None`` when the server does not know it or it
        was released (commands and files need an active session)."""
        with self._lock:
            cached = self._sandboxes.get(sandbox_id)
        if cached is not None:
            return cached
        try:
            session = self._client.json("GET", "/v1/sessions/" + quote(sandbox_id, safe=""), timeout=CONNECT_TIMEOUT_SECONDS * 3)
        except GuestflowError as err:
            if err.status == 404 or err.code == "not_found":
                return None
            raise
        if session.get("state") != "active":
            return None
        with self._lock:
            return self._sandboxes.setdefault(sandbox_id, GuestflowSandbox(sandbox_id, client=self._client))

    def release(self, sandbox_id: str) -> None:
        with self._lock:
            self._sandboxes.pop(sandbox_id, None)
        try:
            self._client.json("POST", "/v1/sessions/" + quote(sandbox_id, safe="") + "/release", timeout=FILE_CALL_TIMEOUT_SECONDS)
        except GuestflowError as err:
            if err.status != 404 and err.code != "not_found":  # already gone: released enough
                raise

    def reset(self) -> None:
        with self._lock:
            ids = list(self._sandboxes)
        for sandbox_id in ids:
            self.release(sandbox_id)

    def shutdown(self) -> None:
        """Deletes the guests this instance acquired, released ones too (DeerFlow calls it
        when the app stops)."""
        with self._lock:
            ids = sorted(self._acquired)
            self._sandboxes.clear()
        for sandbox_id in ids:
            self.delete(sandbox_id)

    def delete(self, sandbox_id: str) -> None:
        """Deletes the session's guest (not part of DeerFlow's contract)."""
        with self._lock:
            self._sandboxes.pop(sandbox_id, None)
            self._acquired.discard(sandbox_id)
        try:
            self._client.json("DELETE", "/v1/sessions/" + quote(sandbox_id, safe=""), timeout=FILE_CALL_TIMEOUT_SECONDS)
        except GuestflowError as err:
            if err.status != 404 and err.code != "not_found":
                raise
