"""Mirrors the seam part of src/lfx/src/lfx/execution/__init__.py (the service helpers are omitted)."""

from __future__ import annotations

from lfx.execution.executor import Executor
from lfx.execution.types import RunComplete, StepResult, Unit

__all__ = ["Executor", "RunComplete", "StepResult", "Unit"]
