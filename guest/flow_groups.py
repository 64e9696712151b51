"""guestflow guest runner: Langflow's groups flattened for the core executor, as Langflow's
`process_flow` does (guest/README.md "spec.json", `graph`, groups).

Apart from flow_graph.py because few graphs have a group: flow_graph imports this only
when it finds one (every run compiles what it imports afresh).
"""

from __future__ import annotations

import copy

from flow_graph import edge_ends, group_flow, non_component
from run_errors import SpecError


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
        sources = {edge_ends(e)[0] for e, _ in g_edges if isinstance(e, dict)}
        last = next((n["id"] for n, w in g_nodes if isinstance(n, dict) and n.get("id") in members
                     and n["id"] not in sources and non_component(n, w) is None), None)
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


def ungroup(at: int, entries: list, edge_entries: list) -> str:
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
    fdata = copy.deepcopy(group_flow(raw, where))
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
        source, target, src, dst = edge_ends(e)
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
