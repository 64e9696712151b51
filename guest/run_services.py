"""guestflow guest runner: what the host ships in besides the graph (guest/README.md).

* **Variables** (`variables.json` beside spec.json, `{"NAME": "VALUE"}`): the run's secrets.
  `take_variables` reads the file and unlinks it before anything else runs;
  `resolve_load_from_db` puts each `load_from_db` field's value in place on the graph
  payload, before either executor sees it. A value is never part of an error text.
* **Tweaks** (`spec.tweaks`): in `run_tweaks.py`, imported only by a run that has some.
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


def nodes_of(graph_raw):
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
    for raw, node in _all_nodes(nodes_of(graph_raw)):
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
    for raw, node in _all_nodes(nodes_of(graph_raw)):
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
