"""guestflow guest runner: the way to the lfx executor (guest/README.md, `executor`).

`install_lfx`'s per-run pip fallback, loading `lfx_path.py` (which imports lfx), and the
executor it gives, or the reason lfx cannot run: a `fatal` for `executor: lfx` (never a
fallback), the core executor for `auto`. Apart from runner.py because a run that cannot
use lfx (`executor: core`, or `auto` where lfx is not installed) never needs it.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time

from frame_protocol import Emitter, error_outputs
from run_errors import LFX_IMAGE_HINT, RunnerFatal

PIP_TAIL = 4096  # bytes of pip output quoted in a failed-install message


# Where install_lfx installs: the workspace, on the guest's disk (the host uploaded the run's
# bundle below it), not beside the runner: the run directory is in the guest's memory, which
# lfx and its dependencies would take a large part of.
SITE_TARGET = "/workspace/site-packages"


def install_lfx(pip_args: list, emitter: Emitter) -> None:
    """Per-run fallback for an image without lfx: pip install lfx (+ extras) into SITE_TARGET."""
    target = SITE_TARGET
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
           "--target", target, "lfx", *pip_args]
    shown = "python3 -m pip install lfx" + "".join(" " + a for a in pip_args)
    emitter.note(install="lfx", command=shown, target=target)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except OSError as exc:
        raise RunnerFatal(f"install_lfx: could not start `{shown}`: {exc}",
                          code="unavailable") from None
    tail = b""
    assert proc.stdout is not None
    while True:
        chunk = proc.stdout.read(1 << 16)
        if not chunk:
            break
        tail = (tail + chunk)[-PIP_TAIL:]
    code = proc.wait()
    output = tail.decode("utf-8", "replace").strip()
    if code != 0:
        raise RunnerFatal(
            f"install_lfx: `{shown}` failed (exit {code}); the guest could not install lfx - "
            f"instead, {LFX_IMAGE_HINT}. pip said: {output[-1500:]}", code="unavailable")
    emitter.note(installed="lfx", seconds=round(time.monotonic() - started, 2))
    sys.path.insert(0, target)
    importlib.invalidate_caches()


class _NoLfxPath(Exception):
    """lfx_path.py is not beside runner.py: the host did not upload it."""


def _load_lfx_path():
    """The lfx executor module, or raises with the reason lfx cannot be used."""
    here = os.path.dirname(os.path.abspath(__file__))
    if not os.path.isfile(os.path.join(here, "lfx_path.py")):
        raise _NoLfxPath(f"lfx_path.py is missing beside {os.path.join(here, 'runner.py')} "
                         "(the host uploads both)")
    if here not in sys.path:
        sys.path.insert(0, here)
    import lfx_path  # noqa: PLC0415 - lazy on purpose: only when lfx is wanted

    lfx_path.load()  # imports lfx; raises what lfx raises when it is not usable
    return lfx_path


def lfx_unavailable(reason: str) -> RunnerFatal:
    return RunnerFatal(
        f"executor lfx: lfx is not usable in this guest ({reason}). lfx runs the flow only on "
        f"an image that has it: {LFX_IMAGE_HINT}. Or use executor auto (or core) to run the "
        "flow with guestflow's core executor if it has only core component types.",
        code="unavailable")


def choose_lfx(spec: dict, emitter: Emitter, core):
    """(executor, reason) for `lfx`, `auto` where lfx is installed, or `install_lfx`;
    `core(spec, emitter, reason)` makes the core executor `auto` falls back to."""
    mode = spec["executor"]
    if spec["install_lfx"]:
        install_lfx(spec["pip"], emitter)
        mode = "lfx"
        chosen = "install_lfx installed lfx for this run"
    else:
        chosen = "executor auto: lfx is installed" if mode == "auto" else f"executor {mode} was requested"
    try:
        module = _load_lfx_path()
    except _NoLfxPath as exc:
        if mode == "lfx":
            raise RunnerFatal(f"runner: {exc}") from None  # a host fault: no code
        reason = f"executor auto: lfx is installed but {exc}"
        return core(spec, emitter, reason), reason
    except Exception as exc:  # noqa: BLE001 - any import failure means "no lfx path"
        why = f"{type(exc).__name__}: {exc}"
        if mode == "lfx":
            raise lfx_unavailable(why) from None
        reason = f"executor auto: lfx is not usable ({why})"
        return core(spec, emitter, reason), reason
    return module.LfxExecutor(spec, emitter, error_outputs, RunnerFatal), chosen
