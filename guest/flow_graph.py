"""guestflow guest runner: the graph model (guest/README.md "spec.json", `graph`).

Loads every shape Langflow produces (a bare `{nodes, edges}`, a `Graph.dump()`, an exported
flow file), ignores canvas notes and other non-component nodes, flattens groups the way
Langflow's `process_flow` does, validates ids and edges (a `SpecError` names the field) and
computes a deterministic build order (topological, ties by position in `nodes`).
"""

from __future__ import annotations

import copy
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
