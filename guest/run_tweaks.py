"""guestflow guest runner: the spec's tweaks, applied to the graph payload as lfx's
`process_tweaks` (`lfx/processing/process.py`) does (guest/README.md "spec.json").

Apart from run_services.py because most runs have no tweaks: a run imports this only
when it has some (every run compiles what it imports afresh).
"""

from __future__ import annotations

import json

from run_errors import RunnerFatal
from run_services import nodes_of

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
    nodes = nodes_of(graph_raw)
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
