"""Stand-in for ``lfx.template.field.base.Output``: name, display name, method."""

from __future__ import annotations

from typing import Any


class Output:
    def __init__(self, *, name: str, method: str, display_name: str | None = None, **kwargs: Any) -> None:
        self.name = name
        self.method = method
        self.display_name = display_name
        self.extra = kwargs
