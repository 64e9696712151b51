"""Stand-in for ``lfx.schema.dataframe.DataFrame`` (a pandas DataFrame subclass there).

Built like the real one from a list of row dicts; exposes the rows.
"""

from __future__ import annotations

from typing import Any


class DataFrame:
    def __init__(self, data: list[dict[str, Any]] | None = None) -> None:
        self.rows = [dict(r) for r in (data or [])]

    def __len__(self) -> int:
        return len(self.rows)

    def to_dict(self, orient: str = "records") -> list[dict[str, Any]]:
        assert orient == "records"
        return [dict(r) for r in self.rows]
