"""deerflow/sandbox/search.py: the result type of ``Sandbox.grep`` (nothing else is used)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line_number: int
    line: str
