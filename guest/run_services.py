"""guestflow guest runner: what the host ships in besides the graph (guest/README.md).

* **Variables** (`variables.json` beside spec.json, `{"NAME": "VALUE"}`): the run's secrets.
  `take_variables` reads the file and unlinks it before anything else runs;
  `resolve_load_from_db` puts each `load_from_db` field's value in place on the graph
  payload, before either executor sees it. A value is never part of an error text.
* **Tweaks** (`spec.tweaks`): applied to the payload as lfx's `process_tweaks` does.
* **Session** (`spec.session_id`): set on every vertex with a `session_id` field, as
  `Graph._run` does before it builds anything.
* **History** (`spec.history`): the session's messages, oldest first; memory components
  read it and messages stored during the run are appended to it.
"""

from __future__ import annotations

import json
import os

from run_errors import RunnerFatal

VARIABLES_FILE = "variables.json"

# lfx/utils/flow_validation.py: fields a tweak never overrides, in every tweak policy.
CODE_EXECUTION_COMPONENT_TYPES = frozenset({
    "CSVAgent", "CodeAct Agent (Smolagents)", "CodeActAgentSmolagents", "Cuga",
    "LambdaFilterComponent", "OpenDsStar Agent", "OpenDsStarAgent", "Python Code Structured",
    "PythonCodeStructuredTool", "Python Function", "PythonFunction", "PythonFunctionComponent",
    "Python Interpreter", "PythonREPLComponent", "Python REPL", "PythonREPLToolComponent",
    "PythonREPLTool", "Smart Transform"})
CODE_EXECUTION_FIELD_NAMES = frozenset({
    "allow_dangerous_code", "function_code", "python_code", "tool_code", "filter_instruction",
    "global_imports"})
PROTECTED_TWEAK_FIELDS_BY_COMPONENT = {"SQLComponent": frozenset({"database_url", "query"})}


# -- variables ---------------------------------------------------------------------------------


def take_variables(spec_path: str):
    """(values, error): variables.json beside `spec_path`, read and unlinked.

    The file is unlinked whatever it holds, before the runner does anything else, so no
    user code, lfx import or later fault can find it. `error` (None when the file is fine
    or absent) names what is wrong without quoting the file: a value must never show.
    """
    path = os.path.join(os.path.dirname(os.path.abspath(spec_path)), VARIABLES_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"cannot read {VARIABLES_FILE}: {exc.strerror or type(exc).__name__}"
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    try:
        values = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}, f"{VARIABLES_FILE}: not a UTF-8 JSON object"  # no position: it points at a value
    if not isinstance(values, dict):
        return {}, f"{VARIABLES_FILE}: expected an object of names to string values"
    bad = sorted(k for k, v in values.items() if not isinstance(v, str))
    if bad:
        return {}, (f"{VARIABLES_FILE}: the value of {', '.join(repr(k) for k in bad[:10])} "
                    "is not a string")
    return values, None


def _nodes_of(graph_raw):
    """The node list of a graph payload in any of Langflow's shapes (None when absent)."""
    if not isinstance(graph_raw, dict):
        return None
    if "nodes" not in graph_raw and isinstance(graph_raw.get("data"), dict):
        graph_raw = graph_raw["data"]
    nodes = graph_raw.get("nodes")
    return nodes if isinstance(nodes, list) else None


def _all_nodes(nodes):
    """Every node dict with a template, inside group sub-flows too (the vertices lfx builds)."""
    for raw in nodes or []:
        if not isinstance(raw, dict):
            continue
        data = raw.get("data")
        node = data.get("node") if isinstance(data, dict) else None
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("template"), dict):
            yield raw, node
        flow = node.get("flow")
        inner = flow.get("data") if isinstance(flow, dict) else None
        if isinstance(inner, dict):
            yield from _all_nodes(inner.get("nodes") if isinstance(inner.get("nodes"), list) else [])


def resolve_load_from_db(graph_raw, variables: dict) -> list:
    """Puts variable values into the `load_from_db` fields of `graph_raw` (in place).

    A field with `load_from_db: true` whose value is a non-empty variable name gets the
    variable's value and `load_from_db: false` (so lfx does not look it up again). Returns
    the (vertex id, field) pairs resolved; raises RunnerFatal (bad_request) naming every
    variable that is not set, its vertex and field, and never a value.
    """
    resolved, missing = [], []
    for raw, node in _all_nodes(_nodes_of(graph_raw)):
        for field, entry in node["template"].items():
            if not isinstance(entry, dict) or entry.get("load_from_db") is not True:
                continue
            name = entry.get("value")
            if not isinstance(name, str) or not name.strip():
                continue  # nothing to look up (Langflow skips it too)
            if name not in variables:
                shown = node.get("display_name") or raw.get("id") or "?"
                missing.append(f"variable {name!r} (vertex {shown}, field {field}) is not set")
                continue
            entry["value"] = variables[name]
            entry["load_from_db"] = False
            resolved.append((raw.get("id"), field))
    if missing:
        raise RunnerFatal("; ".join(missing) + "; pass it with `guestflow run --var NAME=VALUE` "
                          "(or --var-from-env NAME), in the run's `variables` (bridge), or as a "
                          "Langflow global variable of the run's user", code="bad_request")
    return resolved


# -- tweaks ------------------------------------------------------------------------------------


def _protected(component_type, field: str, field_type) -> bool:
    """lfx's is_protected_tweak_field: code fields keep the flow author's value."""
    return (field_type == "code" or field == "code"
            or (component_type in CODE_EXECUTION_COMPONENT_TYPES
                and field in CODE_EXECUTION_FIELD_NAMES)
            or field in PROTECTED_TWEAK_FIELDS_BY_COMPONENT.get(component_type or "", ()))


def _tweak_node(raw: dict, node_tweaks: dict, refused: list) -> None:
    """lfx's apply_tweaks for one node (permissive policy: the guest has no settings)."""
    data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    node = data.get("node") if isinstance(data.get("node"), dict) else {}
    template = node.get("template")
    if not isinstance(template, dict):
        return
    for name, value in node_tweaks.items():
        if name not in template:
            continue  # a field the template does not declare is skipped, as in lfx
        entry = template[name]
        if not isinstance(entry, dict):
            entry = template[name] = {"value": entry}
        field_type = entry.get("type", "")
        if _protected(data.get("type"), name, field_type):
            refused.append(name)
            continue
        if field_type == "NestedDict":
            if isinstance(value, str):  # lfx repairs JSON text; the guest parses valid JSON only
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            entry["value"] = value
        elif field_type == "mcp":
            entry["value"] = value
        elif field_type == "dict" and isinstance(value, dict):
            entry["value"] = value["value"] if len(value) == 1 and "value" in value else value
        elif isinstance(value, dict):
            for key, item in value.items():
                entry["file_path" if field_type == "file" else key] = item
            if "load_from_db" not in value and "load_from_db" in entry:
                entry["load_from_db"] = False
        else:
            entry["file_path" if field_type == "file" else "value"] = value
            if "load_from_db" in entry:
                entry["load_from_db"] = False


def apply_tweaks(graph_raw, tweaks: dict) -> None:
    """lfx's process_tweaks on the payload, in place, before anything builds.

    A key naming a vertex id (else a display name) with an object value tweaks that vertex;
    any other value tweaks that field on every vertex that has it. A tweak of a protected
    field (code, python_code, global_imports, ... as lfx's flow_validation lists them) is
    refused: RunnerFatal bad_request with lfx's TweakRefusedError text. Unlike lfx's API
    layer the guest does not add `stream` (the host already tweaked its graph for that).
    """
    nodes = _nodes_of(graph_raw)
    if not tweaks or nodes is None:
        return
    by_id, by_name = {}, {}
    for raw in nodes:
        if not isinstance(raw, dict):
            continue
        by_id[raw.get("id")] = raw  # as lfx's dict comprehensions: the last one wins
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        node = data.get("node") if isinstance(data.get("node"), dict) else {}
        by_name[node.get("display_name")] = raw
    refused: list = []
    for_all = {}
    for key, value in tweaks.items():
        if isinstance(value, dict):
            target = by_id.get(key) or by_name.get(key)
            if target is not None:
                _tweak_node(target, value, refused)
        else:
            for_all[key] = value
    if for_all:
        for raw in nodes:
            if isinstance(raw, dict):
                _tweak_node(raw, for_all, refused)
    if refused:
        raise RunnerFatal(f"Refused tweak keys {sorted(set(refused))}: The field is protected and "
                          "keeps the value set by the flow author.", code="bad_request")


# -- session -----------------------------------------------------------------------------------


def set_session_id(graph_raw, session_id: str) -> list:
    """Graph._run: every vertex with a `session_id` field gets the run's session id.

    Only when the run has one: Langflow's own run always has one (the flow id when the
    caller gives none), while a guest run without it keeps the flow's values. Returns the
    ids of the vertices set.
    """
    if not session_id:
        return []
    done = []
    for raw, node in _all_nodes(_nodes_of(graph_raw)):
        entry = node["template"].get("session_id")
        if entry is None:
            continue
        if isinstance(entry, dict):
            entry["value"] = session_id
        else:
            node["template"]["session_id"] = session_id
        done.append(raw.get("id"))
    return done


# -- history -----------------------------------------------------------------------------------


def truthy(value) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


class History:
    """The session's messages (dicts as Langflow stores them), oldest first.

    `messages` starts with spec.history; `store` appends what the run stores, so a memory
    component built after a Chat Input sees that input, as it does in Langflow.
    """

    def __init__(self, shipped: list) -> None:
        self.messages = list(shipped)

    def store(self, message: dict) -> None:
        self.messages.append(message)

    def retrieve(self, *, sender=None, sender_name=None, session_id=None, limit=None,
                 order="ASC") -> list:
        """Langflow's aget_messages: error messages left out, each filter applied when set,
        ordered by time (the shipped order) ascending or descending, then `limit`."""
        found = [m for m in self.messages
                 if not truthy(m.get("error"))
                 and (not sender or m.get("sender") == sender)
                 and (not sender_name or m.get("sender_name") == sender_name)
                 and (not session_id or m.get("session_id") == session_id)]
        if order == "DESC":
            found.reverse()
        return found[:limit] if limit else found
