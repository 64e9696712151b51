"""Value objects for the execution layer.

Mirrors src/lfx/src/lfx/execution/types.py (langflow-ai/langflow): the three dataclasses
that are the whole vocabulary of the executor seam.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Unit:
    """A self-contained slice of work handed to an ``Executor``."""

    graph: Any
    inputs: list[dict[str, Any]] = field(default_factory=list)
    runtime_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepResult:
    """A single mid-run event from an executor (payload is executor-defined)."""

    payload: Any


@dataclass
class RunComplete:
    """Terminal item in an executor stream; the only universal contract is: a list."""

    outputs: list[Any]
