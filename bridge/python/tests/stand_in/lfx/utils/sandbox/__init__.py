"""Mirrors the public names of src/lfx/src/lfx/utils/sandbox/__init__.py that a backend uses."""

from __future__ import annotations

from lfx.utils.sandbox.base import (
    Capabilities,
    SandboxBackend,
    SandboxExecutionError,
    SandboxResult,
    SandboxUnavailableError,
)

__all__ = ["Capabilities", "SandboxBackend", "SandboxExecutionError", "SandboxResult", "SandboxUnavailableError"]
