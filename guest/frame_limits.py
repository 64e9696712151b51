"""guestflow guest runner: a frame that does not fit in FRAME_MAX bytes (guest/README.md
"Frames"), made to fit: long strings clipped around a marker, else the frame's minimal form.

Apart from frame_protocol.py because few runs ever make such a frame: `encode_frame`
imports this only then (every run compiles what it imports afresh).
"""

from __future__ import annotations

from frame_protocol import FRAME_MAX, frame_line
from run_errors import RunnerFatal


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


def _minimal(frame: dict) -> dict:
    """Last resort for a frame that stays too large after clipping every string."""
    kind = frame.get("t")
    if kind == "step":
        ev = frame["event"]
        return {"t": "step", "event": {
            "type": "vertex", "id": ev.get("id", ""), "name": ev.get("name", ""),
            "valid": ev.get("valid", False), "duration_ms": ev.get("duration_ms", 0),
            "outputs": {}, "logs": "[guestflow: step frame too large; outputs and logs dropped]",
            **({"error": _clip(ev["error"], 1024)} if "error" in ev else {})}}
    if kind == "outputs":
        runs = []
        for run in frame.get("run_outputs", []):
            outs = [None if r is None else {
                "component_id": r.get("component_id", ""),
                "component_display_name": r.get("component_display_name", ""),
                "results": {}, "artifacts": {}, "outputs": {}, "logs": {}, "messages": [],
                "used_frozen_result": False} for r in run.get("outputs", [])]
            runs.append({"inputs": _clip(run.get("inputs", {}), 256), "outputs": outs})
        return {"t": "outputs", "run_outputs": runs}
    if kind == "fatal":
        out = {"t": "fatal", "error": _clip(str(frame.get("error", "")), 4096), "traceback": ""}
        if isinstance(frame.get("code"), str):
            out["code"] = frame["code"]
        return out
    if kind in ("token", "message"):  # the host relays these: keep who and which message
        data = frame.get("data") if isinstance(frame.get("data"), dict) else {}
        kept = {k: _clip(data[k], 64) for k in ("id", "session_id", "sender", "sender_name")
                if isinstance(data.get(k), str)}
        marker = "[guestflow: frame too large]"
        kept["chunk" if kind == "token" else "text"] = marker
        return {"t": kind, "id": frame.get("id", ""), "data": kept}
    if kind == "state":
        return {"t": "state", "context": {}}
    return {"t": kind or "note", "error": "[guestflow: frame too large]"}


def _fits(frame: dict):
    """`frame`'s line when it fits, else the line with its strings clipped, else None."""
    line = frame_line(frame)
    if len(line) <= FRAME_MAX:
        return line
    longest = _longest(frame)
    for limit in (256 << 10, 64 << 10, 16 << 10, 4096, 1024, 256, 64):
        if limit >= longest:
            continue  # clipping at this limit would change nothing
        line = frame_line(_clip(frame, limit))
        if len(line) <= FRAME_MAX:
            return line
    return None


def fit(frame: dict) -> bytes:
    """The line of `frame` (JSON-safe and masked already), which is longer than FRAME_MAX,
    with its strings clipped; a step's `result` repeats what its `outputs` and `logs` say,
    so it is clipped first (the step's own fields stay whole as long as that is enough)."""
    if frame.get("t") == "step":
        event = frame.get("event") if isinstance(frame.get("event"), dict) else {}
        if "result" in event:
            without = {**event}
            result = without.pop("result")
            rest = len(frame_line({**frame, "event": {**without, "result": None}}))
            if rest <= FRAME_MAX:
                for limit in (64 << 10, 16 << 10, 4096, 1024, 256, 64):
                    clipped = {**frame, "event": {**event, "result": _clip(result, limit)}}
                    line = frame_line(clipped)
                    if len(line) <= FRAME_MAX:
                        return line
    line = _fits(frame)
    if line is not None:
        return line
    line = frame_line(_minimal(frame))
    if len(line) <= FRAME_MAX:
        return line
    raise RunnerFatal(f"a {frame.get('t')!r} frame stays larger than {FRAME_MAX} bytes")
