"""Flow fixtures (copies of examples/flows/*.json) as stand-in lfx Graphs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

_DIR = Path(__file__).resolve().parent / "flows"


def payload(name: str) -> dict[str, Any]:
    return json.loads((_DIR / f"{name}.json").read_text())


def graph_of(doc: dict[str, Any]):
    """A stand-in lfx Graph loaded from a flow, as Langflow loads one (``from_payload``)."""
    from lfx.graph import Graph

    from_payload = getattr(Graph, "from_payload", None)
    return from_payload(copy.deepcopy(doc)) if callable(from_payload) else Graph(copy.deepcopy(doc))


def hello_graph():
    return graph_of(payload("hello"))


def sleeping_graph(seconds: float) -> dict[str, Any]:
    """ChatInput -> Python Interpreter sleeping `seconds` -> Parse -> ChatOutput.

    A ``Graph.dump()`` dict, not a Graph: the stand-in lfx loads only its own component
    types, and the executor takes a dump as it is.
    """
    doc = copy.deepcopy(payload("slow"))
    for node in doc.get("data", doc)["nodes"]:
        template = node["data"]["node"]["template"]
        if "python_code" in template:
            template["python_code"]["value"] = f'time.sleep({seconds})\nprint(f"slept for: {{input_value}}")\n'
    return doc


# -- flows built from Langflow's node shape ----------------------------------------------------


def node(node_id: str, node_type: str, display_name: str, fields: dict[str, Any], outputs: list[str],
         *, load_from_db: tuple[str, ...] = ()) -> dict:
    """A vertex as Langflow exports it (``genericNode``: ``data.type``, ``data.node.template``);
    the fields in ``load_from_db`` name a variable, as an API key field does."""
    template = {name: {"value": value, "name": name, "show": True} for name, value in fields.items()}
    for name in load_from_db:
        template[name]["load_from_db"] = True
    template["_type"] = "Component"
    return {
        "id": node_id,
        "type": "genericNode",
        "data": {
            "id": node_id,
            "type": node_type,
            "node": {
                "display_name": display_name,
                "template": template,
                "outputs": [{"name": o, "display_name": o, "types": ["Message"], "method": o} for o in outputs],
            },
        },
    }


def edge(source: str, output: str, target: str, field: str) -> dict:
    return {
        "source": source,
        "target": target,
        "data": {
            "sourceHandle": {"id": source, "name": output, "output_types": ["Message"]},
            "targetHandle": {"id": target, "fieldName": field, "inputTypes": ["Message"], "type": "str"},
        },
    }
