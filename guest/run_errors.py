"""guestflow guest runner: the errors every part of the runner raises (see README.md)."""

from __future__ import annotations


class SpecError(Exception):
    """spec.json is unusable; the message names the offending field (code bad_request)."""


class RunnerFatal(Exception):
    """The run cannot proceed: one `fatal` frame.

    `code` is one of guestflow's error names (`bad_request`, `unavailable`, ...) or None
    for a fault of the runner itself (the host then reports `guest_failed`); `extra`
    fields go into the frame as they are (e.g. `unsupported`).
    """

    def __init__(self, message: str, code: str | None = None, tb: str = "", **extra) -> None:
        super().__init__(message)
        self.code = code
        self.tb = tb
        self.extra = extra


class VertexFailure(Exception):
    """A vertex failed with a message meant for the caller (no runner traceback)."""


# What makes a flow run that the core executor cannot: an image with lfx (the host's commands).
LFX_IMAGE_HINT = (
    "use an image with lfx: `guestflow image add NAME --python-env PREFIX` (PREFIX = the "
    "Python environment Langflow is installed in, e.g. its venv), then "
    "`guestflow run --image NAME --executor lfx`; on CreateOS, a template with lfx "
    "(CREATEOS_EXECUTOR_ROOTFS)")
