"""deerflow/config/paths.py: the sandbox's virtual prefix and where a thread's data lives on
the host (``Paths``: ``{base_dir}/users/{user_id}/threads/{thread_id}/user-data``, the
legacy ``{base_dir}/threads/{thread_id}/…`` without a user; ``base_dir`` is
``DEER_FLOW_HOME``, as DeerFlow's ``runtime_home``)."""

import os
import re
from pathlib import Path

VIRTUAL_PATH_PREFIX = "/mnt/user-data"

_SAFE_USER_ID_RE = re.compile(r"^[A-Za-z0-9_\-]+$")
_THREAD_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _validate_thread_id(thread_id: str) -> str:
    if not isinstance(thread_id, str) or _THREAD_ID_RE.fullmatch(thread_id) is None:
        raise ValueError("Invalid thread_id: expected 1-64 ASCII letters, digits, hyphens, or underscores")
    return thread_id


def _validate_user_id(user_id: str) -> str:
    if not _SAFE_USER_ID_RE.match(user_id):
        raise ValueError(f"Invalid user_id {user_id!r}: only alphanumeric characters, hyphens, and underscores are allowed.")
    return user_id


class Paths:
    def __init__(self, base_dir: str | Path | None = None) -> None:
        self._base_dir = Path(base_dir).resolve() if base_dir is not None else None

    @property
    def base_dir(self) -> Path:
        if self._base_dir is not None:
            return self._base_dir
        home = os.getenv("DEER_FLOW_HOME")
        if not home:
            raise RuntimeError("the stand-in has no project root: set DEER_FLOW_HOME")
        return Path(home).resolve()

    def user_dir(self, user_id: str) -> Path:
        return self.base_dir / "users" / _validate_user_id(user_id)

    def thread_dir(self, thread_id: str, *, user_id: str | None = None) -> Path:
        if user_id is not None:
            return self.user_dir(user_id) / "threads" / _validate_thread_id(thread_id)
        return self.base_dir / "threads" / _validate_thread_id(thread_id)

    def sandbox_work_dir(self, thread_id: str, *, user_id: str | None = None) -> Path:
        return self.thread_dir(thread_id, user_id=user_id) / "user-data" / "workspace"

    def sandbox_uploads_dir(self, thread_id: str, *, user_id: str | None = None) -> Path:
        return self.thread_dir(thread_id, user_id=user_id) / "user-data" / "uploads"

    def sandbox_outputs_dir(self, thread_id: str, *, user_id: str | None = None) -> Path:
        return self.thread_dir(thread_id, user_id=user_id) / "user-data" / "outputs"

    def acp_workspace_dir(self, thread_id: str, *, user_id: str | None = None) -> Path:
        return self.thread_dir(thread_id, user_id=user_id) / "acp-workspace"

    def sandbox_user_data_dir(self, thread_id: str, *, user_id: str | None = None) -> Path:
        return self.thread_dir(thread_id, user_id=user_id) / "user-data"

    def ensure_thread_dirs(self, thread_id: str, *, user_id: str | None = None) -> None:
        for d in (
            self.sandbox_work_dir(thread_id, user_id=user_id),
            self.sandbox_uploads_dir(thread_id, user_id=user_id),
            self.sandbox_outputs_dir(thread_id, user_id=user_id),
            self.acp_workspace_dir(thread_id, user_id=user_id),
        ):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o777)


_paths: Paths | None = None


def get_paths() -> Paths:
    global _paths
    if _paths is None:
        _paths = Paths()
    return _paths
