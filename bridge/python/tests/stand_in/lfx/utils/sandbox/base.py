"""Backend-independent primitives shared by every sandbox backend.

Mirrors src/lfx/src/lfx/utils/sandbox/base.py (langflow-ai/langflow, the merged protocol:
``run(code, *, env=None)``, no SessionKey / SandboxFile): the result and error types, the
``Capabilities`` declaration and the ``SandboxBackend`` protocol. Code normalization and
settings helpers are omitted (the dispatcher owns them, not a backend).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class SandboxExecutionError(RuntimeError):
    """Raised when a sandboxed execution fails for infrastructure reasons."""


class SandboxUnavailableError(SandboxExecutionError):
    """Raised when a sandbox backend is configured but cannot be used (fail closed)."""


_EXIT_CODE_TIMEOUT = -1
_EXIT_CODE_KILLED = 137


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed execution."""

    stdout: str
    stderr: str
    exit_code: int
    execution_time_ms: int | None = None

    @property
    def success(self) -> bool:
        """Return True when the execution exited with code 0."""
        return self.exit_code == 0

    def error_message(self) -> str:
        """A user-facing message for a failed execution (non-zero exit code)."""
        if self.exit_code == _EXIT_CODE_TIMEOUT:
            return "Sandboxed execution timed out (see LANGFLOW_SANDBOX_TIMEOUT_SECONDS)."
        if self.exit_code == _EXIT_CODE_KILLED:
            return (
                "Sandboxed execution was killed (exit code 137), typically because it "
                "exceeded the VM memory limit (see LANGFLOW_SANDBOX_MEMORY_MB)."
            )
        return self.stderr.strip() or f"Sandboxed execution failed with exit code {self.exit_code}"


@dataclass(frozen=True)
class Capabilities:
    """What a backend claims it can enforce. Every default grants nothing."""

    isolation: str = "none"
    supports_deny_all_egress: bool = False
    supports_domain_allowlist: bool = False
    max_timeout_seconds: int | None = None


@runtime_checkable
class SandboxBackend(Protocol):
    """One way to run user code under isolation."""

    name: str

    def capabilities(self) -> Capabilities:
        """Declare what this backend enforces. Must not perform I/O."""
        ...

    def run(self, code: str, *, env: dict[str, str] | None = None) -> SandboxResult:
        """Run ``code`` to completion and return its outcome."""
        ...

    def shutdown(self) -> None:
        """Release process-wide resources. Must be safe to call repeatedly."""
        ...

    def reset_after_fork(self) -> None:
        """Rebuild synchronization state in a freshly forked child."""
        ...
