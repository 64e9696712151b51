"""One real ``guestflow serve`` per test module, on 127.0.0.1 with a random token.

``GUESTFLOW_BIN`` names the binary (scripts/test sets it). When it is not set, the
repository's ``build/apps/guestflow`` is tried, and the server tests are skipped if that
binary has no ``serve`` command yet; when it IS set, any failure to start is an error.
"""

from __future__ import annotations

import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
START_DEADLINE_SECONDS = 60.0
STOP_DEADLINE_SECONDS = 30.0
_LISTENING = re.compile(r"^listening on (http://127\.0\.0\.1:(\d+))\s*$")
_PENDING_DELETE = re.compile(r"pending_?delet", re.IGNORECASE)

# Settings that would point the server somewhere else or change its defaults.
_SCRUBBED_PREFIXES = ("GUESTFLOW_", "CREATEOS_", "LANGFLOW_SANDBOX_", "LANGFLOW_EXECUTOR_")


def guestflow_bin() -> tuple[str, bool]:
    """(path, explicitly configured)."""
    explicit = os.environ.get("GUESTFLOW_BIN", "").strip()
    if explicit:
        return explicit, True
    return str(REPO / "build" / "apps" / "guestflow"), False


class Server:
    STATE_PREFIX = "gf-python-"

    def __init__(self, *, extra_env: dict[str, str] | None = None) -> None:
        self.bin, self.explicit = guestflow_bin()
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.state_dir: str | None = None
        self.url = ""
        self.token = secrets.token_hex(16)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
        env["GUESTFLOW_STATE_DIR"] = self.state_dir or ""
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        if not self.explicit:
            ok = os.access(self.bin, os.X_OK)
            if ok:
                probe = subprocess.run([self.bin, "serve", "--help"], capture_output=True, timeout=30, check=False)
                ok = probe.returncode == 0
            if not ok:
                raise unittest.SkipTest(f"no `guestflow serve` at {self.bin} (set GUESTFLOW_BIN)")
        self.state_dir = tempfile.mkdtemp(prefix=self.STATE_PREFIX)
        stderr = open(os.path.join(self.state_dir, "serve.stderr"), "wb")  # noqa: SIM115
        args = self.args()
        self.proc = subprocess.Popen([self.bin, *args], stdout=subprocess.PIPE, stderr=stderr, env=self.env())
        stderr.close()
        line = self._first_line()
        match = _LISTENING.match(line)
        if not match:
            self._kill()
            msg = f"guestflow {args[0]} printed {line!r} instead of 'listening on http://127.0.0.1:PORT'{self._stderr_tail()}"
            raise RuntimeError(msg)
        self.url = match.group(1)

    def args(self) -> list[str]:
        """The command line after the binary; it prints 'listening on URL' first."""
        return ["serve", "--listen", "127.0.0.1:0", "--token", self.token]

    def auth_header(self) -> tuple[str, str]:
        """The header that authenticates a request to this server."""
        return "Authorization", f"Bearer {self.token}"

    def _first_line(self) -> str:
        """The first stdout line, polled against a deadline (never a sleep)."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill()
                    msg = f"guestflow serve did not print its address within {START_DEADLINE_SECONDS} s{self._stderr_tail()}"
                    raise RuntimeError(msg)
                if sel.select(left):
                    chunk = os.read(self.proc.stdout.fileno(), 4096)
                    if not chunk:
                        code = self.proc.wait()
                        msg = f"guestflow serve exited ({code}) before listening{self._stderr_tail()}"
                        raise RuntimeError(msg)
                    buf += chunk
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace")

    def _stderr_tail(self) -> str:
        if not self.state_dir:
            return ""
        try:
            text = Path(self.state_dir, "serve.stderr").read_text(errors="replace")
        except OSError:
            return ""
        return f"\n--- serve stderr (tail) ---\n{text[-3000:]}" if text else ""

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def get(self, path: str, *, auth: bool = True) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path)
        if auth:
            req.add_header(*self.auth_header())
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def metrics(self) -> dict[str, float]:
        """Unlabelled samples of GET /metrics by name (labelled ones are summed per name)."""
        status, body = self.get("/metrics")
        if status != 200:
            msg = f"GET /metrics answered {status}"
            raise AssertionError(msg)
        out: dict[str, float] = {}
        for line in body.decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name = line.split("{", 1)[0].split(" ", 1)[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def assert_no_guest_pending(self, deadline_seconds: float = 20.0) -> None:
        """Polls until no ephemeral guest is pending delete and every created one was deleted.

        Deletes finish asynchronously, hence the poll (of a gauge, not for readiness).
        """
        deadline = time.monotonic() + deadline_seconds
        while True:
            m = self.metrics()
            pending = [v for k, v in m.items() if _PENDING_DELETE.search(k)]
            if not pending:
                msg = f"GET /metrics has no pending-delete gauge: {sorted(m)}"
                raise AssertionError(msg)
            created = m.get("guestflow_guests_created_total")
            deleted = m.get("guestflow_guests_deleted_total")
            if sum(pending) == 0 and created == deleted:
                return
            if time.monotonic() > deadline:
                msg = f"guests left after {deadline_seconds} s: pending delete {sum(pending)}, created {created}, deleted {deleted}"
                raise AssertionError(msg)
            time.sleep(0.1)

    def stop(self, *, reap_reusable: bool = False) -> None:
        """SIGTERM, wait, check exit 0; optionally reap reusable guests; remove the state."""
        try:
            if self.proc is None:
                return
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    code = self.proc.wait(STOP_DEADLINE_SECONDS)
                except subprocess.TimeoutExpired:
                    self._kill()
                    msg = f"guestflow serve ignored SIGTERM for {STOP_DEADLINE_SECONDS} s{self._stderr_tail()}"
                    raise AssertionError(msg) from None
            else:
                code = self.proc.returncode
            if code != 0:
                msg = f"guestflow serve exited {code} after SIGTERM{self._stderr_tail()}"
                raise AssertionError(msg)
            if reap_reusable:
                reap = subprocess.run(
                    [self.bin, "reap", "--reusable", "--idle-longer-than", "0"],
                    capture_output=True,
                    env=self.env(),
                    timeout=120,
                    check=False,
                )
                if reap.returncode != 0:
                    msg = f"guestflow reap --reusable failed ({reap.returncode}): {reap.stderr.decode(errors='replace')}"
                    raise AssertionError(msg)
        finally:
            if self.proc is not None and self.proc.stdout is not None:
                self.proc.stdout.close()
            if self.state_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)


class ModuleServer:
    """The one server a test module shares; its setUpModule/tearDownModule are start/stop.
    Stopping checks that no guest is still owed a delete before it stops the server."""

    def __init__(self, *, extra_env: dict[str, str] | None = None, reap_reusable: bool = False) -> None:
        self._extra_env = extra_env
        self._reap_reusable = reap_reusable
        self.server: Server | None = None

    def start(self) -> None:
        server = Server(extra_env=self._extra_env)
        server.start()
        self.server = server

    def stop(self) -> None:
        if self.server is None:
            return
        try:
            self.server.assert_no_guest_pending()
        finally:
            # Reused guests outlive runs by design; reap them like an operator would.
            self.server.stop(reap_reusable=self._reap_reusable)
