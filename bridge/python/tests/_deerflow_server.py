"""A DeerFlow home and the one ``guestflow serve`` of a DeerFlow test module, whose session
mount root is that home (the provider syncs a thread's directory under it)."""

from __future__ import annotations

import os
import shutil
import tempfile

from tests._server import ModuleServer


class DeerFlowHome:
    """A DeerFlow home (``DEER_FLOW_HOME``: where its threads' directories are) for a test
    module; ``start`` makes it and gives its path (the module's server's mount root)."""

    def __init__(self) -> None:
        self.path = ""
        self._before: str | None = None

    def start(self) -> str:
        self.path = os.path.realpath(tempfile.mkdtemp(prefix="gf-deerflow-home-"))
        self._before = os.environ.get("DEER_FLOW_HOME")
        os.environ["DEER_FLOW_HOME"] = self.path
        return self.path

    def stop(self) -> None:
        if self._before is None:
            os.environ.pop("DEER_FLOW_HOME", None)
        else:
            os.environ["DEER_FLOW_HOME"] = self._before
        if self.path:
            shutil.rmtree(self.path, ignore_errors=True)


class DeerFlowServer(ModuleServer):
    """The module's server with a fresh DeerFlow home as its session mount root: ``start``
    makes the home then the server, ``stop`` stops the server then removes the home."""

    def __init__(self, *, extra_env: dict[str, str] | None = None) -> None:
        self._env = dict(extra_env or {})
        super().__init__(extra_env=self._env)
        self.home = DeerFlowHome()

    def start(self) -> None:
        self._env["GUESTFLOW_SESSION_MOUNT_ROOTS"] = self.home.start()
        try:
            super().start()
        except BaseException:
            self.home.stop()
            raise

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.home.stop()
