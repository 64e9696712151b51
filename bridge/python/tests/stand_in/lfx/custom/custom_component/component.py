"""Stand-in for ``lfx.custom.custom_component.component.Component``.

Only what a bundle component touches: class-level ``inputs`` / ``outputs``, input values
as attributes (defaults from the inputs, overridden by constructor keywords), ``_id``,
``graph``, ``status`` and ``log()``.
"""

from __future__ import annotations

from typing import Any


class Component:
    display_name: str = ""
    description: str = ""
    icon: str | None = None
    name: str | None = None
    inputs: list = []
    outputs: list = []

    def __init__(self, **kwargs: Any) -> None:
        self._id = kwargs.pop("_id", None)
        self.graph = kwargs.pop("graph", None)
        self.status: Any = None
        self.logs: list[str] = []
        for inp in self.inputs:
            setattr(self, inp.name, inp.value)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def log(self, message: Any, name: str | None = None) -> None:  # noqa: ARG002
        self.logs.append(str(message))
