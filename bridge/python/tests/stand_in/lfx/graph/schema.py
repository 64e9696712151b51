"""Mirrors ``ResultData`` / ``RunOutputs`` of src/lfx/src/lfx/graph/schema.py.

The real ones are pydantic models with these fields and defaults; dataclasses here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ResultData:
    results: Any | None = field(default_factory=dict)
    artifacts: Any | None = field(default_factory=dict)
    outputs: dict | None = field(default_factory=dict)
    logs: dict | None = field(default_factory=dict)
    messages: list | None = field(default_factory=list)
    timedelta: float | None = None
    duration: str | None = None
    component_display_name: str | None = None
    component_id: str | None = None
    used_frozen_result: bool | None = False


@dataclass
class RunOutputs:
    inputs: dict = field(default_factory=dict)
    outputs: list[ResultData | None] = field(default_factory=list)
