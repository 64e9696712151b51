"""Flows of V vertices for the flow farm, and the frames their runner prints.

Built from examples/flows/prompt.json (Chat Input -> Prompt -> Chat Output): V = 1 is the
Chat Input alone; V >= 2 is Chat Input -> (V - 2) Prompts in a chain -> Chat Output, each
Prompt taking the previous vertex's message as its `name`. The same graphs run on real
guests with the core executor. The canned frames are what the guest runner prints for
such a flow (one vertex_start and one step frame per vertex, the outputs, done), for the
simulated control plane's `--simulate-exec-stdout`.
"""

import copy
import json
import os

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "examples", "flows", "prompt.json")


def _handle(d):
    # Langflow's escaped handle strings: JSON with the quote as U+0153 ("œ").
    return json.dumps(d, separators=(", ", ": ")).replace('"', "\u0153")


def _edge(src_node, src_type, src_out, dst_id, field, input_types):
    sh = {"dataType": src_type, "id": src_node, "name": src_out, "output_types": ["Message"]}
    th = {"fieldName": field, "id": dst_id, "inputTypes": input_types, "type": "str"}
    return {"animated": False, "className": "", "data": {"sourceHandle": sh, "targetHandle": th},
            "id": "reactflow__edge-%s-%s-%s" % (src_node, dst_id, field), "selected": False,
            "source": src_node, "sourceHandle": _handle(sh), "target": dst_id,
            "targetHandle": _handle(th)}


CODE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "guest",
                           "runner.py")


def make_flow(vertices, code_bytes=0):
    """The Langflow export of a V-vertex chain (dict). With `code_bytes`, every node's
    template also carries a `code` entry of that many bytes of Python source, as Langflow's
    own exports carry each component's class (prompt.json has them stripped)."""
    if vertices < 1:
        raise ValueError("a flow has at least one vertex")
    with open(SOURCE) as f:
        base = json.load(f)
    by_type = {n["data"]["type"]: n for n in base["data"]["nodes"]}
    chat_in, prompt, chat_out = by_type["ChatInput"], by_type["Prompt"], by_type["ChatOutput"]
    nodes, edges = [copy.deepcopy(chat_in)], []
    if vertices >= 2:
        prev, prev_type, prev_out = chat_in["id"], "ChatInput", "message"
        for i in range(vertices - 2):
            p = copy.deepcopy(prompt)
            pid = "Prompt-v%03d" % i
            p["id"] = p["data"]["id"] = pid
            p["position"] = {"x": 450 * (i + 1), "y": 0}
            nodes.append(p)
            edges.append(_edge(prev, prev_type, prev_out, pid, "name", ["Message"]))
            prev, prev_type, prev_out = pid, "Prompt", "prompt"
        out = copy.deepcopy(chat_out)
        nodes.append(out)
        edges.append(_edge(prev, prev_type, prev_out, out["id"], "input_value",
                           ["Data", "DataFrame", "Message"]))
    if code_bytes:
        with open(CODE_SOURCE) as f:
            source = f.read()
        code = (source * (code_bytes // len(source) + 1))[:code_bytes]
        for n in nodes:
            n["data"]["node"]["template"]["code"] = {
                "advanced": True, "dynamic": True, "fileTypes": [], "file_path": "",
                "info": "", "list": False, "load_from_db": False, "multiline": True,
                "name": "code", "password": False, "placeholder": "", "required": True,
                "show": True, "title_case": False, "type": "code", "value": code}
    flow = {k: v for k, v in base.items() if k != "data"}
    flow["name"] = "flowfarm-%d" % vertices
    flow["data"] = {"nodes": nodes, "edges": edges, "viewport": base["data"].get("viewport", {})}
    return flow


def make_frames(flow):
    """The runner's NDJSON frames for `flow` (str), as prompt_frames.ndjson has them."""
    nodes = flow["data"]["nodes"]
    lines = [{"t": "note", "runner": "guestflow", "version": 1, "executor": "core",
              "reason": "simulated", "python": "3.11.7", "vertices": len(nodes),
              "edges": len(flow["data"]["edges"]), "runs": 1}]
    text = "hello"
    for n in nodes:
        vid, name = n["id"], n["data"]["node"]["display_name"]
        if n["data"]["type"] == "Prompt":
            text = "Say hello to %s in French." % text
        lines.append({"t": "vertex_start", "id": vid, "name": name})
        lines.append({"t": "step", "event": {
            "type": "vertex", "id": vid, "name": name, "valid": True, "duration_ms": 0,
            "outputs": {"message": {"message": text, "type": "text"}}, "logs": ""}})
    last = nodes[-1]["id"]
    lines.append({"t": "outputs", "run_outputs": [{"inputs": {"input_value": "hello"},
                  "outputs": [{"results": {"message": {"text": text, "sender": "Machine"}},
                               "component_id": last}]}]})
    lines.append({"t": "done"})
    return "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)


def write(directory, vertices, code_bytes=0):
    """Writes flow-V.json (flow-V-code.json with `code_bytes`) and frames-V.ndjson under
    `directory`; returns both paths."""
    flow = make_flow(vertices, code_bytes)
    fp = os.path.join(directory, "flow-%d%s.json" % (vertices, "-code" if code_bytes else ""))
    rp = os.path.join(directory, "frames-%d.ndjson" % vertices)
    with open(fp, "w") as f:
        json.dump(flow, f)
    with open(rp, "w") as f:
        f.write(make_frames(flow))
    return fp, rp
