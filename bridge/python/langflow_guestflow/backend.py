"""``lfx.sandbox_backends`` entry point: the Python Interpreter's code in a guestflow guest.

Enabled in Langflow with::

    LANGFLOW_SANDBOX_BACKEND_PLUGINS=guestflow   # trust the plugin (nothing loads otherwise)
    LANGFLOW_SANDBOX_BACKEND=guestflow

Implements lfx's ``SandboxBackend`` protocol (``lfx/utils/sandbox/base.py``): ``name``,
``capabilities()``, ``run(code, *, env=None) -> SandboxResult``, ``shutdown()``,
``reset_after_fork()``. Each ``run`` is one ``POST /v1/sandbox/run``: a fresh guest, deleted
afterwards, with this worker's ``LANGFLOW_SANDBOX_*`` policy in the body.

Capabilities are the server's (``GET /v1/capabilities``), fetched once when the registry
builds the backend (lfx's registry builds it lazily, at first use) and then served from
memory, because the protocol forbids I/O in ``capabilities()``. They are honest: local
guests report ``isolation="namespaces"``, which Langflow's policy gate (it accepts only
``"hardware-virtualized"``) refuses -- only a server fronting CreateOS passes it.

Failure mapping, failing closed throughout:

* configured but unusable -- server unreachable, wrong token, the server's policy gate
  refusing (``policy_refused``), provider ``unavailable``, a shut-down backend --
  raises ``SandboxUnavailableError``;
* an infrastructure failure mid-run (guest failed, transient, capacity, bad answer) raises
  ``SandboxExecutionError``;
* the user's code failing is not an exception: it is ``SandboxResult.exit_code`` (``-1``
  after the timeout, ``137`` after a SIGKILL -- the memory limit, or the program killing
  itself --, else the program's status);
* output the server cut at its cap (the answer's ``truncated``) is never passed off as the
  program's whole output: it raises ``SandboxExecutionError``, unless
  ``GUESTFLOW_ALLOW_TRUNCATED=true``, which returns the cut result with a note on stderr.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

from lfx.utils.sandbox.base import (
    Capabilities,
    SandboxExecutionError,
    SandboxResult,
    SandboxUnavailableError,
)

from langflow_guestflow import _http, _settings
from langflow_guestflow._component_client import truncated_streams

BACKEND_NAME = "guestflow"
CAPABILITIES_TIMEOUT_SECONDS = 15.0
# Added to the guest's wall clock before the HTTP read is abandoned: create + delete of a
# guest and the transfer. The guest's own timeout(1) is the authoritative limit.
RUN_GRACE_SECONDS = 60.0
LINK_LOCAL = "169.254.0.0/16"

# Codes meaning "this backend cannot be used as configured" (fail closed, never retried
# as if the code were at fault).
_UNAVAILABLE_CODES = {"policy_refused", "unavailable", "not_found"}


def _unavailable(exc: _http.GuestflowError) -> SandboxExecutionError:
    if isinstance(exc, _http.GuestflowConnectionError) or exc.code in _UNAVAILABLE_CODES:
        return SandboxUnavailableError(f"guestflow sandbox backend unusable: {exc.message} ({exc.code})")
    return SandboxExecutionError(f"guestflow sandbox run failed: {exc.message} ({exc.code})")


def capabilities_from_server(doc: Any) -> Capabilities:
    """Map ``GET /v1/capabilities`` onto whatever fields the installed lfx declares.

    Only fields lfx's ``Capabilities`` knows are passed, so an older or newer lfx keeps
    working; a missing or malformed server field keeps lfx's grants-nothing default.
    """
    if not isinstance(doc, dict):
        msg = "GET /v1/capabilities did not answer a JSON object"
        raise SandboxUnavailableError(msg)
    known = {f.name for f in dataclasses.fields(Capabilities)}
    kwargs: dict[str, Any] = {}
    if isinstance(doc.get("isolation"), str):
        kwargs["isolation"] = doc["isolation"]
    for key in ("supports_deny_all_egress", "supports_domain_allowlist"):
        if isinstance(doc.get(key), bool):
            kwargs[key] = doc[key]
    cap = doc.get("max_timeout_seconds")
    if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
        kwargs["max_timeout_seconds"] = cap
    # Newer lfx has an honesty field for destinations egress-off cannot block.
    if doc.get("link_local_blocked") is False:
        kwargs["egress_exceptions"] = (LINK_LOCAL,)
    # The backend protocol cannot reuse a guest or return files (the component does).
    kwargs["supports_sessions"] = False
    kwargs["supports_artifacts"] = False
    return Capabilities(**{k: v for k, v in kwargs.items() if k in known})


class GuestflowSandboxBackend:
    """One fresh guestflow guest per ``run``; a process-wide singleton in lfx's registry."""

    name = BACKEND_NAME

    def __init__(self, capabilities: Capabilities, *, url: str | None = None, token: str | None = None) -> None:
        self._capabilities = capabilities
        self._url = url
        self._token = token
        self._lock = threading.Lock()
        self._shut_down = False

    @classmethod
    def connect(cls, *, url: str | None = None, token: str | None = None) -> GuestflowSandboxBackend:
        """Build the backend, reading the server's capabilities once (fail closed)."""
        ep = cls._endpoint(url, token)
        try:
            doc = _http.request_json(ep, "GET", "/v1/capabilities", timeout=CAPABILITIES_TIMEOUT_SECONDS)
        except _http.GuestflowError as exc:
            msg = f"guestflow sandbox backend: cannot read capabilities from {ep.base}: {exc.message} ({exc.code})"
            raise SandboxUnavailableError(msg) from exc
        return cls(capabilities_from_server(doc), url=url, token=token)

    @staticmethod
    def _endpoint(url: str | None, token: str | None) -> _settings.Endpoint:
        try:
            return _settings.endpoint(url, token)
        except _settings.SettingsError as exc:
            raise SandboxUnavailableError(str(exc)) from exc

    def capabilities(self) -> Capabilities:
        """The server's capabilities as read at construction. No I/O."""
        return self._capabilities

    def run(self, code: str, *, env: dict[str, str] | None = None, session: Any = None) -> SandboxResult:
        """Run ``code`` with python3 in a fresh guest and return its outcome.

        ``session`` exists only so an lfx whose dispatcher still passes it (the pre-merge
        protocol) can call this backend; ``supports_sessions`` is False, so it is always
        None there and every run is cold.
        """
        del session
        with self._lock:
            if self._shut_down:
                msg = "guestflow sandbox backend has been shut down"
                raise SandboxUnavailableError(msg)
        ep = self._endpoint(self._url, self._token)
        try:
            policy = _settings.sandbox_policy()
        except _settings.SettingsError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            msg = "env must map str to str"
            raise SandboxExecutionError(msg)
        body: dict[str, Any] = {
            "code": code,
            "timeout_seconds": policy.timeout_seconds,
            "memory_mb": policy.memory_mb,
            "allow_network": policy.allow_network,
            "allowed_domains": list(policy.allowed_domains),
        }
        # GUESTFLOW_ISOLATION: the guest kind ("namespaces" | "gvisor"); a server that cannot
        # give it refuses the run (policy_refused), never runs it on a weaker guest.
        isolation = os.environ.get("GUESTFLOW_ISOLATION", "").strip()
        if isolation:
            body["isolation"] = isolation
        if env:
            body["env"] = dict(env)
        try:
            doc = _http.request_json(
                ep, "POST", "/v1/sandbox/run", body, timeout=policy.timeout_seconds + RUN_GRACE_SECONDS
            )
        except _http.GuestflowError as exc:
            raise _unavailable(exc) from exc
        return _result_from_answer(doc)

    def shutdown(self) -> None:
        """Nothing process-wide is held (guests are deleted by the server); idempotent."""
        with self._lock:
            self._shut_down = True

    def reset_after_fork(self) -> None:
        """Replace the lock: one held by another thread at fork time stays locked forever."""
        self._lock = threading.Lock()


def _result_from_answer(doc: Any) -> SandboxResult:
    if not isinstance(doc, dict):
        msg = "POST /v1/sandbox/run did not answer a JSON object"
        raise SandboxExecutionError(msg)
    try:
        exit_code = doc["exit_code"]
        if not isinstance(exit_code, int) or isinstance(exit_code, bool):
            raise TypeError
        elapsed = doc.get("execution_time_ms")
        truncated = truncated_streams(doc)
        stderr = str(doc.get("stderr") or "")
    except (KeyError, TypeError, ValueError, _http.GuestflowError) as exc:
        msg = f"POST /v1/sandbox/run answered an unexpected shape: {str(doc)[:200]}"
        raise SandboxExecutionError(msg) from exc
    if truncated:
        note = f"guestflow: {' and '.join(truncated)} cut at the server's output cap (truncated)"
        if os.environ.get("GUESTFLOW_ALLOW_TRUNCATED", "").strip().lower() != "true":
            msg = f"{note}; the program's whole output did not come back (exit code {exit_code}). Set GUESTFLOW_ALLOW_TRUNCATED=true to accept a cut output"
            raise SandboxExecutionError(msg)
        stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + note + "\n"
    return SandboxResult(
        stdout=str(doc.get("stdout") or ""),
        stderr=stderr,
        exit_code=exit_code,
        execution_time_ms=int(elapsed) if isinstance(elapsed, (int, float)) else None,
    )


def create_backend() -> GuestflowSandboxBackend:
    """The registry's factory (``langflow_guestflow:create_backend``)."""
    return GuestflowSandboxBackend.connect()
