"""guestflow guest runner: the graph model (guest/README.md "spec.json", `graph`).

Loads every shape Langflow produces (a bare `{nodes, edges}`, a `Graph.dump()`, an exported
flow file), ignores canvas notes and other non-component nodes, flattens groups the way
Langflow's `process_flow` does, validates ids and edges (a `SpecError` names the field) and
computes a deterministic build order (topological, ties by position in `nodes`). The
flattening itself is in `flow_groups.py`, imported only for a graph that has a group.
"""

from __future__ import annotations

import heapq
import json

from run_errors import SpecError

INPUT_TYPES = ("ChatInput", "Webhook", "TextInput")
OUTPUT_TYPES = ("ChatOutput", "DataOutput", "TextOutput")


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


def edge_ends(raw: dict):
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


def non_component(raw: dict, where: str):
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


def group_flow(raw: dict, where: str):
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


def _components_only(nodes: list) -> list:
    """`nodes` without ignored canvas nodes, inside group sub-flows too (for lfx)."""
    out = []
    for raw in nodes:
        if not isinstance(raw, dict) or non_component(raw, "graph") is not None:
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
        # non_component() has checked data, data.type, data.node and data.node.template.
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
        source, target, src_handle, dst_handle = edge_ends(raw)
        for end, vid in (("source", source), ("target", target)):
            if not isinstance(vid, str) or not vid:
                raise SpecError(f"{where}.{end}: required (a vertex id)")
            if vid in ignored:
                raise SpecError(f"{where}.{end}: {vid!r} is {ignored[vid]}, which the runner "
                                "ignores, so this edge dangles")
            if vid not in ids:
                raise SpecError(f"{where}.{end}: unknown vertex {vid!r} (dangling edge)")
        # A handle with `name` is lfx's loop target handle (TargetHandle.from_loop_target_handle):
        # an edge back into one of the target's outputs (a Loop's `item`), its field that name.
        field = dst_handle.get("name") if "name" in dst_handle else dst_handle.get("fieldName")
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
            why = non_component(raw_node, where)
            if why is not None:
                vid = raw_node.get("id")
                self.ignored[vid if isinstance(vid, str) and vid else where] = why
                del entries[i]
                continue
            if group_flow(raw_node, where) is not None:
                from flow_groups import ungroup  # noqa: PLC0415 - only a graph with groups

                self.groups.append(ungroup(i, entries, edge_entries))
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
