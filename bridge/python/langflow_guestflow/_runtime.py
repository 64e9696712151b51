"""The run state that lives on an lfx Graph object and must cross into the guest.

``Graph.dump()`` is the flow as loaded (``raw_graph_data``); a Langflow run keeps the rest on
the graph object: ``session_id``, ``user_id``, ``context`` (request variables), values set
on vertices after load with ``Vertex.update_raw_params`` (the Loop's item, inputs), and the
user's variables behind every ``load_from_db`` field (``interface/initialize/loading.py``:
``update_params_with_load_from_db_fields``). This module reads them on the host:

* :func:`tweaks` -- each vertex's ``raw_params`` against the dump's template values; what
  differs is sent as Langflow tweaks (``{vertex id: {field: value}}``).
* :func:`resolve_variables` -- the value of every ``load_from_db`` field for the run's
  user, the way lfx resolves it in process (the graph context's ``request_variables``, then
  Langflow's variable service, then the environment with ``fallback_to_env_vars`` or when
  Langflow has no database), plus every name of ``GUESTFLOW_EXECUTOR_ENV``. A variable that
  resolves to nothing fails the run before it starts, naming it -- never a value.
* :func:`history` / :class:`MessageStore` -- the session's messages through Langflow's
  memory API (``lfx.memory``: ``aget_messages``, ``astore_message``, ``aupdate_messages``).

Secrets travel only in the request's ``variables``; nothing here logs a value.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import uuid
from typing import Any

logger = logging.getLogger(__name__)

ENV_NAMES = "GUESTFLOW_EXECUTOR_ENV"
MASK = "********"
MIN_SECRET_BYTES = 4
# lfx's value classes a guest can rebuild from their JSON (the `types` of the run events).
LFX_VALUE_TYPES = ("Message", "Data", "DataFrame")
_JSON_SCALARS = (str, int, float, bool, type(None))
# The component source and lfx's CODE_EXECUTION_FIELD_NAMES (utils/flow_validation.py): a
# tweak of one is refused, so a value read back from raw_params is never sent for them.
PROTECTED_FIELDS = frozenset({
    "code", "allow_dangerous_code", "function_code", "python_code", "tool_code", "filter_instruction",
    "global_imports"})


class VariableError(ValueError):
    """A variable the run needs is not set (the message names it, never a value)."""


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON (pydantic models dumped), or raise TypeError/ValueError."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        with contextlib.suppress(TypeError):
            return dump(mode="json")
        return dump()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    iso = getattr(value, "isoformat", None)
    if callable(iso):
        return iso()
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def nodes_of(dump: Any) -> list[dict[str, Any]]:
    data = dump.get("data", dump) if isinstance(dump, dict) else {}
    nodes = data.get("nodes") if isinstance(data, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def _edges_of(dump: Any) -> list[dict[str, Any]]:
    data = dump.get("data", dump) if isinstance(dump, dict) else {}
    edges = data.get("edges") if isinstance(data, dict) else None
    return [e for e in edges if isinstance(e, dict)] if isinstance(edges, list) else []


def _template(node: dict[str, Any]) -> dict[str, Any]:
    data = node.get("data") if isinstance(node.get("data"), dict) else {}
    info = data.get("node") if isinstance(data.get("node"), dict) else {}
    template = info.get("template")
    return template if isinstance(template, dict) else {}


def display_name(node: dict[str, Any]) -> str:
    data = node.get("data") if isinstance(node.get("data"), dict) else {}
    info = data.get("node") if isinstance(data.get("node"), dict) else {}
    return str(info.get("display_name") or data.get("id") or node.get("id") or "?")


def node_id(node: dict[str, Any]) -> str:
    data = node.get("data") if isinstance(node.get("data"), dict) else {}
    return str(node.get("id") or data.get("id") or "")


def _vertices(graph: Any) -> dict[str, Any]:
    vertex_map = getattr(graph, "vertex_map", None)
    if isinstance(vertex_map, dict):
        return vertex_map
    vertices = getattr(graph, "vertices", None)
    if isinstance(vertices, list):
        return {str(getattr(v, "id", "")): v for v in vertices}
    return {}


# -- session, user, context --------------------------------------------------------------


def session_id(graph: Any, opts: dict[str, Any]) -> str | None:
    for value in (opts.get("session_id"), getattr(graph, "session_id", None)):
        if value:
            return str(value)
    return None


def user_id(graph: Any) -> str | None:
    value = getattr(graph, "user_id", None)
    return str(value) if value else None


def request_variables(graph: Any) -> dict[str, str]:
    """The graph context's ``request_variables`` (Component.get_variable reads them first)."""
    context = getattr(graph, "context", None)
    found = context.get("request_variables") if isinstance(context, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str)}


def context(graph: Any) -> dict[str, Any] | None:
    """The JSON-able entries of ``graph.context``; ``request_variables`` travel as secrets."""
    raw = getattr(graph, "context", None)
    if not isinstance(raw, dict) or not raw:
        return None
    out = {}
    for key, value in raw.items():
        if key == "request_variables":
            continue
        try:
            out[str(key)] = jsonable(value)
        except (TypeError, ValueError):
            logger.debug("guestflow: graph.context[%r] is not JSON; not sent", key)
    return out or None


def apply_context(graph: Any, returned: Any, sent: dict[str, Any] | None) -> None:
    """What the guest set on its graph's context, set on the host graph's.

    The guest returns its whole context as JSON; an entry equal to what was sent is the
    host's own value round-tripped (a Loop's ``Data`` list would come back as dicts), so
    only the entries the guest added or changed are set.
    """
    if not isinstance(returned, dict) or not returned or isinstance(graph, (dict, str, bytes)):
        return
    sent = sent or {}
    changed = {k: v for k, v in returned.items() if k not in sent or sent[k] != v}
    if not changed:
        return
    current = getattr(graph, "context", None)
    merged = dict(current) if isinstance(current, dict) else {}
    merged.update(changed)
    try:
        graph.context = merged
    except (AttributeError, TypeError):
        if isinstance(current, dict):
            current.update(changed)


# -- tweaks ------------------------------------------------------------------------------


def tweaks(graph: Any, dump: Any) -> dict[str, dict[str, Any]]:
    """Values set on the host graph's vertices after load, as Langflow tweaks by vertex id.

    A field counts when the vertex's ``raw_params`` holds a JSON value that differs from the
    dump's template value; fields fed by an edge (their raw param is the upstream result),
    the component's ``code`` and the fields lfx never lets a tweak override
    (``utils/flow_validation.py``: ``python_code``, ``global_imports``…) never do -- the
    flow author's value of those is in the dump.
    """
    vertices = _vertices(graph)
    if not vertices:
        return {}
    fed: dict[str, set[str]] = {}
    for edge in _edges_of(dump):
        handle = (edge.get("data") or {}).get("targetHandle") if isinstance(edge.get("data"), dict) else None
        target = edge.get("target")
        if isinstance(handle, dict) and isinstance(target, str):
            fed.setdefault(target, set()).add(str(handle.get("fieldName") or ""))
    out: dict[str, dict[str, Any]] = {}
    for node in nodes_of(dump):
        vid = node_id(node)
        raw = getattr(vertices.get(vid), "raw_params", None)
        if not isinstance(raw, dict):
            continue
        template = _template(node)
        changed = {}
        for field, value in raw.items():
            spec = template.get(field)
            if field in PROTECTED_FIELDS or field in fed.get(vid, ()) or not isinstance(spec, dict):
                continue
            if type(value) in _JSON_SCALARS and value == spec.get("value"):
                continue  # the common case, without a JSON round trip
            value_type = type(value).__name__ if type(value).__name__ in LFX_VALUE_TYPES else None
            try:
                value = jsonable(value)
            except (TypeError, ValueError):
                continue
            if value != spec.get("value"):
                changed[field] = _tweak_value(spec, value, value_type)
        if changed:
            out[vid] = changed
    return out


def _tweak_value(spec: dict[str, Any], value: Any, value_type: str | None) -> Any:
    """``value`` as lfx's apply_tweaks sets it on a field of this template entry.

    apply_tweaks reads a dict tweak as the field's attributes (``{"value": …}``) except for a
    ``NestedDict`` or ``mcp`` field, and a plain tweak turns ``load_from_db`` off: a dict
    value is wrapped, and a ``load_from_db`` field stays one (its value names a variable).
    An lfx object (a Loop's ``Data`` item) goes as its JSON with its class name beside it
    (``value_type``, as the run events' ``types`` name built values), for the guest to
    rebuild it.
    """
    if spec.get("type") in ("NestedDict", "mcp"):
        return value
    if spec.get("load_from_db"):
        return {"value": value, "load_from_db": True}
    if value_type is not None:
        return {"value": value, "value_type": value_type}
    if isinstance(value, dict):
        return {"value": value}
    return value


# -- variables ---------------------------------------------------------------------------


def _load_from_db_fields(graph: Any, dump: Any):
    """(variable name, vertex display name, field) of every load_from_db field with a name."""
    vertices = _vertices(graph)
    for node in nodes_of(dump):
        vid = node_id(node)
        raw = getattr(vertices.get(vid), "raw_params", None)
        for field, spec in _template(node).items():
            if not isinstance(spec, dict) or not spec.get("load_from_db"):
                continue
            name = spec.get("value")
            if isinstance(raw, dict) and field in raw:
                name = raw[field]  # what update_params_with_load_from_db_fields reads
            if isinstance(name, str) and name.strip():
                yield name, display_name(node), field


def env_names() -> list[str]:
    raw = os.environ.get(ENV_NAMES, "")
    return [n.strip() for n in raw.split(",") if n.strip()]


class _VariableSource:
    """Langflow's variable lookup for one user, as update_params_with_load_from_db_fields does it."""

    def __init__(self, user: str | None, *, fallback_to_env_vars: bool) -> None:
        self.user = user
        self.fallback = fallback_to_env_vars

    async def __call__(self, name: str, field: str) -> tuple[str | None, str]:
        """(value or None, why not)."""
        try:
            from lfx.services.deps import get_variable_service, session_scope
        except ImportError:
            # No Langflow services: lfx then reads the environment (its NoopSession path).
            return os.environ.get(name) or None, "not in the environment"
        async with session_scope() as session:
            if _is_noop(session):
                return os.environ.get(name) or None, "not in the environment (Langflow has no database)"
            value = None
            why = "not found for the run's user"
            service = get_variable_service()
            if service is None:
                why = "Langflow's variable service is not available"
            elif not self.user:
                why = "the run has no user id (graph.user_id)"
            else:
                try:
                    user = uuid.UUID(self.user) if isinstance(self.user, str) else self.user
                except ValueError:
                    user = self.user
                try:
                    value = await _maybe_await(
                        service.get_variable(user_id=user, name=name, field=field, session=session)
                    )
                except ValueError:
                    value = None  # lfx's VariableNotFoundError, "variable not found."
            if value is None and self.fallback:
                value = os.environ.get(name) or None
                why += " (nor in the environment)"
            return (str(value) if value is not None else None), why


def _is_noop(session: Any) -> bool:
    if type(session).__name__ == "NoopSession":
        return True
    with contextlib.suppress(Exception):
        from lfx.services.deps import get_settings_service

        settings = getattr(get_settings_service(), "settings", None)
        return bool(getattr(settings, "use_noop_database", False))
    return False


async def resolve_variables(
    graph: Any, dump: Any, *, fallback_to_env_vars: bool
) -> dict[str, str]:
    """Every variable the run needs, by name. Raises VariableError naming a missing one."""
    out: dict[str, str] = {}
    requested = request_variables(graph)
    source = _VariableSource(user_id(graph), fallback_to_env_vars=fallback_to_env_vars)
    for name, vertex_name, field in _load_from_db_fields(graph, dump):
        if name in out:
            continue
        if name in requested:
            out[name] = requested[name]
            continue
        value, why = await source(name, field)
        if value is None:
            msg = (
                f"variable '{name}' (vertex {vertex_name}, field {field}) is not set: {why}; "
                f"add it to the user's Langflow variables, or set it in the worker's environment "
                f"and list it in {ENV_NAMES}"
            )
            raise VariableError(msg)
        out[name] = value
    for name in env_names():
        value = os.environ.get(name)
        if value is None:
            msg = f"variable '{name}' is listed in {ENV_NAMES} but not set in the worker's environment"
            raise VariableError(msg)
        out.setdefault(name, value)
    return out


def scrub(text: str, secrets: dict[str, str]) -> str:
    """``text`` with every secret value of 4 bytes or more replaced by ``********``."""
    for value in sorted(secrets.values(), key=len, reverse=True):
        if isinstance(value, str) and len(value.encode("utf-8")) >= MIN_SECRET_BYTES and value in text:
            text = text.replace(value, MASK)
    return text


# -- memory ------------------------------------------------------------------------------


def _memory() -> Any:
    """``lfx.memory`` when it is Langflow's (a database), None for lfx's stubs or no lfx.

    lfx alone (``lfx/memory/stubs.py``) stores into a NoopSession and reads back nothing:
    shipping its empty history would tell serve the caller owns the session's memory and
    every message would be lost. Without Langflow's memory the plugin sends no history and
    serve keeps the session in its own store.
    """
    try:
        import lfx.memory as memory
    except ImportError:
        return None
    get = getattr(memory, "aget_messages", None)
    if not callable(get) or getattr(get, "__module__", "") == "lfx.memory.stubs":
        return None
    return memory


async def history(session: str | None) -> list[dict[str, Any]] | None:
    """The session's stored messages, oldest first, as JSON; None without Langflow's memory."""
    memory = _memory() if session else None
    if memory is None:
        return None
    get = memory.aget_messages
    try:
        messages = await get(session_id=session, order="ASC")
    except TypeError:  # a memory API without `order`
        messages = await get(session_id=session)
    out = []
    for message in messages or []:
        try:
            out.append(jsonable(message))
        except (TypeError, ValueError):
            logger.warning("guestflow: a stored message of session %s is not JSON; not sent", session)
    out.sort(key=lambda m: str(m.get("timestamp") or "") if isinstance(m, dict) else "")
    return out


class MessageStore:
    """One run's guest messages in Langflow's memory, by the guest's message id.

    A guest stores a streamed message twice: first with empty text, then -- same id -- with
    the whole text (``aupdate_messages``, as lfx's ``send_message`` does). The first is
    stored with ``astore_message`` (Langflow gives it its own id); a later one with an id
    already seen updates that stored message with ``aupdate_messages``.
    """

    def __init__(self, flow_id: Any) -> None:
        self.flow_id = flow_id
        self.memory = _memory()
        self.seen: set[str] = set()
        self.stored: dict[str, Any] = {}

    async def put(self, data: Any) -> bool:
        """Stores or updates one message; True when its id was not seen before in the run."""
        if not isinstance(data, dict):
            return True
        guest_id = data.get("id") or None
        first = guest_id is None or guest_id not in self.seen
        if guest_id is not None:
            self.seen.add(guest_id)
        store = getattr(self.memory, "astore_message", None)
        if not callable(store):
            return first
        fields = {k: v for k, v in data.items() if k != "id" and v is not None}
        if not first:
            previous = self.stored.get(guest_id)
            update = getattr(self.memory, "aupdate_messages", None)
            if previous is not None and callable(update):
                for key, value in fields.items():
                    with contextlib.suppress(AttributeError, TypeError, ValueError):
                        setattr(previous, key, value)
                updated = await update(previous)
                if isinstance(updated, list) and updated:
                    self.stored[guest_id] = updated[0]
            return False
        from lfx.schema.message import Message

        try:
            message = Message.model_validate(fields) if hasattr(Message, "model_validate") else Message(**fields)
        except Exception:  # noqa: BLE001 - keep the fields every stored message has
            keep = ("text", "sender", "sender_name", "session_id", "files", "timestamp")
            message = Message(**{k: fields[k] for k in keep if k in fields})
        flow = self.flow_id or fields.get("flow_id")
        stored = await store(message, flow_id=str(flow) if flow else None)
        if guest_id is not None:
            self.stored[guest_id] = stored[0] if isinstance(stored, list) and stored else message
        return True
