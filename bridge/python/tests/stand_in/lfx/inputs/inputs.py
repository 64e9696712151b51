"""Stand-in for the input classes of src/lfx/src/lfx/inputs/inputs.py: keyword constructors."""

from __future__ import annotations

from typing import Any


class _Input:
    default_value: Any = None

    def __init__(self, *, name: str, display_name: str | None = None, value: Any = None, **kwargs: Any) -> None:
        self.name = name
        self.display_name = display_name
        self.value = self.default_value if value is None else value
        self.options = kwargs.pop("options", None)
        self.is_list = kwargs.pop("is_list", False)
        self.extra = kwargs
        if self.is_list and value is None:
            self.value = []


class StrInput(_Input):
    default_value = ""


class MultilineInput(StrInput):
    pass


class DropdownInput(StrInput):
    pass


class BoolInput(_Input):
    default_value = False


class IntInput(_Input):
    default_value = 0
