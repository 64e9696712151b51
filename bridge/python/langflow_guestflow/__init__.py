"""langflow-guestflow: run Langflow work in disposable guests on a ``guestflow serve`` runtime.

Three surfaces, each opted into separately (see README.md):

* ``lfx.sandbox_backends`` -> :func:`create_backend` (the Python Interpreter's code);
* ``langflow.extensions`` -> this package, whose ``extension.json`` declares the
  "Guestflow Sandbox" component bundle;
* ``lfx.executors`` -> :class:`langflow_guestflow.executor.GuestflowExecutor` (whole flows).

This module imports nothing but the standard library: Langflow's extension loader imports
it to find ``extension.json``, and the sandbox registry imports it only when the operator
listed ``guestflow`` in ``LANGFLOW_SANDBOX_BACKEND_PLUGINS``. lfx is imported only by the
surface actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langflow_guestflow.backend import GuestflowSandboxBackend

__version__ = "0.1.0"
__all__ = ["__version__", "create_backend", "expose_port"]


def create_backend() -> GuestflowSandboxBackend:
    """Factory for lfx's sandbox backend registry (entry point ``guestflow``).

    Called lazily, the first time Langflow resolves the backend. Reads the server's
    capabilities once; an unreachable or misconfigured server raises
    ``SandboxUnavailableError`` (the registry keeps nothing, so the next use retries).
    """
    from langflow_guestflow.backend import create_backend as _create

    return _create()


def expose_port(session_id: str, port: int, *, ttl_seconds: int | None = None, url: str | None = None, token: str | None = None) -> str:
    """A URL that reaches ``port`` inside agent session ``session_id``'s guest (HTTP,
    server-sent streams, WebSockets). On a local control plane it lives until it expires
    (the server's ``GUESTFLOW_PORT_URL_TTL_SECONDS``, one hour by default, or ``ttl_seconds``
    if less) and carries its own token: whoever holds it reaches that port, nothing else,
    without the server's bearer token.

    On CreateOS it is CreateOS's own URL, public and without expiry (leave ``ttl_seconds``
    unset), and only when the server runs with ``GUESTFLOW_CREATEOS_PUBLIC_INGRESS=true``;
    otherwise ``GuestflowError`` 503 ``unavailable`` naming that setting.

    ``url``/``token`` default to ``GUESTFLOW_URL`` and ``GUESTFLOW_TOKEN``. Raises
    ``GuestflowError`` (404 for an unknown session).
    """
    from urllib.parse import quote

    from langflow_guestflow import _http, _settings

    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        msg = f"port must be an integer in 1..65535, got {port!r}"
        raise ValueError(msg)
    body = {} if ttl_seconds is None else {"ttl_seconds": int(ttl_seconds)}
    path = f"/v1/sessions/{quote(session_id, safe='')}/ports/{port}"
    doc = _http.request_json(_settings.endpoint(url, token), "POST", path, body, timeout=30.0)
    return str(doc["url"])
