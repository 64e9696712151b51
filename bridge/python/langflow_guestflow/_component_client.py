"""The component surface's request and answer, free of lfx so it can be tested alone.

``POST /v1/components/run`` body: ``{flow_id, component_id, reuse, allow_network,
timeout_seconds, memory_mb?, program | cmd + args, return_files}``; answer: ``{stdout,
stderr, exit_code, execution_time_ms, outcome, reused, truncated?, files:[{path, size,
content_base64}], dropped:[{path, reason}], files_error?}``. ``outcome`` is ``ok``,
``timeout``, ``oom`` (the guest's memory cgroup counted an OOM kill) or ``killed`` (any
other SIGKILL); ``truncated`` lists the streams cut at the server's output cap.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from langflow_guestflow import _http, _settings

REUSE_MODES = ("none", "flow")
GRACE_SECONDS = 60.0  # guest create/resume, archive transfer, delete


@dataclass(frozen=True)
class ComponentRequest:
    flow_id: str
    component_id: str
    program: str | None = None
    cmd: str | None = None
    args: tuple[str, ...] = ()
    reuse: str = "none"
    allow_network: bool = False
    timeout_seconds: int = 60
    memory_mb: int | None = None
    return_files: bool = False

    def body(self) -> dict[str, Any]:
        if (self.program is None) == (self.cmd is None):
            msg = "exactly one of a Python program and a command is needed"
            raise ValueError(msg)
        if self.reuse not in REUSE_MODES:
            msg = f"reuse must be one of {REUSE_MODES}, got {self.reuse!r}"
            raise ValueError(msg)
        out: dict[str, Any] = {
            "flow_id": self.flow_id,
            "component_id": self.component_id,
            "reuse": self.reuse,
            "allow_network": self.allow_network,
            "timeout_seconds": self.timeout_seconds,
            "return_files": self.return_files,
        }
        if self.memory_mb:
            out["memory_mb"] = self.memory_mb
        if self.program is not None:
            out["program"] = self.program
        else:
            out["cmd"] = self.cmd
            out["args"] = list(self.args)
        return out


@dataclass(frozen=True)
class ReturnedFile:
    path: str
    content: bytes

    @property
    def size(self) -> int:
        return len(self.content)

    def row(self) -> dict[str, Any]:
        """One row of the Files output: text when it decodes as UTF-8, else base64."""
        row: dict[str, Any] = {"path": self.path, "size": self.size}
        try:
            row["text"] = self.content.decode("utf-8")
        except UnicodeDecodeError:
            row["content_base64"] = base64.b64encode(self.content).decode("ascii")
        return row


@dataclass(frozen=True)
class ComponentAnswer:
    stdout: str
    stderr: str
    exit_code: int
    execution_time_ms: int | None
    outcome: str
    reused: bool
    files: tuple[ReturnedFile, ...] = ()
    dropped: tuple[dict[str, Any], ...] = ()
    files_error: dict[str, Any] | None = field(default=None)
    guest: str | None = None
    truncated: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        """The Results output's data."""
        out: dict[str, Any] = {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "execution_time_ms": self.execution_time_ms,
            "outcome": self.outcome,
            # A cut output is not a whole one, whatever the exit code says.
            "success": self.outcome == "ok" and self.exit_code == 0 and not self.truncated,
            "reused": self.reused,
            "files": [f.path for f in self.files],
        }
        if self.guest:
            out["guest"] = self.guest
        if self.dropped:
            out["dropped"] = list(self.dropped)
        if self.files_error:
            out["files_error"] = self.files_error
        if self.truncated:
            out["truncated"] = list(self.truncated)
        return out


def parse_answer(doc: Any) -> ComponentAnswer:
    if not isinstance(doc, dict) or not isinstance(doc.get("exit_code"), int):
        msg = f"POST /v1/components/run answered an unexpected shape: {str(doc)[:200]}"
        raise _http.GuestflowConnectionError(msg)
    files = []
    for item in doc.get("files") or []:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            continue
        try:
            content = base64.b64decode(item.get("content_base64") or "", validate=True)
        except ValueError as exc:
            msg = f"returned file {item['path']!r} is not valid base64"
            raise _http.GuestflowConnectionError(msg) from exc
        files.append(ReturnedFile(item["path"], content))
    elapsed = doc.get("execution_time_ms")
    files_error = doc.get("files_error") if isinstance(doc.get("files_error"), dict) else None
    return ComponentAnswer(
        stdout=str(doc.get("stdout") or ""),
        stderr=str(doc.get("stderr") or ""),
        exit_code=doc["exit_code"],
        execution_time_ms=int(elapsed) if isinstance(elapsed, (int, float)) else None,
        outcome=str(doc.get("outcome") or ("ok" if doc["exit_code"] == 0 else "guest_failed")),
        reused=bool(doc.get("reused")),
        files=tuple(files),
        dropped=tuple(d for d in (doc.get("dropped") or []) if isinstance(d, dict)),
        files_error=files_error,
        guest=doc["guest"] if isinstance(doc.get("guest"), str) else None,
        truncated=truncated_streams(doc),
    )


def truncated_streams(doc: dict[str, Any]) -> tuple[str, ...]:
    """The answer's ``truncated`` (absent: nothing was cut); a malformed one fails closed."""
    value = doc.get("truncated")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(x in ("stdout", "stderr") for x in value):
        msg = f"the answer's truncated is malformed: {str(value)[:200]}"
        raise _http.GuestflowConnectionError(msg)
    return tuple(value)


def run_component(req: ComponentRequest, *, url: str | None = None, token: str | None = None) -> ComponentAnswer:
    """One blocking ``POST /v1/components/run``. Raises GuestflowError / SettingsError."""
    ep = _settings.endpoint(url, token)
    doc = _http.request_json(ep, "POST", "/v1/components/run", req.body(), timeout=req.timeout_seconds + GRACE_SECONDS)
    return parse_answer(doc)
