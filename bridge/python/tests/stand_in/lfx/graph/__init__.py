"""Stand-in for ``lfx.graph``: only ``Graph.dump()`` crosses the executor seam.

The real ``Graph`` (src/lfx/src/lfx/graph/graph/base.py) is built from components;
this one is built from a ``Graph.dump()`` payload and gives it back from ``dump()`` with
the real method's signature and return shape.
"""

from __future__ import annotations

import copy
from typing import Any


class Graph:
    def __init__(self, payload: dict[str, Any], *, flow_id: str | None = None) -> None:
        data = payload.get("data", payload)
        self._nodes = copy.deepcopy(data["nodes"])
        self._edges = copy.deepcopy(data["edges"])
        self.flow_id = flow_id

    def dump(
        self, name: str | None = None, description: str | None = None, endpoint_name: str | None = None
    ) -> dict[str, Any]:
        return {
            "data": {"nodes": copy.deepcopy(self._nodes), "edges": copy.deepcopy(self._edges)},
            "is_component": False,
            "name": name,
            "description": description,
            "endpoint_name": endpoint_name,
        }


__all__ = ["Graph"]
