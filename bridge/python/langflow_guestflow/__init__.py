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
__all__ = ["__version__", "create_backend"]


def create_backend() -> GuestflowSandboxBackend:
    """Factory for lfx's sandbox backend registry (entry point ``guestflow``).

    Called lazily, the first time Langflow resolves the backend. Reads the server's
    capabilities once; an unreachable or misconfigured server raises
    ``SandboxUnavailableError`` (the registry keeps nothing, so the next use retries).
    """
    from langflow_guestflow.backend import create_backend as _create

    return _create()
