"""DeerFlow sandbox provider backed by ``guestflow serve``'s sessions (bridge/API.md "Sessions").

``GuestflowSandboxProvider`` hands DeerFlow one guest per (user, thread): ``acquire`` is
``POST /v1/sessions`` (the same user and thread always get the same guest, kept by the
server with its files after a ``release``), and ``GuestflowSandbox`` maps DeerFlow's
``Sandbox`` contract onto the session's commands and file API.

Configure DeerFlow with ``sandbox.use: langflow_guestflow.deerflow:GuestflowSandboxProvider``
and ``GUESTFLOW_URL`` / ``GUESTFLOW_TOKEN`` in its environment; the provider reads the rest
of DeerFlow's ``sandbox:`` section (``_deerflow_config``: each key honoured or refused at
construction, naming it). bridge/python/README.md "DeerFlow" has a config.yaml excerpt.

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
import importlib
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from langflow_guestflow._deerflow_config import GuestflowConfigError, SessionSettings, settings_from
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

        def __init__(
            self,
            message: str = "All sandbox replica slots are in use",
            *,
            active: int = 0,
            warm: int = 0,
            reserved: int = 0,
            replicas: int = 0,
            retry_after_seconds: float = 5.0,
            reason: str = "capacity",
        ) -> None:
            super().__init__(message)
            self.message = message
            self.active, self.warm, self.reserved, self.replicas = active, warm, reserved, replicas
            self.retry_after_seconds = retry_after_seconds
            self.reason = reason


try:
    from deerflow.config.paths import VIRTUAL_PATH_PREFIX
except ImportError:  # pragma: no cover
    VIRTUAL_PATH_PREFIX = "/mnt/user-data"  # DeerFlow's deerflow.config.paths value

DEERFLOW_AVAILABLE = _SandboxBase is not None and _ProviderBase is not None

__all__ = [
    "DEERFLOW_AVAILABLE",
    "GrepMatch",
    "GuestflowConfigError",
    "GuestflowSandbox",
    "GuestflowSandboxProvider",
    "SandboxCapacityExceededError",
    "SessionSettings",
]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_COMMAND_TIMEOUT_SECONDS = 600
FILE_CALL_TIMEOUT_SECONDS = 300.0
MAX_ANSWER_BYTES = 128 << 20  # the server's download cap is 100 MiB by default
GREP_LINE_CHARS = 200  # DeerFlow's DEFAULT_LINE_SUMMARY_LENGTH
MAX_LIST_DEPTH = 64  # the server's limit


class _DuckSandbox:
    """What DeerFlow's ``Sandbox`` gives its subclasses, when DeerFlow is not installed."""

    def __init__(self, id: str) -> None:  # noqa: A002 (DeerFlow's parameter name)
        self._id = id

    @property
    def id(self) -> str:
        return self._id


class _DuckProvider:
    """What DeerFlow's ``SandboxProvider`` gives its subclasses, when DeerFlow is not installed."""

    uses_thread_data_mounts: bool = False
    needs_upload_permission_adjustment: bool = True

    async def acquire_async(self, thread_id: str | None = None, *, user_id: str | None = None) -> str:
        return await asyncio.to_thread(self.acquire, thread_id, user_id=user_id)  # type: ignore[attr-defined]


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
        # A read-only place is EROFS, as DeerFlow's LocalSandbox says it; any other refusal EACCES.
        return PermissionError(errno.EROFS if "read-only" in err.message else errno.EACCES, err.message, path)
    if status == 413 or code == "artifact_too_large":
        return OSError(errno.EFBIG, err.message, path)
    if status == 400 and "director" in err.message.lower():
        cls = NotADirectoryError if directory_expected else IsADirectoryError
        return cls(errno.ENOTDIR if directory_expected else errno.EISDIR, err.message, path)
    return OSError(errno.EIO, f"guestflow {code}: {err.message}", path)




def _line_range(text: str) -> str:
    """Lines as DeerFlow's LocalSandbox returns a range: each without its line ending,
    joined by ``\\n`` (so the last line has none)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(line.rstrip("\r\n") for line in lines)


def _timeout_notice(timeout: float) -> str:
    """DeerFlow's LocalSandbox notice for a command killed at its timeout."""
    seconds = float(timeout)
    amount = str(int(seconds)) if seconds.is_integer() else f"{seconds:g}"
    unit = "second" if seconds == 1 else "seconds"
    return (
        f"Command timed out after {amount} {unit} and was terminated. "
        "To run a long-lived process such as a web server, start it in the background "
        f"and redirect its output, e.g. `your-command > {VIRTUAL_PATH_PREFIX}/workspace/server.log 2>&1 &`."
    )


class GuestflowSandbox(_SandboxBase or _DuckSandbox):  # type: ignore[misc]
    """One session's guest as a DeerFlow ``Sandbox``; ``id`` is the session id.

    Every command is a fresh ``sh -lc`` (no shell state carries over between calls), with
    the config's ``environment`` under the call's ``env``. An object held across a
    ``release`` keeps working, as DeerFlow's LocalSandbox does: the server refuses a
    released session's calls, so the object acquires its (user, thread) again (the same
    guest, with every file) and repeats the call once.
    """

    def __init__(
        self,
        id: str,  # noqa: A002
        *,
        client: _Client | None = None,
        environment: dict[str, str] | None = None,
        command_timeout: int = DEFAULT_COMMAND_TIMEOUT_SECONDS,
        reacquire: Callable[[str, str | None], str] | None = None,
        owner: tuple[str | None, str] | None = None,
    ) -> None:
        super().__init__(id)
        self._client = client or _Client(endpoint())
        self._base = "/v1/sessions/" + quote(id, safe="")
        self._environment = dict(environment or {})
        self._command_timeout = command_timeout
        self._reacquire = reacquire
        self._owner = owner  # (user_id, thread_id) as acquired, for reacquire

    def _revived(self, err: GuestflowError) -> bool:
        """After a 400: whether the session was released and is now acquired again."""
        if err.status != 400 or self._reacquire is None:
            return False
        try:
            session = self._client.json("GET", self._base, timeout=CONNECT_TIMEOUT_SECONDS * 3)
        except GuestflowError:
            return False
        if session.get("state") not in ("warm", "stopped"):
            return False
        user, thread = self._owner or (str(session["user_id"]), str(session["thread_id"]))
        return self._reacquire(thread, user) == self.id

    def _session_call(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except GuestflowError as err:
            if not self._revived(err):
                raise
        return call()

    # -- service URLs --------------------------------------------------------------------

    def expose_port(self, port: int, *, ttl_seconds: int | None = None) -> str:
        """A URL that reaches ``port`` inside this guest — a web app, a notebook, an MCP
        server the agent started in the background — over HTTP, server-sent streams and
        WebSockets. On a local control plane it lives until it expires (the server's
        ``GUESTFLOW_PORT_URL_TTL_SECONDS``, or ``ttl_seconds`` if less) and carries its own
        scoped token: hand it to a user or a browser as is. On CreateOS it is CreateOS's own
        public URL, which does not expire (leave ``ttl_seconds`` unset), and only when the
        server runs with ``GUESTFLOW_CREATEOS_PUBLIC_INGRESS=true``; otherwise
        ``GuestflowError`` 503 ``unavailable`` naming that setting. Raises ``ValueError`` for
        a port outside 1..65535."""
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            msg = f"port must be an integer in 1..65535, got {port!r}"
            raise ValueError(msg)
        body = {} if ttl_seconds is None else {"ttl_seconds": int(ttl_seconds)}
        doc = self._session_call(lambda: self._client.json("POST", f"{self._base}/ports/{port}", json_body=body, timeout=CONNECT_TIMEOUT_SECONDS * 3))
        return str(doc["url"])

    # -- commands ------------------------------------------------------------------------

    def execute_command(self, command: str, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
        """Runs ``sh -lc command`` in the guest; the output as DeerFlow's LocalSandbox
        formats it (stdout, then ``Std Error:`` and stderr, then ``Exit Code: N`` when not
        0, or its timeout notice). A failed call (server gone, session deleted) is an
        ``Error: …`` string, as DeerFlow's remote sandboxes answer; a bad env key is
        ``ValueError``. ``timeout`` ``None`` is the config's ``bash_command_timeout``; the
        server counts whole seconds, so a fraction is rounded up."""
        _validate_env(env)
        if timeout is None:
            timeout = self._command_timeout
        seconds = min(max(1, math.ceil(timeout)), 86400)
        body: dict[str, Any] = {"command": command, "timeout_seconds": seconds}
        merged = {**self._environment, **(env or {})}
        if merged:
            body["env"] = merged
        try:
            answer = self._session_call(lambda: self._client.json("POST", self._base + "/commands", json_body=body, timeout=seconds + 60.0))
        except GuestflowError as err:
            return f"Error: {err.message}"
        output = str(answer.get("stdout") or "")
        stderr = str(answer.get("stderr") or "")
        if stderr:
            output += f"\nStd Error:\n{stderr}" if output else stderr
        if answer.get("timed_out"):
            notice = _timeout_notice(timeout)
            output += f"\n{notice}" if output else notice
        elif answer.get("exit_code", 0) != 0:
            output += f"\nExit Code: {answer.get('exit_code')}"
        return output or "(no output)"

    # -- files ---------------------------------------------------------------------------

    def _files(self, op: str, **params: Any) -> str:
        return f"{self._base}/files/{op}?{_query(params)}"

    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """The file's text; with a line range, the lines as DeerFlow's LocalSandbox gives
        them (1-based, inclusive, a start below 1 read as 1, each line without its ending)."""
        raw = _guard_path(path)
        ranged = start_line is not None or end_line is not None
        first = max(int(start_line or 1), 1)
        empty = end_line is not None and int(end_line) < first
        params = {"path": raw}
        if ranged:
            # An empty range still checks the file is there (LocalSandbox opens it first).
            params.update(start_line=1 if empty else first, end_line=1 if empty else end_line)
        try:
            data = self._session_call(lambda: self._client.call("GET", self._files("read", **params)))
        except GuestflowError as err:
            raise _file_error(err, path) from err
        text = data.decode("utf-8", "replace")
        if not ranged:
            return text
        return "" if empty else _line_range(text)

    def download_file(self, path: str) -> bytes:
        """The file's bytes; only under DeerFlow's ``/mnt/user-data`` (``PermissionError``
        otherwise, before any request, as DeerFlow's sandboxes refuse it), and the server
        refuses a symlink leading out of its download prefix."""
        raw = _guard_path(path)
        allowed = VIRTUAL_PATH_PREFIX.strip("/")
        stripped = path.lstrip("/")
        if stripped != allowed and not stripped.startswith(allowed + "/"):
            raise PermissionError(errno.EACCES, f"Access denied: path must be under '{VIRTUAL_PATH_PREFIX}'", path)
        try:
            return self._session_call(lambda: self._client.call("GET", self._files("download", path=raw)))
        except GuestflowError as err:
            raise _file_error(err, path) from err

    def write_file(self, path: str, content: str, append: bool = False) -> None:
        self._put("write", path, content.encode("utf-8"), append=append)

    def update_file(self, path: str, content: bytes) -> None:
        self._put("update", path, bytes(content))

    def _put(self, op: str, path: str, data: bytes, *, append: bool | None = None) -> None:
        raw = _guard_path(path)
        try:
            self._session_call(lambda: self._client.call("PUT", self._files(op, path=raw, append=append), raw_body=data))
        except GuestflowError as err:
            raise _file_error(err, path) from err

    def list_dir(self, path: str, max_depth=2) -> list[str]:
        """Files and directories under ``path`` to ``max_depth`` levels, directories marked
        with a trailing ``/`` and DeerFlow's ignored names (``node_modules``, ``*.log``, …)
        left out, as DeerFlow's LocalSandbox does; symlinks are not listed (LocalSandbox
        lists none as itself, BoxLite's ``find -type f -o -type d`` none at all) nor
        followed. ``max_depth`` 0 (or less) is ``[]``. A missing path is
        ``FileNotFoundError``, never ``[]``."""
        raw = _guard_path(path)
        depth = min(max(0, int(max_depth)), MAX_LIST_DEPTH)
        try:
            answer = self._session_call(lambda: self._client.json("GET", self._files("list", path=raw, max_depth=depth)))
        except GuestflowError as err:
            raise _file_error(err, path, directory_expected=True) from err
        out = []
        for entry in answer.get("entries", []):
            if entry.get("type") == "symlink":
                continue
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
            answer = self._session_call(
                lambda: self._client.json("GET", self._files("glob", path=raw, pattern=pattern, include_dirs=include_dirs, max_results=max(cap, 1)))
            )
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
            answer = self._session_call(lambda: self._client.json("GET", self._files("grep", **params)))
        except GuestflowError as err:
            raise _file_error(err, path) from err
        matches = [GrepMatch(path=_name_of(m), line_number=int(m["line_number"]), line=_summary(str(m.get("line", "")))) for m in answer.get("matches", [])]
        return _capped(matches, cap, bool(answer.get("truncated")))


class GuestflowSandboxProvider(_ProviderBase or _DuckProvider):  # type: ignore[misc]
    """DeerFlow ``SandboxProvider`` over ``guestflow serve``'s sessions.

    DeerFlow builds it with no arguments: the server is ``GUESTFLOW_URL`` /
    ``GUESTFLOW_TOKEN`` and the settings are DeerFlow's ``sandbox:`` config section
    (``_deerflow_config``: every key honoured or refused here, naming it). ``url``,
    ``token`` and ``config`` (the section as a mapping or DeerFlow's model) are for use
    without DeerFlow.

    ``acquire`` gives the same (user, thread) the same guest; ``release`` returns it to the
    server, which keeps it with its files for the same user and thread (the sandbox object
    stays usable: its next call acquires it again); ``reset`` and ``shutdown`` release what
    this instance holds; only ``delete`` deletes a guest. A thread of ``None`` gets a guest of
    its own (a fresh thread id); a user of ``None`` is ``"default"``.
    """

    uses_thread_data_mounts = False
    needs_upload_permission_adjustment = False

    def __init__(self, *, url: str | None = None, token: str | None = None, config: Any = None) -> None:
        if config is None:
            config = _deerflow_section()
        self._settings = settings_from(config)
        self._client = _Client(endpoint(url, token))
        self._lock = threading.Condition()
        self._objects: dict[str, GuestflowSandbox] = {}  # every session met here and not deleted
        self._active: set[str] = set()  # acquired here and not released
        self._ids: dict[tuple[str, str], str] = {}  # (user, thread) -> session id
        self._pending = 0  # acquires between their slot and the server's answer

    @property
    def settings(self) -> SessionSettings:
        return self._settings

    def _sandbox(self, session: dict[str, Any]) -> GuestflowSandbox:
        """The one object of a session (callers hold the lock)."""
        sid = str(session["session_id"])
        owner: tuple[str | None, str] = (str(session.get("user_id", "")), str(session.get("thread_id", "")))
        if sid not in self._objects:
            self._objects[sid] = GuestflowSandbox(
                sid,
                client=self._client,
                environment=self._settings.environment,
                command_timeout=self._settings.command_timeout,
                reacquire=lambda thread, user: self.acquire(thread, user_id=user),
                owner=owner,
            )
        self._ids[(owner[0] or "default", owner[1])] = sid
        return self._objects[sid]

    def _capacity_error(self, message: str, retry_after: float) -> Exception:
        replicas = self._settings.replicas or 0
        return SandboxCapacityExceededError(message, active=len(self._active), replicas=replicas, retry_after_seconds=retry_after)

    def acquire(self, thread_id: str | None = None, *, user_id: str | None = None) -> str:
        """The session of (user, thread), active, with the config's ``image``, ``mounts``,
        ``allow_network``, ``idle_timeout``, ``memory_mib`` and ``cpus``, and (``sync_thread_dir``, the default) DeerFlow's thread
        directory, so the server copies its uploads in and the outputs back on release, as
        DeerFlow's remote providers do. At the config's ``replicas`` active
        sessions of this provider, or the server's own cap, ``overflow_policy`` ``wait``
        (DeerFlow's default) waits up to ``acquire_timeout`` seconds for a slot, ``reject``
        raises ``SandboxCapacityExceededError`` at once."""
        user = user_id or "default"
        thread = thread_id or f"deerflow-{uuid.uuid4().hex}"
        body: dict[str, Any] = {"user_id": user, "thread_id": thread, "allow_network": self._settings.allow_network}
        if self._settings.image:
            body["image"] = self._settings.image
        if self._settings.mounts:
            body["mounts"] = [dict(m) for m in self._settings.mounts]
        for key, value in (("idle_timeout_seconds", self._settings.idle_timeout), ("memory_mib", self._settings.memory_mib), ("cpus", self._settings.cpus)):
            if value is not None:
                body[key] = value
        thread_dir = _thread_dir(thread_id, user_id) if self._settings.sync_thread_dir else None
        if thread_dir:
            body["thread_dir"] = thread_dir
        deadline = time.monotonic() + (self._settings.acquire_timeout if self._settings.wait_for_capacity else 0.0)
        while True:
            with self._lock:
                known = self._ids.get((user, thread))
                slot = known is None or known not in self._active
                cap = self._settings.replicas
                if slot and cap is not None and len(self._active) + self._pending >= cap:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._capacity_error(f"{cap} of {cap} sandbox replicas of this provider are active (sandbox.replicas)", 1.0)
                    self._lock.wait(min(left, 1.0))  # woken by a release
                    continue
                if slot:
                    self._pending += 1
            try:
                session = self._client.json("POST", "/v1/sessions", json_body=body, timeout=FILE_CALL_TIMEOUT_SECONDS)
            except GuestflowError as err:
                if err.status != 429 and err.code != "capacity":
                    raise
                retry = err.retry_after or 1.0
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._capacity_error(err.message, retry) from err
                with self._lock:
                    self._lock.wait(min(left, retry))
                continue
            finally:
                if slot:
                    with self._lock:
                        self._pending -= 1
            with self._lock:
                sandbox = self._sandbox(session)
                sandbox._owner = (user_id, thread)  # as DeerFlow asked: the same thread directory again
                self._active.add(sandbox.id)
                return sandbox.id

    def get(self, sandbox_id: str) -> GuestflowSandbox | None:
        """The sandbox of a session acquired here, one object per session: after a
        ``release`` too, as DeerFlow's LocalSandbox keeps its instance (its first call
        acquires the session again). ``None`` for any other id (one deleted here, or one
        from before a restart: DeerFlow then acquires its thread, the same guest). Memory
        only, no request: DeerFlow calls it on its event loop."""
        with self._lock:
            return self._objects.get(sandbox_id)

    def release(self, sandbox_id: str) -> None:
        with self._lock:
            self._active.discard(sandbox_id)
            self._lock.notify_all()
        try:
            self._client.json("POST", "/v1/sessions/" + quote(sandbox_id, safe="") + "/release", timeout=FILE_CALL_TIMEOUT_SECONDS)
        except GuestflowError as err:
            if err.status != 404 and err.code != "not_found":  # already gone: released enough
                raise

    def reset(self) -> None:
        """Releases every session this instance holds active."""
        with self._lock:
            ids = sorted(self._active)
        for sandbox_id in ids:
            self.release(sandbox_id)

    def shutdown(self) -> None:
        """Releases what this instance holds (DeerFlow calls it when the app stops): the
        server keeps each thread's guest with its files for the next acquire."""
        self.reset()

    def delete(self, sandbox_id: str) -> None:
        """Deletes the session's guest and its files (not part of DeerFlow's contract)."""
        with self._lock:
            self._active.discard(sandbox_id)
            self._objects.pop(sandbox_id, None)
            for key in [k for k, v in self._ids.items() if v == sandbox_id]:
                del self._ids[key]
            self._lock.notify_all()
        try:
            self._client.json("DELETE", "/v1/sessions/" + quote(sandbox_id, safe=""), timeout=FILE_CALL_TIMEOUT_SECONDS)
        except GuestflowError as err:
            if err.status != 404 and err.code != "not_found":
                raise


def _thread_dir(thread_id: str | None, user_id: str | None) -> str | None:
    """DeerFlow's host directory of the thread's ``/mnt/user-data`` (its
    ``Paths.sandbox_user_data_dir``, created with its ``ensure_thread_dirs`` as its own
    providers do), for the server to copy uploads in on acquire and outputs back on
    release; ``None`` without DeerFlow or a thread."""
    if thread_id is None:
        return None
    try:
        paths_module = importlib.import_module("deerflow.config.paths")
    except ImportError:
        return None
    paths = paths_module.get_paths()
    paths.ensure_thread_dirs(thread_id, user_id=user_id)
    return str(paths.sandbox_user_data_dir(thread_id, user_id=user_id))


def _deerflow_section() -> Any:
    """DeerFlow's ``sandbox:`` section, looked up when the provider is built (so a test's
    patched ``deerflow.config.get_app_config`` is seen); ``None`` without DeerFlow."""
    try:
        config_module = importlib.import_module("deerflow.config")
    except ImportError:
        return None
    return getattr(config_module.get_app_config(), "sandbox", None)
