"""guestflow guest runner: the values the core executor passes along edges, in Langflow's shapes.

`Message`, `Data` and `DataFrame` carry what the core components need of lfx's classes of
the same names; `result_data` builds Langflow's ResultData for a built vertex (the `outputs`
frame's entries and each step's `result`).
"""

from __future__ import annotations

import json
import time

from flow_graph import Node
from frame_protocol import jsonable


def _now() -> str:
    """Langflow's message timestamp: `datetime.now(timezone.utc)` as "%Y-%m-%d %H:%M:%S %Z"
    (time, not datetime: importing datetime costs every run about 2 ms)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


class Message:
    """The parts of Langflow's Message that the core components use."""

    __slots__ = ("text", "sender", "sender_name", "session_id", "timestamp", "id", "flow_id",
                 "context_id")

    def __init__(self, text: str, sender=None, sender_name=None, session_id: str = "") -> None:
        self.text = text
        self.sender = sender
        self.sender_name = sender_name
        self.session_id = session_id
        self.timestamp = _now()
        self.id = None  # set when the message is stored (Langflow: the database row's id)
        self.flow_id = None
        self.context_id = ""

    @classmethod
    def from_stored(cls, stored: dict) -> "Message":
        """A message of the session's history (a stored message dict)."""
        def text(key, default=None):
            value = stored.get(key)
            return value if isinstance(value, str) else default

        message = cls(text("text", ""), text("sender"), text("sender_name"),
                      text("session_id", ""))
        message.timestamp = text("timestamp", message.timestamp)
        message.id = text("id")
        message.flow_id = text("flow_id")
        message.context_id = text("context_id", "")
        return message

    def as_data(self) -> dict:
        return {"text": self.text, "sender": self.sender, "sender_name": self.sender_name,
                "session_id": self.session_id}

    def dump(self, node: Node) -> dict:
        return {
            "text_key": "text", "default_value": "", "text": self.text, "sender": self.sender,
            "sender_name": self.sender_name, "files": [], "session_id": self.session_id,
            "timestamp": self.timestamp, "flow_id": self.flow_id, "error": False, "edit": False,
            "properties": {"text_color": "", "background_color": "", "edited": False,
                           "source": {"id": node.id, "display_name": node.name, "source": None},
                           "icon": "", "allow_markdown": False, "positive_feedback": None,
                           "state": "complete", "targets": []},
            "category": "message", "content_blocks": [],
        }

    def store(self, node: Node) -> dict:
        """Gives the message an id (Langflow's stored row has one) and returns the stored dict:
        what the `message` frame carries and the session's history keeps."""
        import uuid  # noqa: PLC0415 - here, not at the top: most runs store nothing

        if self.id is None:
            self.id = str(uuid.uuid4())
        stored = self.dump(node)
        stored["id"] = self.id
        stored["context_id"] = self.context_id
        return stored


class Data:
    """Langflow's Data: a dict payload whose text is data["text"]."""

    __slots__ = ("data",)

    def __init__(self, data: dict) -> None:
        self.data = data

    def dump(self) -> dict:
        return {"text_key": "text", "data": self.data, "default_value": ""}


class DataFrame:
    """Langflow's DataFrame (a pandas DataFrame there): rows of dicts, columns in first-seen order."""

    __slots__ = ("rows",)

    def __init__(self, rows: list) -> None:
        self.rows = rows

    def columns(self) -> list:
        seen: dict = {}
        for row in self.rows:
            for key in row:
                seen.setdefault(key, None)
        return list(seen)

    def markdown(self) -> str:
        """How Langflow reads a DataFrame as text (`to_markdown(index=False)`, a pipe table)."""
        columns = self.columns()
        if not columns:
            return ""
        cells = [["" if row.get(c) is None else str(row.get(c)).replace("\n", " ") for c in columns]
                 for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |",
                 "|" + "|".join(":" + "-" * (w + 1) for w in widths) + "|"]
        lines += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in cells]
        return "\n".join(lines)


def to_text(value) -> str:
    """How ChatOutput/TextOutput/Prompt read a value: Message text, Data as text or JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        return value.text
    if isinstance(value, DataFrame):
        return value.markdown()
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
    if isinstance(value, DataFrame):
        return [dict(row) for row in value.rows]
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return value


def output_log(value) -> dict:
    """Langflow's OutputValue for one output (step `outputs` and ResultData.outputs)."""
    if isinstance(value, DataFrame):
        return {"message": value.rows, "type": "array"}
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
    if isinstance(value, DataFrame):
        return value.rows
    if isinstance(value, list):
        return [_dump_value(v, node) for v in value]
    return value


def _artifact_type(value) -> str:
    if isinstance(value, Message):
        return "message"
    if isinstance(value, Data):
        return "object"
    if isinstance(value, (list, DataFrame)):
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


def type_names(values: dict) -> dict:
    """The class name of each output's value (the step's `types`: Message, Data, DataFrame, str…)."""
    return {name: type(v).__name__ for name, v in values.items()}
