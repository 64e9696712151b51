"""Flow fixtures (copies of examples/flows/*.json) as stand-in lfx Graphs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

_DIR = Path(__file__).resolve().parent / "flows"


def payload(name: str) -> dict[str, Any]:
    return json.loads((_DIR / f"{name}.json").read_text())


def hello_graph():
    from lfx.graph import Graph

    return Graph(payload("hello"))


def sleeping_graph(seconds: float):
    """ChatInput -> Python Interpreter sleeping `seconds` -> Parse -> ChatOutput."""
    from lfx.graph import Graph

    doc = copy.deepcopy(payload("slow"))
    for node in doc.get("data", doc)["nodes"]:
        template = node["data"]["node"]["template"]
        if "python_code" in template:
            template["python_code"]["value"] = f'time.sleep({seconds})\nprint(f"slept for: {{input_value}}")\n'
    return Graph(doc)
