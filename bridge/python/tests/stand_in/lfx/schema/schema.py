"""Mirrors ``InputValueRequest`` of src/lfx/src/lfx/schema/schema.py (a pydantic model there)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

InputType = Literal["chat", "text", "any"]


@dataclass
class InputValueRequest:
    components: list[str] | None = field(default_factory=list)
    input_value: str | None = None
    session: str | None = None
    type: InputType | None = "any"
    client_request_time: int | None = None

    def model_dump(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
