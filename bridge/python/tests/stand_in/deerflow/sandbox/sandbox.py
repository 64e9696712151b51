"""deerflow/sandbox/sandbox.py: the ``Sandbox`` ABC with DeerFlow's exact signatures."""

import re
from abc import ABC, abstractmethod

from deerflow.sandbox.search import GrepMatch

_ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _validate_extra_env(extra_env: dict[str, str] | None) -> None:
    if not extra_env:
        return
    for key in extra_env:
        if not isinstance(key, str) or not _ENV_NAME_PATTERN.fullmatch(key):
            raise ValueError(f"extra_env key {key!r} is not a valid POSIX environment variable name (must match ^[A-Za-z_][A-Za-z0-9_]*$)")


class Sandbox(ABC):
    _id: str

    def __init__(self, id: str):
        self._id = id

    @property
    def id(self) -> str:
        return self._id

    @abstractmethod
    def execute_command(self, command: str, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
        pass

    @abstractmethod
    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        pass

    @abstractmethod
    def download_file(self, path: str) -> bytes:
        pass

    @abstractmethod
    def list_dir(self, path: str, max_depth=2) -> list[str]:
        pass

    @abstractmethod
    def write_file(self, path: str, content: str, append: bool = False) -> None:
        pass

    @abstractmethod
    def glob(self, path: str, pattern: str, *, include_dirs: bool = False, max_results: int = 200) -> tuple[list[str], bool]:
        pass

    @abstractmethod
    def grep(
        self,
        path: str,
        pattern: str,
        *,
        glob: str | None = None,
        literal: bool = False,
        case_sensitive: bool = False,
        max_results: int = 100,
    ) -> tuple[list[GrepMatch], bool]:
        pass

    @abstractmethod
    def update_file(self, path: str, content: bytes) -> None:
        pass
