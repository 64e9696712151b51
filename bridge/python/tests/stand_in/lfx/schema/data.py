"""Stand-in for ``lfx.schema.data.Data`` (src/lfx/src/lfx/schema/data.py): a ``data`` dict."""

from __future__ import annotations

from typing import Any


class Data:
    def __init__(self, data: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.data = dict(data or {}) | kwargs
