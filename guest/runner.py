#!/usr/bin/env python3
"""guestflow guest runner: executes one serialized Langflow graph and prints frames.

Invoked by the host as ``python3 /workspace/run/runner.py /workspace/run/spec.json``
(``PYTHONUNBUFFERED=1``, cwd ``/workspace``, inside ``timeout --signal=KILL N``).
Python 3 standard library only. The frame protocol and every behaviour decision are
described in ``guest/README.md``; the short version:

* stdout carries frames only, one compact JSON object per line, each line <= 1 MiB.
  The runner keeps a private duplicate of the real stdout for frames and points fd 1
  and ``sys.stdout`` at a capture, so user ``print``s, C extensions and subprocesses
  writing to fd 1 land in the current vertex's ``logs`` (capped), never in frames.
* spec.json's ``executor`` (``auto`` | ``core`` | ``lfx``) picks who runs the graph.
  ``lfx``: ``lfx_path.py`` (next to this file) rebuilds the graph with
  ``Graph.from_payload`` and drives lfx's own run loop; without a usable lfx that is a
  ``fatal`` with ``code: "unavailable"``, never a fallback. ``core``: the executor below
  runs the graph itself in a deterministic topological order for the core component
  set (ChatInput, TextInput, ChatOutput, TextOutput, Prompt, PythonREPLComponent,
  ParseData, ParserComponent) and refuses, before any vertex runs, a graph with any
  other type (``fatal`` with ``code: "bad_request"`` and the list). ``auto``: lfx when
  it imports and is usable, else core.
* Canvas notes and other non-component nodes are ignored; Langflow groups are flattened
  the way Langflow does it; frozen vertices build (a guest has no cached results).
* A failing vertex gets a ``step`` with ``valid: false``; vertices downstream of it get
  a ``step`` with ``valid: false`` and ``error: "not built: upstream <id> failed"``
  (no ``vertex_start``); independent vertices still build (core). The run then still
  ends with ``outputs`` (built vertices only) and ``done``: the host derives the exit
  code from the failed steps. ``fatal`` (exit 1) is only for a bad spec, a flow the
  executor refuses, an unusable executor or a runner fault.
"""

from __future__ import annotations

import builtins
import copy
import datetime
import heapq
import importlib
import importlib.util
import io
import json
import keyword
import linecache
import math
import os
import subprocess
import sys
import threading
import time
import traceback

RUNNER_VERSION = 1
FRAME_MAX = 1 << 20  # bytes per frame line, newline included
LOG_CAP = 256 << 10  # captured output kept per vertex (head and tail)
RESULT_CAP = 256 << 10  # Python Interpreter result kept per vertex (head and tail)
PIP_TAIL = 4096  # bytes of pip output quoted in a failed-install message
SYNC_TIMEOUT_S = 5.0
JSON_DEPTH_MAX = 48  # user values nest no deeper (the host parser allows 128 in total)
EXECUTORS = ("auto", "core", "lfx")  # spec.json "executor"; auto is the default

# What makes a flow run that the core executor cannot: an image with lfx (the host's commands).
LFX_IMAGE_HINT = (
    "use an image with lfx: `guestflow image add NAME --python-env PREFIX` (PREFIX = the "
    "Python environment Langflow is installed in, e.g. its venv), then "
    "`guestflow run --image NAME --executor lfx`; on CreateOS, a template with lfx "
    "(CREATEOS_EXECUTOR_ROOTFS)")

INPUT_TYPES = ("ChatInput", "Webhook", "TextInput")
OUTPUT_TYPES = ("ChatOutput", "DataOutput", "TextOutput")
INPUT_FIELD_NAME = "input_value"


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


class _TextSink(io.TextIOBase):
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
        self.sink = _TextSink(self._add)
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
            _write_all(self._wfd, marker)
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


def _write_all(fd: int, data: bytes) -> None:
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


def _clip(value, limit: int):
    """`value` with every string longer than `limit` cut to its head and tail around a marker."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        head, tail = limit - limit // 4, limit // 4
        return (value[:head] + f"…[guestflow: truncated {len(value) - head - tail} characters]…"
                + value[len(value) - tail:])
    if isinstance(value, dict):
        return {k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):  # never shortened: the host reads these lists positionally
        return [_clip(v, limit) for v in value]
    return value


def _longest(value) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((_longest(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    return 0


def _line(frame) -> bytes:
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8", "replace") + b"\n"


def _minimal(frame: dict) -> dict:
    """Last resort for a frame that stays too large after clipping every string."""
    if frame.get("t") == "step":
        ev = frame["event"]
        return {"t": "step", "event": {
            "type": "vertex", "id": ev.get("id", ""), "name": ev.get("name", ""),
            "valid": ev.get("valid", False), "duration_ms": ev.get("duration_ms", 0),
            "outputs": {}, "logs": "[guestflow: step frame too large; outputs and logs dropped]",
            **({"error": _clip(ev["error"], 1024)} if "error" in ev else {})}}
    if frame.get("t") == "outputs":
        runs = []
        for run in frame.get("run_outputs", []):
            outs = [None if r is None else {
                "component_id": r.get("component_id", ""),
                "component_display_name": r.get("component_display_name", ""),
                "results": {}, "artifacts": {}, "outputs": {}, "logs": {}, "messages": [],
                "used_frozen_result": False} for r in run.get("outputs", [])]
            runs.append({"inputs": _clip(run.get("inputs", {}), 256), "outputs": outs})
        return {"t": "outputs", "run_outputs": runs}
    if frame.get("t") == "fatal":
        out = {"t": "fatal", "error": _clip(str(frame.get("error", "")), 4096), "traceback": ""}
        if isinstance(frame.get("code"), str):
            out["code"] = frame["code"]
        return out
    return {"t": frame.get("t", "note"), "error": "[guestflow: frame too large]"}


def encode_frame(frame: dict) -> bytes:
    """One frame line (<= FRAME_MAX bytes), clipping long strings with a marker if needed."""
    frame = jsonable(frame)
    line = _line(frame)
    if len(line) <= FRAME_MAX:
        return line
    longest = _longest(frame)
    for limit in (256 << 10, 64 << 10, 16 << 10, 4096, 1024, 256, 64):
        if limit >= longest:
            continue  # clipping at this limit would change nothing
        line = _line(_clip(frame, limit))
        if len(line) <= FRAME_MAX:
            return line
    line = _line(_minimal(frame))
    if len(line) <= FRAME_MAX:
        return line
    raise RunnerFatal(f"a {frame.get('t')!r} frame stays larger than {FRAME_MAX} bytes")


class Emitter:
    """Writes frames; the single place that touches the real stdout."""

    def __init__(self, capture: OutputCapture) -> None:
        self.capture = capture
        self.fd = capture.frame_fd

    def emit(self, frame: dict) -> None:
        _write_all(self.fd, encode_frame(frame))

    def note(self, **fields) -> None:
        self.emit({"t": "note", **fields})

    def flush_stray(self) -> None:
        text = self.capture.take_stray()
        if text:
            self.note(stdout=text)

    def vertex_start(self, vid: str, name: str) -> None:
        self.flush_stray()
        self.emit({"t": "vertex_start", "id": vid, "name": name})

    def step(self, vid, name, valid, duration_ms, outputs, logs, error=None) -> None:
        event = {"type": "vertex", "id": vid, "name": name, "valid": bool(valid),
                 "duration_ms": int(max(0, duration_ms)), "outputs": outputs, "logs": logs}
        if error is not None:
            event["error"] = error
        self.emit({"t": "step", "event": event})

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


# -- spec ----------------------------------------------------------------------------------


def _handle(value):
    """An edge handle: a dict, or Langflow's string form with œ for quotes."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value.replace("œ", '"'))
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _edge_ends(raw: dict):
    """(source, target, source handle, target handle) of a raw edge; handles are dicts."""
    source, target = raw.get("source"), raw.get("target")
    data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    src = _handle(data.get("sourceHandle")) or _handle(raw.get("sourceHandle")) or {}
    dst = _handle(data.get("targetHandle")) or _handle(raw.get("targetHandle")) or {}
    if not isinstance(source, str) or not source:
        source = src.get("id")
    if not isinstance(target, str) or not target:
        target = dst.get("id")
    return source, target, src, dst


def _non_component(raw: dict, where: str):
    """Why a node is not a component vertex (the runner then ignores it), or None.

    Langflow exports canvas notes as `"type": "noteNode"` (with `data.type: "note"` and a
    template holding only `backgroundColor`); components and groups are `"genericNode"`
    (or carry no `type` in older dumps). Other canvas node types, and nodes without
    `data.type` or without `data.node.template`, are nothing Langflow builds either.
    A field that is present with the wrong JSON type is an error, not a note.
    """
    ntype = raw.get("type")
    if ntype is not None and not isinstance(ntype, str):
        raise SpecError(f"{where}.type: expected a string (genericNode for a component)")
    if ntype == "noteNode":
        return "a canvas note (noteNode)"
    if ntype and ntype != "genericNode":
        return f"a {ntype!r} canvas node, not a component (genericNode)"
    data = raw.get("data")
    if data is None:
        return "no data"
    if not isinstance(data, dict):
        raise SpecError(f"{where}.data: expected an object")
    vtype = data.get("type")
    if vtype is None:
        return "no data.type"
    if not isinstance(vtype, str) or not vtype:
        raise SpecError(f"{where}.data.type: expected a non-empty string (the component type)")
    node = data.get("node")
    if node is None:
        return "no data.node.template"
    if not isinstance(node, dict):
        raise SpecError(f"{where}.data.node: expected an object")
    template = node.get("template")
    if template is None:
        return "no data.node.template"
    if not isinstance(template, dict):
        raise SpecError(f"{where}.data.node.template: expected an object")
    return None


def _group_flow(raw: dict, where: str):
    """A Langflow group node's sub-graph (`data.node.flow.data`), or None for a plain vertex."""
    flow = raw["data"]["node"].get("flow")
    if not flow:
        return None
    fwhere = f"{where}.data.node.flow"
    if not isinstance(flow, dict):
        raise SpecError(f"{fwhere}: expected an object (a group's sub-flow)")
    data = flow.get("data")
    if not isinstance(data, dict):
        raise SpecError(f"{fwhere}.data: required (the group's nodes and edges)")
    for key in ("nodes", "edges"):
        if not isinstance(data.get(key), list):
            raise SpecError(f"{fwhere}.data.{key}: required (a list)")
    return data


def _is_group(raw) -> bool:
    data = raw.get("data") if isinstance(raw, dict) else None
    node = data.get("node") if isinstance(data, dict) else None
    return isinstance(node, dict) and bool(node.get("flow"))


def _template_of(raw) -> dict | None:
    data = raw.get("data") if isinstance(raw, dict) else None
    node = data.get("node") if isinstance(data, dict) else None
    template = node.get("template") if isinstance(node, dict) else None
    return template if isinstance(template, dict) else None


def _into_group(gid: str, dst: dict, members: dict, where: str):
    """Langflow's update_target_handle: an edge into a group feeds the proxied inner field."""
    proxy = dst.get("proxy")
    if (not isinstance(proxy, dict) or not isinstance(proxy.get("id"), str)
            or not isinstance(proxy.get("field"), str)):
        raise SpecError(f"{where}.data.targetHandle.proxy: required for an edge into group "
                        f"{gid!r} (the id and field of the grouped vertex it feeds)")
    pid, field = proxy["id"], proxy["field"]
    if pid not in members:
        raise SpecError(f"{where}.data.targetHandle.proxy.id: {pid!r} is not a vertex of "
                        f"group {gid!r}")
    new = {"fieldName": field, "id": pid}
    for key in ("type", "inputTypes"):
        if dst.get(key) is not None:
            new[key] = dst[key]
    inner_field = (_template_of(members[pid]) or {}).get(field)
    nested = inner_field.get("proxy") if isinstance(inner_field, dict) else None
    if _is_group(members[pid]) and isinstance(nested, dict):  # it feeds a nested group: follow on
        new["proxy"] = {"field": nested.get("field"), "id": nested.get("id")}
    return pid, new


def _out_of_group(gid: str, gnode: dict, src: dict, g_nodes: list, g_edges: list,
                  members: dict, where: str):
    """Langflow's update_source_handle: an edge out of a group leaves from the proxied vertex."""
    name = src.get("name")
    found = None
    if isinstance(name, str) and name:
        for out in gnode.get("outputs") or []:
            if isinstance(out, dict) and out.get("name") == name:
                proxy = out.get("proxy")
                if isinstance(proxy, dict) and isinstance(proxy.get("id"), str):
                    pname = proxy.get("name") or proxy.get("field")
                    if isinstance(pname, str) and pname:
                        found = (proxy["id"], pname)
                break
        if found is None:  # outputs are named "<inner id>_<output>" by Langflow's frontend
            for nid in sorted(members, key=len, reverse=True):
                if name.startswith(nid + "_"):
                    found = (nid, name[len(nid) + 1:])
                    break
    if found is None:  # Langflow's find_last_node: the first vertex no inner edge leaves
        sources = {_edge_ends(e)[0] for e, _ in g_edges if isinstance(e, dict)}
        last = next((n["id"] for n, w in g_nodes if isinstance(n, dict) and n.get("id") in members
                     and n["id"] not in sources and _non_component(n, w) is None), None)
        if last is None:
            raise SpecError(f"{where}.source: group {gid!r} has no vertex its output can come from")
        found = (last, name)
    pid, pname = found
    if pid not in members:
        raise SpecError(f"{where}.data.sourceHandle: group {gid!r} output {name!r} points at "
                        f"{pid!r}, which is not one of its vertices")
    new = dict(src)
    new["id"] = pid
    if pname:
        new["name"] = pname
    return pid, new


def _ungroup(at: int, entries: list, edge_entries: list) -> str:
    """Flattens the group node entries[at] in place, as Langflow's process_flow does.

    The group's vertices join the graph (appended, so nested groups are flattened in turn),
    they inherit the group's `frozen`, the group's proxied template fields override theirs,
    and edges into or out of the group are redirected to the proxied inner vertices.
    """
    raw, where = entries[at]
    gid = raw.get("id")
    if not isinstance(gid, str) or not gid:
        raise SpecError(f"{where}.id: required (a non-empty string)")
    gnode = raw["data"]["node"]
    fdata = copy.deepcopy(_group_flow(raw, where))
    fwhere = f"{where}.data.node.flow.data"
    g_nodes = [(n, f"{fwhere}.nodes[{k}]") for k, n in enumerate(fdata["nodes"])]
    g_edges = [(e, f"{fwhere}.edges[{k}]") for k, e in enumerate(fdata["edges"])]
    frozen = gnode.get("frozen", False)
    members: dict = {}
    for n, _ in g_nodes:
        if not isinstance(n, dict):
            continue
        ndata = n.get("data")
        if isinstance(ndata, dict) and isinstance(ndata.get("node"), dict):
            ndata["node"]["frozen"] = frozen  # add_frozen: the group's flag wins
        if isinstance(n.get("id"), str) and n["id"]:
            members.setdefault(n["id"], n)
    kept, redirected = [], []
    for e, ewhere in edge_entries:
        if not isinstance(e, dict):
            raise SpecError(f"{ewhere}: expected an object")
        source, target, src, dst = _edge_ends(e)
        if gid not in (source, target):
            kept.append((e, ewhere))
            continue
        if target == gid:
            target, dst = _into_group(gid, dst, members, ewhere)
        if source == gid:
            source, src = _out_of_group(gid, gnode, src, g_nodes, g_edges, members, ewhere)
        redirected.append(({"id": e.get("id"), "source": source, "target": target,
                            "data": {"sourceHandle": src, "targetHandle": dst}}, ewhere))
    for value in (gnode.get("template") or {}).values():  # update_template, after the edges
        # (as Langflow: an outer group's override replaces the inner proxy the edges followed)
        proxy = value.get("proxy") if isinstance(value, dict) else None
        if not isinstance(proxy, dict) or proxy.get("id") not in members:
            continue
        template, field = _template_of(members[proxy["id"]]), proxy.get("field")
        if template is None or not isinstance(field, str):
            continue
        old = template.get(field) if isinstance(template.get(field), dict) else {}
        merged = dict(value)
        for key in ("show", "advanced"):
            if key in old:
                merged[key] = old[key]
        merged["display_name"] = old.get("display_name", old.get("name", field))
        template[field] = merged
    del entries[at]
    entries.extend(g_nodes)
    edge_entries[:] = kept + g_edges + redirected
    return gid


def _components_only(nodes: list) -> list:
    """`nodes` without ignored canvas nodes, inside group sub-flows too (for lfx)."""
    out = []
    for raw in nodes:
        if not isinstance(raw, dict) or _non_component(raw, "graph") is not None:
            continue
        flow = raw["data"]["node"].get("flow")
        inner = flow.get("data") if isinstance(flow, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("nodes"), list):
            kept = _components_only(inner["nodes"])
            if len(kept) != len(inner["nodes"]):
                raw = {**raw, "data": {**raw["data"], "node": {**raw["data"]["node"], "flow": {
                    **flow, "data": {**inner, "nodes": kept}}}}}
        out.append(raw)
    return out


class Node:
    __slots__ = ("id", "type", "name", "template", "outputs", "index", "is_input", "is_output",
                 "frozen")

    def __init__(self, raw: dict, index: int, where: str) -> None:
        # _non_component() has checked data, data.type, data.node and data.node.template.
        vid = raw.get("id")
        if not isinstance(vid, str) or not vid:
            raise SpecError(f"{where}.id: required (a non-empty string)")
        data = raw["data"]
        vtype = data["type"]
        node = data["node"]
        template = node["template"]
        outputs = node.get("outputs", [])
        if outputs is None:
            outputs = []
        if not isinstance(outputs, list):
            raise SpecError(f"{where}.data.node.outputs: expected a list")
        name = node.get("display_name")
        self.id = vid
        self.type = vtype
        self.name = name if isinstance(name, str) and name else vid.split("-")[0]
        self.template = template
        self.outputs = [o["name"] for o in outputs
                        if isinstance(o, dict) and isinstance(o.get("name"), str)]
        self.index = index
        kinds = {vid.split("-")[0], vtype}
        self.is_input = bool(node.get("is_input")) or any(t in kinds for t in INPUT_TYPES)
        self.is_output = bool(node.get("is_output")) or any(t in kinds for t in OUTPUT_TYPES)
        self.frozen = node.get("frozen") is True

    def field(self, name: str, default=None):
        """The template value of `name` (Langflow: template.<name>.value)."""
        if name not in self.template:
            return default
        entry = self.template[name]
        if isinstance(entry, dict):
            value = entry.get("value", default)
            return default if value is None else value
        return default if entry is None else entry


class Edge:
    __slots__ = ("source", "target", "field", "output", "index")

    def __init__(self, raw: dict, index: int, where: str, ids: dict, ignored: dict) -> None:
        source, target, src_handle, dst_handle = _edge_ends(raw)
        for end, vid in (("source", source), ("target", target)):
            if not isinstance(vid, str) or not vid:
                raise SpecError(f"{where}.{end}: required (a vertex id)")
            if vid in ignored:
                raise SpecError(f"{where}.{end}: {vid!r} is {ignored[vid]}, which the runner "
                                "ignores, so this edge dangles")
            if vid not in ids:
                raise SpecError(f"{where}.{end}: unknown vertex {vid!r} (dangling edge)")
        field = dst_handle.get("fieldName")
        if not isinstance(field, str) or not field:
            raise SpecError(f"{where}.data.targetHandle.fieldName: required (the target input's name)")
        output = src_handle.get("name")
        self.source, self.target, self.field = source, target, field
        self.output = output if isinstance(output, str) and output else None
        self.index = index


class Graph:
    """The validated graph: vertices in payload order (groups flattened, canvas notes and other
    non-component nodes ignored), edges, and a deterministic build order."""

    def __init__(self, raw) -> None:
        if not isinstance(raw, dict):
            raise SpecError("graph: required (an object with nodes and edges)")
        if "nodes" not in raw and isinstance(raw.get("data"), dict):
            raw = raw["data"]  # a whole Graph.dump() or flow export ({"data": {...}}) too
        nodes, edges = raw.get("nodes"), raw.get("edges")
        if not isinstance(nodes, list):
            raise SpecError("graph.nodes: required (a list)")
        if not isinstance(edges, list):
            raise SpecError("graph.edges: required (a list)")
        entries = [(n, f"graph.nodes[{i}]") for i, n in enumerate(nodes)]
        edge_entries = [(e, f"graph.edges[{i}]") for i, e in enumerate(edges)]
        self.ignored: dict[str, str] = {}  # id (or where) -> why it is not a vertex
        self.groups: list[str] = []  # ids of the flattened group nodes
        i = 0
        while i < len(entries):
            raw_node, where = entries[i]
            if not isinstance(raw_node, dict):
                raise SpecError(f"{where}: expected an object")
            why = _non_component(raw_node, where)
            if why is not None:
                vid = raw_node.get("id")
                self.ignored[vid if isinstance(vid, str) and vid else where] = why
                del entries[i]
                continue
            if _group_flow(raw_node, where) is not None:
                self.groups.append(_ungroup(i, entries, edge_entries))
                continue
            i += 1
        # lfx gets the graph as exported (it flattens groups itself), minus ignored nodes.
        self.payload = {"nodes": _components_only(nodes), "edges": edges}
        self.nodes: list[Node] = []
        self.by_id: dict[str, Node] = {}
        for raw_node, where in entries:
            node = Node(raw_node, len(self.nodes), where)
            if node.id in self.by_id:
                raise SpecError(f"{where}.id: duplicate vertex id {node.id!r}")
            self.nodes.append(node)
            self.by_id[node.id] = node
        if not self.nodes:
            extra = f" ({len(self.ignored)} non-component nodes ignored)" if self.ignored else ""
            raise SpecError(f"graph.nodes: the graph has no vertices{extra}")
        self.edges: list[Edge] = []
        for raw_edge, where in edge_entries:
            if not isinstance(raw_edge, dict):
                raise SpecError(f"{where}: expected an object")
            self.edges.append(Edge(raw_edge, len(self.edges), where, self.by_id, self.ignored))
        self.incoming: dict[str, list[Edge]] = {n.id: [] for n in self.nodes}
        self.preds: dict[str, list[str]] = {n.id: [] for n in self.nodes}
        succs: dict[str, list[str]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            self.incoming[e.target].append(e)
            if e.source not in self.preds[e.target]:
                self.preds[e.target].append(e.source)
                succs[e.source].append(e.target)
        self.order, self.cycle = self._topological(succs)

    def _topological(self, succs):
        """(build order, ids stuck in or behind a cycle); a cycle is the core executor's
        problem only: lfx runs loops."""
        indegree = {vid: len(p) for vid, p in self.preds.items()}
        ready = [(n.index, n.id) for n in self.nodes if indegree[n.id] == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            _, vid = heapq.heappop(ready)
            order.append(self.by_id[vid])
            for nxt in succs[vid]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    heapq.heappush(ready, (self.by_id[nxt].index, nxt))
        return order, [n.id for n in self.nodes if indegree[n.id] > 0]


def validate_spec(spec) -> dict:
    """Checks spec.json and returns it normalized; raises SpecError naming the field."""
    if not isinstance(spec, dict):
        raise SpecError("spec: expected a JSON object")
    if "graph" not in spec:
        raise SpecError("spec.graph: required (the Graph.dump() nodes and edges)")
    graph = Graph(spec["graph"])

    raw_inputs = spec.get("inputs", [])
    if raw_inputs is None:
        raw_inputs = []
    if not isinstance(raw_inputs, list):
        raise SpecError("spec.inputs: expected a list")
    inputs = []
    for i, entry in enumerate(raw_inputs):
        where = f"spec.inputs[{i}]"
        if isinstance(entry, str):
            entry = {"input_value": entry}
        if not isinstance(entry, dict):
            raise SpecError(f"{where}: expected an object")
        value = entry.get("input_value")
        if value is None:
            value = ""  # Langflow: a None input_value defaults to ""
        if not isinstance(value, str):
            raise SpecError(f"{where}.input_value: expected a string")
        itype = entry.get("type")
        if itype is None:
            itype = "chat"  # Graph.arun's default
        if itype not in ("chat", "text", "any"):
            raise SpecError(f"{where}.type: expected one of chat, text, any")
        components = entry.get("components")
        if components is None:
            components = []
        if not isinstance(components, list) or not all(isinstance(c, str) for c in components):
            raise SpecError(f"{where}.components: expected a list of vertex ids or display names")
        inputs.append({"input_value": value, "type": itype, "components": components})

    outputs = spec.get("outputs", [])
    if outputs is None:
        outputs = []
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise SpecError("spec.outputs: expected a list of vertex ids or display names")

    options = spec.get("runtime_options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise SpecError("spec.runtime_options: expected an object")
    where = "spec.runtime_options"
    max_iterations = options.get("max_iterations")
    if max_iterations is not None and (
            isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1):
        raise SpecError(f"{where}.max_iterations: expected a positive integer")
    if options.get("config") is not None and not isinstance(options.get("config"), dict):
        raise SpecError(f"{where}.config: expected an object")
    for key in ("reset_output_values", "fallback_to_env_vars"):
        if options.get(key) is not None and not isinstance(options.get(key), bool):
            raise SpecError(f"{where}.{key}: expected a boolean")

    install_lfx = spec.get("install_lfx", False)
    if install_lfx is None:
        install_lfx = False
    if not isinstance(install_lfx, bool):
        raise SpecError("spec.install_lfx: expected a boolean")
    pip = spec.get("pip", [])
    if pip is None:
        pip = []
    if not isinstance(pip, list):
        raise SpecError("spec.pip: expected a list of requirement strings")
    for i, req in enumerate(pip):
        if not isinstance(req, str) or not req.strip() or any(c in req for c in "\0\r\n"):
            raise SpecError(f"spec.pip[{i}]: expected a non-empty single-line string")

    executor = spec.get("executor", "auto")
    if executor is None:
        executor = "auto"
    if not isinstance(executor, str) or executor not in EXECUTORS:
        shown = json.dumps(executor)[:80] if not isinstance(executor, str) else repr(executor[:80])
        raise SpecError(f"executor: expected one of {', '.join(EXECUTORS)} (got {shown})")
    if install_lfx and executor == "core":
        raise SpecError("install_lfx: true needs executor lfx or auto, not core")

    return {"graph": graph, "inputs": inputs, "outputs": outputs,
            "runtime_options": {k: v for k, v in options.items() if not str(k).startswith("_")},
            "install_lfx": install_lfx, "pip": pip, "executor": executor}


def load_spec(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:  # the host's file, not the caller's flow: no bad_request
        raise RunnerFatal(f"runner: cannot read the spec {path}: {exc.strerror or exc}") from None
    try:
        spec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SpecError(f"spec: not UTF-8 ({exc})") from None
    except ValueError as exc:
        raise SpecError(f"spec: not valid JSON ({exc})") from None
    return validate_spec(spec)


# -- values that flow along edges ------------------------------------------------------------


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S %Z")


class Message:
    """The parts of Langflow's Message that the core components use."""

    __slots__ = ("text", "sender", "sender_name", "session_id", "timestamp")

    def __init__(self, text: str, sender=None, sender_name=None, session_id: str = "") -> None:
        self.text = text
        self.sender = sender
        self.sender_name = sender_name
        self.session_id = session_id
        self.timestamp = _now()

    def as_data(self) -> dict:
        return {"text": self.text, "sender": self.sender, "sender_name": self.sender_name,
                "session_id": self.session_id}

    def dump(self, node: Node) -> dict:
        return {
            "text_key": "text", "default_value": "", "text": self.text, "sender": self.sender,
            "sender_name": self.sender_name, "files": [], "session_id": self.session_id,
            "timestamp": self.timestamp, "flow_id": None, "error": False, "edit": False,
            "properties": {"text_color": "", "background_color": "", "edited": False,
                           "source": {"id": node.id, "display_name": node.name, "source": None},
                           "icon": "", "allow_markdown": False, "positive_feedback": None,
                           "state": "complete", "targets": []},
            "category": "message", "content_blocks": [],
        }


class Data:
    """Langflow's Data: a dict payload whose text is data["text"]."""

    __slots__ = ("data",)

    def __init__(self, data: dict) -> None:
        self.data = data

    def dump(self) -> dict:
        return {"text_key": "text", "data": self.data, "default_value": ""}


def to_text(value) -> str:
    """How ChatOutput/TextOutput/Prompt read a value: Message text, Data as text or JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        return value.text
    if isinstance(value, Data):
        text = value.data.get("text")
        if isinstance(text, str):
            return text
        body = json.dumps(jsonable(value.data), indent=2, ensure_ascii=False)
        return "```json\n" + body + "\n```"
    if isinstance(value, (list, tuple)):
        return "\n".join(to_text(v) for v in value)
    if isinstance(value, dict):
        return to_text(Data(value))
    return str(value)


def to_record(value) -> dict:
    """How ParseData/Parser read one item: a dict of fields."""
    if isinstance(value, Data):
        return value.data
    if isinstance(value, Message):
        return value.as_data()
    if isinstance(value, dict):
        return value
    return {"text": to_text(value)}


def to_python(value):
    """How a Python Interpreter sees an incoming value: str for messages, dict for Data."""
    if isinstance(value, Message):
        return value.text
    if isinstance(value, Data):
        return dict(value.data)
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return value


def output_log(value) -> dict:
    """Langflow's OutputValue for one output (step `outputs` and ResultData.outputs)."""
    if isinstance(value, Message):
        return {"message": value.text, "type": "text"}
    if isinstance(value, Data):
        return {"message": value.data, "type": "object"}
    if isinstance(value, list):
        return {"message": [to_record(v) for v in value], "type": "array"}
    if isinstance(value, str):
        return {"message": value, "type": "text"}
    return {"message": value, "type": "object"}


def _dump_value(value, node: Node):
    if isinstance(value, Message):
        return value.dump(node)
    if isinstance(value, Data):
        return value.dump()
    if isinstance(value, list):
        return [_dump_value(v, node) for v in value]
    return value


def _artifact_type(value) -> str:
    if isinstance(value, Message):
        return "message"
    if isinstance(value, Data):
        return "object"
    if isinstance(value, list):
        return "array"
    return "text" if isinstance(value, str) else "object"


def format_elapsed(seconds: float) -> str:
    """Langflow's format_elapsed_time."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        s = round(seconds, 2)
        return f"{s} {'second' if s == 1 else 'seconds'}"
    minutes = int(seconds // 60)
    s = round(seconds - minutes * 60, 2)
    return (f"{minutes} {'minute' if minutes == 1 else 'minutes'}, "
            f"{s} {'second' if s == 1 else 'seconds'}")


def result_data(node: Node, values: dict, seconds: float) -> dict:
    """Langflow's ResultData for a built vertex."""
    results = {name: _dump_value(v, node) for name, v in values.items()}
    outputs = {name: output_log(v) for name, v in values.items()}
    messages = []
    for name, v in values.items():
        if isinstance(v, Message) and v.text:
            msg = {"message": v.text, "sender": v.sender, "sender_name": v.sender_name,
                   "session_id": v.session_id, "component_id": node.id, "files": [],
                   "type": "message"}
            messages.append({k: x for k, x in msg.items() if x is not None})
    if node.type == "ChatOutput" and isinstance(values.get("message"), Message):
        m = values["message"]
        artifacts = {"message": m.text, "sender": m.sender, "sender_name": m.sender_name,
                     "files": [], "type": "object"}
    else:
        artifacts = {}
        for name, v in values.items():
            raw = _dump_value(v, node) if not isinstance(v, Message) else v.text
            artifacts[name] = {"repr": to_text(v), "raw": raw, "type": _artifact_type(v)}
    return {
        "results": results, "artifacts": artifacts, "outputs": outputs,
        "logs": {name: [] for name in values}, "messages": messages,
        "timedelta": seconds, "duration": format_elapsed(seconds),
        "component_display_name": node.name, "component_id": node.id,
        "used_frozen_result": False,
    }


# -- the core component set --------------------------------------------------------------------


class BuildContext:
    """What a component builder sees: its node, incoming values by field, the caller input."""

    def __init__(self, node: Node, incoming: dict, caller_input, capture: OutputCapture) -> None:
        self.node = node
        self.incoming = incoming  # field -> [values in edge order]
        self.caller_input = caller_input  # str if the caller's input targets this vertex
        self.capture = capture

    def values(self, field: str) -> list:
        return self.incoming.get(field, [])

    def value(self, field: str, default=None):
        """The last edge into `field` wins (Langflow params semantics), else the template value."""
        vals = self.values(field)
        return vals[-1] if vals else self.node.field(field, default)

    def text(self, field: str, default: str = "") -> str:
        return to_text(self.value(field, default))

    def out(self, default: str) -> str:
        return self.node.outputs[0] if self.node.outputs else default


def _sender(ctx: BuildContext, default_sender: str, default_name: str):
    return (ctx.text("sender", default_sender) or default_sender,
            ctx.text("sender_name", default_name) or default_name)


def build_chat_input(ctx: BuildContext) -> dict:
    text = ctx.caller_input if ctx.caller_input is not None else ctx.text(INPUT_FIELD_NAME)
    sender, name = _sender(ctx, "User", "User")
    return {ctx.out("message"): Message(text, sender, name, ctx.text("session_id"))}


def build_text_input(ctx: BuildContext) -> dict:
    text = ctx.caller_input if ctx.caller_input is not None else ctx.text(INPUT_FIELD_NAME)
    return {ctx.out("text"): Message(text)}


def build_chat_output(ctx: BuildContext) -> dict:
    sender, name = _sender(ctx, "Machine", "AI")
    text = ctx.text(INPUT_FIELD_NAME)
    return {ctx.out("message"): Message(text, sender, name, ctx.text("session_id"))}


def build_text_output(ctx: BuildContext) -> dict:
    return {ctx.out("text"): Message(ctx.text(INPUT_FIELD_NAME))}


class _PromptVariables(dict):
    def __init__(self, ctx: BuildContext) -> None:
        super().__init__()
        self.ctx = ctx

    def __missing__(self, key):
        ctx = self.ctx
        vals = ctx.values(key)
        if vals:  # several edges into one variable are joined line by line
            return to_text(vals[0] if len(vals) == 1 else vals)
        if key in ctx.node.template and key != "template":
            return to_text(ctx.node.field(key, ""))
        raise VertexFailure(
            f"Prompt variable {{{key}}} has no value: connect an edge to the field {key!r} "
            f"or give the template field {key!r} a value")


def _format(template: str, mapping, what: str) -> str:
    try:
        return template.format_map(mapping)
    except VertexFailure:
        raise
    except KeyError as exc:  # a mapping without __missing__
        raise VertexFailure(f"{what}: no value for {{{exc.args[0]}}}") from None
    except (ValueError, IndexError, AttributeError, TypeError) as exc:
        raise VertexFailure(f"{what}: invalid template ({exc})") from None


def build_prompt(ctx: BuildContext) -> dict:
    template = ctx.text("template")
    text = _format(template, _PromptVariables(ctx), "Prompt")
    return {ctx.out("prompt"): Message(text)}


class _RecordFields(dict):
    def __init__(self, record: dict) -> None:
        super().__init__(record)
        self.setdefault("data", record)

    def __missing__(self, key):
        keys = ", ".join(sorted(str(k) for k in self if k != "data")) or "none"
        raise VertexFailure(f"template variable {{{key}}} is not a field of the data (fields: {keys})")


def _items(values: list) -> list:
    out = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return out


def build_parse_data(ctx: BuildContext) -> dict:
    template = ctx.text("template", "{text}")
    sep = ctx.text("sep", "\n")
    items = _items(ctx.values("data"))
    text = sep.join(_format(template, _RecordFields(to_record(i)), "Parse Data") for i in items)
    out = {"text": Message(text), "data_list": [Data(to_record(i)) for i in items]}
    names = ctx.node.outputs or ["text"]
    return {name: out[name] for name in names if name in out} or {"text": out["text"]}


def build_parser(ctx: BuildContext) -> dict:
    items = _items(ctx.values("input_data"))
    sep = ctx.text("sep", "\n")
    if ctx.text("mode", "Parser") == "Stringify":
        text = sep.join(to_text(i) for i in items)
    else:
        pattern = ctx.text("pattern", "Text: {text}")
        text = sep.join(_format(pattern, _RecordFields(to_record(i)), "Parser") for i in items)
    return {ctx.out("parsed_text"): Message(text)}


class _UserCodeError(Exception):
    def __init__(self, message: str, tb: str) -> None:
        super().__init__(message)
        self.tb = tb


def _user_traceback(exc: BaseException, filename: str) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))


def build_python_repl(ctx: BuildContext) -> dict:
    """Python Interpreter: `global_imports` + `python_code`, stdout is the result.

    An edge into `python_code` supplies the code itself (Langflow semantics). Every other
    edge binds its value as a global named after its target field (when that is an
    identifier), and `input_value` is always bound: the first such value, else None.
    Messages arrive as their text (str), Data as a dict.
    """
    node = ctx.node
    imports = ctx.value("global_imports", "")
    if isinstance(imports, list):
        modules = [str(m).strip() for m in imports]
    else:
        modules = [m.strip() for m in to_text(imports).split(",")]
    code = ctx.text("python_code")
    env = {"__name__": "__main__", "__builtins__": builtins}
    for module in (m for m in modules if m):
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - a module can raise anything on import
            message = f"Could not import module {module}: {type(exc).__name__}: {exc}"
            raise _UserCodeError(message, "") from None
        top = module.split(".")[0]
        env[top] = sys.modules[top]
    first = None
    for field, vals in ctx.incoming.items():
        if field in ("python_code", "global_imports") or not vals:
            continue
        value = to_python(vals[-1])
        if first is None:
            first = value
        if field.isidentifier() and not keyword.iskeyword(field):
            env[field] = value
    env.setdefault(INPUT_FIELD_NAME, first)

    filename = f"<python_code {node.id}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    result = Capture(RESULT_CAP)

    def tee(data: bytes) -> None:
        result.add(data)
        ctx.capture.sink._write_bytes(data)  # noqa: SLF001 - same capture as print()

    sink = _TextSink(tee)
    sys.stdout = sink
    try:
        exec(compile(code, filename, "exec"), env)  # noqa: S102 - running user code is the point
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise _UserCodeError(f"SystemExit: {exc.code}", _user_traceback(exc, filename)) from None
    except BaseException as exc:  # noqa: BLE001 - user code can raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _UserCodeError(f"{type(exc).__name__}: {exc}", _user_traceback(exc, filename)) from None
    finally:
        sys.stdout = ctx.capture.sink
        linecache.cache.pop(filename, None)
    return {ctx.out("results"): Data({"result": result.text().strip()})}


CORE_COMPONENTS = {
    "ChatInput": build_chat_input,
    "TextInput": build_text_input,
    "ChatOutput": build_chat_output,
    "TextOutput": build_text_output,
    "Prompt": build_prompt,
    "PythonREPLComponent": build_python_repl,
    "ParseData": build_parse_data,
    "ParserComponent": build_parser,
}


def _vertex_list(items, limit: int = 50) -> str:
    shown = "; ".join(f"{i['id']} \"{i['name']}\" ({i['type']})" for i in items[:limit])
    return shown + (f"; … and {len(items) - limit} more" if len(items) > limit else "")


def core_refusal(graph: "Graph", fallback_reason: str | None = None):
    """RunnerFatal (bad_request) when the core executor cannot run `graph`, else None.

    Checked before any vertex runs, so a flow it cannot finish never half-runs: every
    unsupported vertex is listed at once (id, display name, type), with what runs it.
    """
    unsupported = [{"id": n.id, "name": n.name, "type": n.type}
                   for n in graph.nodes if n.type not in CORE_COMPONENTS]
    problems = []
    if unsupported:
        which = ("1 vertex has a component type" if len(unsupported) == 1
                 else f"{len(unsupported)} vertices have component types")
        problems.append(f"{which} it does not build: {_vertex_list(unsupported)} (it builds only "
                        f"{', '.join(CORE_COMPONENTS)})")
    if graph.cycle:
        shown = ", ".join(graph.cycle[:10]) + (", …" if len(graph.cycle) > 10 else "")
        problems.append(f"the edges form a cycle (through {shown}) and it runs acyclic graphs only")
    if not problems:
        return None
    why = f" (executor auto chose core: {fallback_reason})" if fallback_reason else ""
    message = (f"guestflow's core executor cannot run this flow, so no vertex ran{why}: "
               + "; ".join(problems) + ". To run every Langflow component, " + LFX_IMAGE_HINT + ".")
    extra = {"unsupported": unsupported} if unsupported else {}
    if graph.cycle:
        extra["cycle"] = list(graph.cycle)
    return RunnerFatal(message, code="bad_request", **extra)


# -- the core executor -------------------------------------------------------------------------


def _targeted(node: Node, run_inputs: dict, components: list, input_type) -> bool:
    """Graph._set_inputs: which input vertices the caller's input goes to."""
    if not node.is_input or not run_inputs:
        return False
    if components and node.id not in components and node.name not in components:
        return False
    if input_type is not None and input_type != "any" and input_type not in node.id.lower():
        return False
    return True


def error_outputs(label: str, message: str, tb: str) -> dict:
    """A failed step's outputs: `error` (what the host reports) + Langflow's build-error value."""
    outputs = {label: {"message": {"errorMessage": message, "stackTrace": tb}, "type": "error"}}
    outputs["error"] = message
    return outputs


class CoreExecutor:
    name = "core"

    def __init__(self, spec: dict, emitter: Emitter, fallback_reason: str | None = None) -> None:
        self.graph: Graph = spec["graph"]
        self.spec = spec
        self.emitter = emitter
        self.fallback_reason = fallback_reason  # why auto did not pick lfx, if it did not

    def check(self) -> None:
        """Refuses, before anything runs, a graph this executor cannot finish."""
        refusal = core_refusal(self.graph, self.fallback_reason)
        if refusal is not None:
            raise refusal

    def run(self) -> list:
        spec, emitter = self.spec, self.emitter
        requested = spec["outputs"]
        runs = spec["inputs"] or [None]
        run_outputs = []
        for i, entry in enumerate(runs):
            if entry is None:
                run_inputs, components, input_type = {}, [], None
            else:
                run_inputs = {INPUT_FIELD_NAME: entry["input_value"]}
                components, input_type = entry["components"], entry["type"]
            if len(runs) > 1:
                emitter.note(run=i, inputs=run_inputs)
            outputs = self._run_once(run_inputs, components, input_type, requested)
            run_outputs.append({"inputs": run_inputs, "outputs": outputs})
        return run_outputs

    def _run_once(self, run_inputs, components, input_type, requested) -> list:
        graph, emitter = self.graph, self.emitter
        values: dict[str, dict] = {}
        seconds: dict[str, float] = {}
        failed: dict[str, str] = {}  # vertex id -> id of the failure that stopped it
        for node in graph.order:
            blocker = next((p for p in graph.preds[node.id] if p in failed), None)
            if blocker is not None:
                root = failed[blocker]
                failed[node.id] = root
                message = f"not built: upstream {root} failed"
                emitter.step(node.id, node.name, False, 0, {"error": message}, message,
                             error=message)
                continue
            incoming: dict[str, list] = {}
            for edge in graph.incoming[node.id]:
                produced = values[edge.source]
                if edge.output is not None and edge.output in produced:
                    value = produced[edge.output]
                else:
                    value = next(iter(produced.values()), None)
                incoming.setdefault(edge.field, []).append(value)
            caller_input = (run_inputs.get(INPUT_FIELD_NAME)
                            if _targeted(node, run_inputs, components, input_type) else None)
            ctx = BuildContext(node, incoming, caller_input, emitter.capture)
            emitter.vertex_start(node.id, node.name)
            cap = emitter.begin_capture()
            started = time.perf_counter()
            error = tb = None
            try:
                produced = CORE_COMPONENTS[node.type](ctx)  # check() refused any other type
            except VertexFailure as exc:
                error, tb = str(exc), ""
            except _UserCodeError as exc:
                error, tb = f"{node.name} ({node.id}) failed: {exc}", exc.tb
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - a component fault fails its vertex only
                error = f"{node.name} ({node.id}) failed: {type(exc).__name__}: {exc}"
                tb = traceback.format_exc()
            elapsed = time.perf_counter() - started
            logs = emitter.end_capture(cap)
            if error is None:
                values[node.id] = produced
                seconds[node.id] = elapsed
                emitter.step(node.id, node.name, True, round(elapsed * 1000),
                             {name: output_log(v) for name, v in produced.items()}, logs)
            else:
                failed[node.id] = node.id
                if logs and not logs.endswith("\n"):
                    logs += "\n"
                emitter.step(node.id, node.name, False, round(elapsed * 1000),
                             error_outputs(node.outputs[0] if node.outputs else "output",
                                           error, tb or ""), logs + error, error=error)
        harvested = []
        for node in graph.nodes:  # Graph._run: payload order, built vertices only
            if node.id not in values:
                continue
            if (not requested and node.is_output) or node.id in requested or node.name in requested:
                harvested.append(result_data(node, values[node.id], seconds[node.id]))
        return harvested


# -- choosing the executor ---------------------------------------------------------------------


def _install_lfx(spec_dir: str, pip_args: list, emitter: Emitter) -> None:
    """Per-run fallback for an image without lfx: pip install lfx (+ extras) into the run dir."""
    target = os.path.join(spec_dir, "site-packages")
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


def _lfx_importable() -> bool:
    try:
        return importlib.util.find_spec("lfx") is not None
    except (ImportError, ValueError):  # a broken lfx: let loading it tell why
        return True


def lfx_unavailable(reason: str) -> RunnerFatal:
    return RunnerFatal(
        f"executor lfx: lfx is not usable in this guest ({reason}). lfx runs the flow only on "
        f"an image that has it: {LFX_IMAGE_HINT}. Or use executor auto (or core) to run the "
        "flow with guestflow's core executor if it has only core component types.",
        code="unavailable")


def choose_executor(spec: dict, spec_path: str, emitter: Emitter):
    """(executor, reason) for spec["executor"]; `lfx` never falls back to core."""
    mode = spec["executor"]
    if spec["install_lfx"]:
        _install_lfx(os.path.dirname(os.path.abspath(spec_path)), spec["pip"], emitter)
        mode = "lfx"
        chosen = "install_lfx installed lfx for this run"
    else:
        chosen = "executor auto: lfx is installed" if mode == "auto" else f"executor {mode} was requested"
    if mode == "core":
        return CoreExecutor(spec, emitter), chosen
    if mode == "auto" and not _lfx_importable():
        reason = "executor auto: lfx is not installed"
        return CoreExecutor(spec, emitter, reason), reason
    try:
        module = _load_lfx_path()
    except _NoLfxPath as exc:
        if mode == "lfx":
            raise RunnerFatal(f"runner: {exc}") from None  # a host fault: no code
        reason = f"executor auto: lfx is installed but {exc}"
        return CoreExecutor(spec, emitter, reason), reason
    except Exception as exc:  # noqa: BLE001 - any import failure means "no lfx path"
        why = f"{type(exc).__name__}: {exc}"
        if mode == "lfx":
            raise lfx_unavailable(why) from None
        reason = f"executor auto: lfx is not usable ({why})"
        return CoreExecutor(spec, emitter, reason), reason
    return module.LfxExecutor(spec, emitter, error_outputs, RunnerFatal), chosen


# -- main ----------------------------------------------------------------------------------


def _warnings(spec: dict, emitter: Emitter) -> None:
    """Notes about parts of the spec that will not do what the caller may expect."""
    graph: Graph = spec["graph"]
    known = {n.id for n in graph.nodes} | {n.name for n in graph.nodes}
    missing = [o for o in spec["outputs"] if o not in known]
    if missing:
        emitter.note(warning="requested outputs match no vertex", outputs=missing)
    for i, entry in enumerate(spec["inputs"]):
        unknown = [c for c in entry["components"] if c not in known]
        if unknown:
            emitter.note(warning="input components match no vertex", input=i, components=unknown)
    frozen = [n.id for n in graph.nodes if n.frozen]
    if frozen:
        emitter.note(warning="frozen vertices are built: a guest has no results cached from "
                     "earlier runs (lfx also builds a frozen vertex on a cache miss)",
                     vertices=frozen)


def main(argv: list) -> int:
    try:
        capture = OutputCapture()
    except BaseException as exc:  # noqa: BLE001 - e.g. fd 1 closed: report on it directly
        line = encode_frame({"t": "fatal", "error": f"runner error: cannot set up stdout capture: "
                             f"{type(exc).__name__}: {exc}", "traceback": ""})
        try:
            _write_all(1, line)
        except OSError:
            pass
        return 1
    emitter = Emitter(capture)
    try:
        if len(argv) != 2:
            raise RunnerFatal("runner: usage: runner.py /workspace/run/spec.json")
        spec = load_spec(argv[1])
        executor, why = choose_executor(spec, argv[1], emitter)
        graph = spec["graph"]
        start = {"runner": "guestflow", "version": RUNNER_VERSION, "executor": executor.name,
                 "reason": why, "python": sys.version.split()[0], "vertices": len(graph.nodes),
                 "edges": len(graph.edges), "runs": max(1, len(spec["inputs"]))}
        if getattr(executor, "lfx_version", None):
            start["lfx_version"] = executor.lfx_version
        if graph.ignored:
            start["ignored"] = list(graph.ignored)
        if graph.groups:
            start["groups"] = list(graph.groups)
        emitter.note(**start)
        _warnings(spec, emitter)
        executor.check()  # a flow the executor cannot run is refused before any vertex runs
        run_outputs = executor.run()
        emitter.outputs(run_outputs)
        emitter.done()
        return 0
    except SpecError as exc:
        emitter.fatal(f"invalid spec: {exc}", code="bad_request")
    except RunnerFatal as exc:
        emitter.fatal(str(exc), exc.tb, exc.code, **exc.extra)
    except BaseException as exc:  # noqa: BLE001 - any runner fault becomes a fatal frame
        emitter.fatal(f"runner error: {type(exc).__name__}: {exc}", traceback.format_exc()[-8000:])
    return 1


def _entry() -> None:
    code = 1
    try:
        code = main(sys.argv)
    except BaseException:  # noqa: BLE001 - even frame writing failed: nothing left to report to
        code = 1
    # os._exit: user threads or grandchildren holding the capture pipe must not keep
    # the runner alive after its last frame.
    os._exit(code)


if __name__ == "__main__":
    _entry()
