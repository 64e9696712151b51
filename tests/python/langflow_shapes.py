"""Builders for graphs in the shape Langflow exports them (no tests here).

Components are `genericNode`s with `data.type`, `data.node.template` (`_type: Component`)
and `data.node.outputs`; edges carry `data.sourceHandle`/`data.targetHandle` objects and the
œ-quoted strings beside them; canvas notes are `noteNode`s whose template holds only
`backgroundColor`; a group is a `genericNode` whose `data.node.flow` holds the grouped
sub-flow, with proxied template fields (`<field>_<inner id>`) and outputs
(`<inner id>_<output>`), the way Langflow's frontend builds one.
"""

from __future__ import annotations

import json


def component(vid: str, vtype: str, display_name: str, fields=None, outputs=("text",),
              **node_extra) -> dict:
    template = {"_type": "Component"}
    for name, value in (fields or {}).items():
        template[name] = {"name": name, "display_name": name, "type": "str", "value": value,
                          "show": True, "advanced": False, "list": False}
    return {
        "id": vid, "type": "genericNode", "position": {"x": 0, "y": 0},
        "data": {"id": vid, "type": vtype, "showNode": True, "node": {
            "display_name": display_name, "description": "", "template": template,
            "outputs": [{"name": o, "display_name": o, "types": ["Message"], "selected": "Message",
                         "method": "build", "cache": True} for o in outputs],
            "base_classes": ["Message"], "frozen": False, **node_extra}},
    }


def chat_input(vid: str = "ChatInput-in1", value: str = "", name: str = "Chat Input") -> dict:
    return component(vid, "ChatInput", name, {"input_value": value, "sender": "User",
                                              "sender_name": "User", "session_id": ""}, ("message",))


def chat_output(vid: str = "ChatOutput-out1", name: str = "Chat Output") -> dict:
    return component(vid, "ChatOutput", name, {"input_value": "", "sender": "Machine",
                                               "sender_name": "AI", "session_id": ""}, ("message",))


def prompt(vid: str, template: str, display_name: str = "Prompt", **variables) -> dict:
    return component(vid, "Prompt", display_name, {"template": template, **variables}, ("prompt",))


def uppercase(vid: str, name: str = "Uppercase") -> dict:
    return component(vid, "Uppercase", name, {"input_value": ""})


def sleep(vid: str, seconds: float, name: str = "Sleep") -> dict:
    return component(vid, "Sleep", name, {"input_value": "", "seconds": seconds})


def raising(vid: str, message: str, name: str = "Raise") -> dict:
    return component(vid, "Raise", name, {"input_value": "", "message": message})


def python_code(vid: str, code: str, name: str = "Python Interpreter") -> dict:
    return component(vid, "PythonREPLComponent", name, {"python_code": code, "global_imports": ""},
                     ("results",))


def note(vid: str, text: str = "A canvas note") -> dict:
    return {"id": vid, "type": "noteNode", "position": {"x": 0, "y": 0},
            "data": {"id": vid, "type": "note", "node": {
                "description": text, "display_name": "", "documentation": "",
                "template": {"backgroundColor": "amber"}}}}


def _quoted(handle: dict) -> str:
    return json.dumps(handle).replace('"', "œ")


def edge(source: str, output: str, target: str, field: str, *, proxy=None,
         target_field=None) -> dict:
    src = {"dataType": source.split("-")[0], "id": source, "name": output, "output_types": ["Message"]}
    dst = {"fieldName": target_field or field, "id": target, "inputTypes": ["Message"], "type": "str"}
    if proxy is not None:
        dst["proxy"] = proxy
    return {"id": f"reactflow__edge-{source}{_quoted(src)}-{target}{_quoted(dst)}",
            "source": source, "target": target,
            "sourceHandle": _quoted(src), "targetHandle": _quoted(dst),
            "data": {"sourceHandle": src, "targetHandle": dst}}


def chain(*nodes: dict) -> list:
    """Edges n0 -> n1 -> ... (first output into input_value)."""
    out = []
    for a, b in zip(nodes, nodes[1:]):
        out.append(edge(a["id"], a["data"]["node"]["outputs"][0]["name"], b["id"], "input_value"))
    return out


def group(gid: str, nodes: list, edges: list, *, fields=(), outputs=(), display_name="Group",
          frozen: bool = False) -> dict:
    """A group node: `fields` are (inner id, field, value) proxied inputs, `outputs` are
    (inner id, output name) proxied outputs. data.type is the last node's type, as Langflow's
    frontend sets it."""
    template = {}
    for inner, field, value in fields:
        template[f"{field}_{inner}"] = {"name": field, "display_name": field, "type": "str",
                                       "value": value, "show": True, "advanced": False,
                                       "proxy": {"id": inner, "field": field}}
    outs = [{"name": f"{inner}_{name}", "display_name": name, "types": ["Message"],
             "selected": "Message", "proxy": {"id": inner, "name": name}} for inner, name in outputs]
    return {"id": gid, "type": "genericNode", "position": {"x": 0, "y": 0},
            "data": {"id": gid, "type": nodes[-1]["data"]["type"], "node": {
                "display_name": display_name, "description": "", "template": template,
                "outputs": outs, "frozen": frozen,
                "flow": {"name": display_name, "description": "",
                         "data": {"nodes": nodes, "edges": edges}}}}}


def into_group(source: str, output: str, gid: str, inner: str, field: str) -> dict:
    """An edge into a group's proxied field `<field>_<inner>`."""
    return edge(source, output, gid, field, target_field=f"{field}_{inner}",
                proxy={"id": inner, "field": field})


def graph(nodes: list, edges: list) -> dict:
    return {"nodes": nodes, "edges": edges}
