"""guestflow guest runner: the frame protocol (guest/README.md "Frames").

stdout carries frames only, one compact JSON object per line, each line <= 1 MiB. The
runner keeps a private duplicate of the real stdout for frames and points fd 1 and
`sys.stdout` at a capture, so user `print`s, C extensions and subprocesses writing to fd 1
land in the current vertex's `logs` (capped), never in frames. `Emitter` is the one writer
of frames; it replaces every secret value (variables.json, 4 bytes or more) by `********`
in whatever it writes, so a secret never leaves the guest in a frame.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import threading

FRAME_MAX = 1 << 20  # bytes per frame line, newline included
LOG_CAP = 256 << 10  # captured output kept per vertex (head and tail)
SYNC_TIMEOUT_S = 5.0
JSON_DEPTH_MAX = 48  # user values nest no deeper (the host parser allows 128 in total)
SECRET_MIN = 4  # shorter values are not masked (they would mask ordinary text); the host's rule
MASK = "********"


# -- capture of fd 1 / sys.stdout ---------------------------------------------------------


class Capture:
    """Output of one vertex (or of the gaps between vertices), bounded to about `cap` bytes.

    Keeps the first 3/4 of the cap and the last 1/4 (where errors usually are); what falls
    in between is counted, not stored.
    """

    def __init__(self, cap: int) -> None:
        self.head_cap = cap - cap // 4
        self.tail_cap = cap // 4
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._lock = threading.Lock()

    def add(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            self._total += len(data)
            room = self.head_cap - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if data:
                if len(data) >= self.tail_cap:
                    self._tail[:] = data[-self.tail_cap:]
                else:
                    self._tail += data
                    if len(self._tail) > 2 * self.tail_cap:  # amortized trim
                        del self._tail[:-self.tail_cap]

    def add_text(self, s: str) -> None:
        if s:
            self.add(s.encode("utf-8", "backslashreplace"))

    def empty(self) -> bool:
        with self._lock:
            return self._total == 0

    def text(self) -> str:
        with self._lock:
            tail = bytes(self._tail[-self.tail_cap:]) if self.tail_cap else b""
            omitted = self._total - len(self._head) - len(tail)
            if omitted <= 0:
                return (bytes(self._head) + tail).decode("utf-8", "replace")
            head = bytes(self._head).decode("utf-8", "replace")
            return (f"{head}\n[guestflow: {omitted} bytes of output omitted here; "
                    f"kept the first {len(self._head)} and the last {len(tail)}]\n"
                    + tail.decode("utf-8", "replace"))


class TextSink(io.TextIOBase):
    """`sys.stdout` while the runner lives: writes go to the current capture."""

    def __init__(self, write_bytes) -> None:
        super().__init__()
        self._write_bytes = write_bytes
        self._binary = _BinarySink(write_bytes)

    @property
    def encoding(self):  # noqa: D401 - io API
        return "utf-8"

    @property
    def errors(self):
        return "backslashreplace"

    @property
    def buffer(self):
        return self._binary

    def writable(self) -> bool:
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self._write_bytes(s.encode("utf-8", "backslashreplace"))
        return len(s)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return 1

    def isatty(self) -> bool:
        return False


class _BinarySink(io.RawIOBase):
    def __init__(self, write_bytes) -> None:
        super().__init__()
        self._write_bytes = write_bytes

    def writable(self) -> bool:
        return True

    def write(self, b):
        data = bytes(b)
        self._write_bytes(data)
        return len(data)

    def fileno(self) -> int:
        return 1


class OutputCapture:
    """Owns fd 1 and `sys.stdout`; frames go to a private duplicate of the real stdout.

    fd 1 becomes the write end of a pipe drained by a thread into the current `Capture`,
    so bytes written by C code or subprocesses are attributed too. `end()` writes a
    random marker into the pipe and waits until the drain thread has seen it, so every
    byte written to fd 1 before the vertex ended is in that vertex's capture.
    """

    def __init__(self) -> None:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - nothing useful to do with a broken stdout
            pass
        self.frame_fd = os.dup(1)  # non-inheritable: subprocesses never see it
        rfd, wfd = os.pipe()
        self._rfd, self._wfd = rfd, wfd  # private, non-inheritable
        os.dup2(wfd, 1)  # fd 1 (inheritable) now feeds the capture
        self._lock = threading.Lock()
        self._stray = Capture(LOG_CAP)
        self._current = self._stray
        self._marker: bytes | None = None
        self._seen = threading.Event()
        self._token = os.urandom(8).hex().encode()
        self._count = 0
        self.sink = TextSink(self._add)
        sys.stdout = self.sink
        threading.Thread(target=self._drain, name="guestflow-stdout", daemon=True).start()

    def _add(self, data: bytes) -> None:
        with self._lock:
            cap = self._current
        cap.add(data)

    def _drain(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._rfd, 1 << 16)
            except InterruptedError:
                continue
            except OSError:
                return
            if not chunk:
                return
            try:
                data = pending + chunk if pending else chunk
                pending = b""
                with self._lock:
                    marker = self._marker
                    cap = self._current
                    if marker is not None:
                        at = data.find(marker)
                        if at >= 0:
                            cap.add(data[:at])
                            data = data[at + len(marker):]
                            self._marker = None
                            cap = self._current = self._stray
                            self._seen.set()
                        else:
                            keep = _marker_prefix_len(data, marker)
                            if keep:
                                pending = data[-keep:]
                                data = data[:-keep]
                cap.add(data)
            except Exception:  # noqa: BLE001 - the drain must never die (writers would block)
                pending = b""

    def begin(self) -> Capture:
        """Starts capturing for one vertex; restores fd 1 and sys.stdout if user code moved them."""
        self._restore()
        cap = Capture(LOG_CAP)
        with self._lock:
            self._current = cap
        return cap

    def end(self, cap: Capture) -> str:
        """Stops capturing for `cap` once everything written to fd 1 so far has arrived."""
        self._restore()
        self._sync()
        with self._lock:
            if self._current is cap:
                self._current = self._stray
        return cap.text()

    def take_stray(self) -> str:
        """Output written outside any vertex since the last call ("" if none)."""
        self._sync()
        with self._lock:
            stray = self._stray
            if stray.empty():
                return ""
            fresh = Capture(LOG_CAP)
            if self._current is stray:
                self._current = fresh
            self._stray = fresh
        return stray.text()

    def _restore(self) -> None:
        try:
            os.dup2(self._wfd, 1)  # user code may have closed or redirected fd 1
        except OSError:
            pass
        for stream in (sys.stdout, sys.__stdout__):  # text buffered outside our sink
            try:
                if stream is not None and stream is not self.sink:
                    stream.flush()
            except Exception:  # noqa: BLE001 - user code may have closed or replaced it
                pass
        sys.stdout = self.sink

    def _sync(self) -> None:
        self._count += 1
        marker = b"\x00\x1b[guestflow-sync %s %d]\x00" % (self._token, self._count)
        with self._lock:
            self._marker = marker
            self._seen.clear()
        try:
            write_all(self._wfd, marker)
        except OSError:
            with self._lock:
                self._marker = None
            return
        if not self._seen.wait(SYNC_TIMEOUT_S):
            with self._lock:
                self._marker = None


def _marker_prefix_len(data: bytes, marker: bytes) -> int:
    """Length of the longest suffix of `data` that is a proper prefix of `marker`."""
    start = max(0, len(data) - len(marker) + 1)
    at = data.find(marker[:1], start)
    while at >= 0:
        if marker.startswith(data[at:]):
            return len(data) - at
        at = data.find(marker[:1], at + 1)
    return 0


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# -- frames --------------------------------------------------------------------------------


def jsonable(value, depth: int = 0):
    """A JSON-safe copy: finite numbers, str keys, bounded depth, anything else as str."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= JSON_DEPTH_MAX:
        return f"[guestflow: nested deeper than {JSON_DEPTH_MAX} levels]"
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    dump = getattr(value, "model_dump", None)  # pydantic models (lfx path)
    if callable(dump):
        try:
            return jsonable(dump(), depth + 1)
        except Exception:  # noqa: BLE001
            pass
    try:
        return str(value)
    except Exception:  # noqa: BLE001
        return f"<unprintable {type(value).__name__}>"


def frame_line(frame) -> bytes:
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8", "replace") + b"\n"


def mask_secrets(value, secrets):
    """`value` with every occurrence of a secret in its strings (and keys) replaced by MASK."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {mask_secrets(k, secrets): mask_secrets(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, secrets) for v in value]
    return value


def encode_frame(frame: dict, secrets=()) -> bytes:
    """One frame line (<= FRAME_MAX bytes), clipping long strings with a marker if needed
    (`frame_limits.py`, imported only for a frame that does not fit)."""
    frame = jsonable(frame)
    if secrets:
        frame = mask_secrets(frame, secrets)
    line = frame_line(frame)
    if len(line) <= FRAME_MAX:
        return line
    from frame_limits import fit  # noqa: PLC0415 - few runs ever make a frame this large

    return fit(frame)


class Emitter:
    """Writes frames; the single place that touches the real stdout.

    `secrets` are the run's variable values: every frame is masked before it is written.
    """

    def __init__(self, capture: OutputCapture, secrets=()) -> None:
        self.capture = capture
        self.fd = capture.frame_fd
        self.secrets = sorted({s for s in secrets if len(s.encode("utf-8", "replace")) >= SECRET_MIN},
                              key=len, reverse=True)  # longest first: a secret inside another

    def emit(self, frame: dict) -> None:
        write_all(self.fd, encode_frame(frame, self.secrets))

    def note(self, **fields) -> None:
        self.emit({"t": "note", **fields})

    def flush_stray(self) -> None:
        text = self.capture.take_stray()
        if text:
            self.note(stdout=text)

    def vertex_start(self, vid: str, name: str) -> None:
        self.flush_stray()
        self.emit({"t": "vertex_start", "id": vid, "name": name})

    def step(self, vid, name, valid, duration_ms, outputs, logs, error=None, result=None,
             types=None) -> None:
        """A vertex's step; `result` is its ResultData dict, `types` the class name of each
        output's built value (the host rebuilds lfx objects from them)."""
        event = {"type": "vertex", "id": vid, "name": name, "valid": bool(valid),
                 "duration_ms": int(max(0, duration_ms)), "outputs": outputs, "logs": logs}
        if error is not None:
            event["error"] = error
        if result is not None:
            event["result"] = result
        if types is not None:
            event["types"] = types
        self.emit({"t": "step", "event": event})

    def token(self, vertex_id: str, chunk: str, message_id: str) -> None:
        """One streamed chunk of `vertex_id`'s output (Langflow's on_token), before its step."""
        self.emit({"t": "token", "id": vertex_id, "data": {"chunk": chunk, "id": message_id}})

    def message(self, vertex_id: str, data: dict) -> None:
        """A message the run stored (Langflow's on_message / add_message): the stored dict."""
        self.emit({"t": "message", "id": vertex_id, "data": data})

    def state(self, context: dict) -> None:
        """The graph's context after the run (JSON-able parts), the last frame before `done`."""
        self.emit({"t": "state", "context": context})

    def begin_capture(self) -> Capture:
        return self.capture.begin()

    def end_capture(self, cap: Capture) -> str:
        return self.capture.end(cap)

    def outputs(self, run_outputs: list) -> None:
        self.flush_stray()
        self.emit({"t": "outputs", "run_outputs": run_outputs})

    def done(self) -> None:
        self.emit({"t": "done"})

    def fatal(self, error: str, tb: str = "", code: str | None = None, **extra) -> None:
        frame = {"t": "fatal", "error": error, "traceback": tb}
        if code is not None:
            frame["code"] = code
        frame.update(extra)
        self.emit(frame)


def error_outputs(label: str, message: str, tb: str) -> dict:
    """A failed step's outputs: `error` (what the host reports) + Langflow's build-error value."""
    outputs = {label: {"message": {"errorMessage": message, "stackTrace": tb}, "type": "error"}}
    outputs["error"] = message
    return outputs
