"""Run events rebuilt into the objects lfx's own run yields.

lfx's in-process streaming path yields one ``VertexBuildResult`` per built vertex
(``lfx/graph/graph/schema.py``: a NamedTuple ``result_dict, params, valid, artifacts,
vertex``) and then ``Finish`` (``lfx/graph/graph/constants.py``). Every consumer of
``Coordinator.stream`` reads those: ``base/flow_controls/loop_utils.py`` looks for
``result.vertex.id`` and the first value of ``result.result_dict.outputs`` (a dict, as
``build_output_logs`` stores ``OutputValue(...).model_dump()``), ``hasattr(result, "valid")``;
the ``lfx run`` CLI (``cli/result_extraction.py``) reads
``result.vertex.custom_component.display_name`` and ``result.result_dict.results["message"]``
as a ``Message``. A guest's ``vertex_built`` event carries the same ResultData as JSON
(``result``) and the class of each built value (``types``), so the host rebuilds ``Message``,
``Data`` and ``DataFrame`` from the installed lfx. Without lfx (scripts, the plugin's own
tests without the stand-in) the same shapes are built from local look-alikes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Any, NamedTuple

logger = logging.getLogger(__name__)

# lfx's Vertex.built_object_repr() for a vertex that built.
BUILT_REPR = "Built successfully ✨"
# Vertex ids that make lfx's Vertex an input / output one (graph/schema.py INPUT_COMPONENTS,
# OUTPUT_COMPONENTS; vertex/base.py checks them against the id).
_INPUT_TYPES = ("ChatInput", "Webhook", "TextInput")
_OUTPUT_TYPES = ("ChatOutput", "DataOutput", "TextOutput")


class _LocalVertexBuildResult(NamedTuple):
    """lfx's VertexBuildResult, field for field, for a host without lfx."""

    result_dict: Any
    params: str
    valid: bool
    artifacts: dict
    vertex: Any


class _LocalFinish:
    """lfx's Finish for a host without lfx: truthy, equal to any Finish."""

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _LocalFinish)

    __hash__ = object.__hash__


class _LocalResultData:
    """lfx's ResultData fields as attributes, for a host without lfx."""

    def __init__(self, **fields: Any) -> None:
        self.results = fields.get("results") or {}
        self.artifacts = fields.get("artifacts") or {}
        self.outputs = fields.get("outputs") or {}
        self.logs = fields.get("logs") or {}
        self.messages = fields.get("messages") or []
        self.timedelta = fields.get("timedelta")
        self.duration = fields.get("duration")
        self.component_display_name = fields.get("component_display_name")
        self.component_id = fields.get("component_id")
        self.used_frozen_result = bool(fields.get("used_frozen_result"))

    def model_dump(self) -> dict[str, Any]:
        return dict(vars(self))


def _import(module: str, name: str) -> Any:
    with contextlib.suppress(ImportError, AttributeError):
        mod = __import__(module, fromlist=[name])
        return getattr(mod, name)
    return None


def vertex_build_result_class() -> Any:
    return _import("lfx.graph.graph.schema", "VertexBuildResult") or _LocalVertexBuildResult


def finish(event: dict[str, Any] | None = None) -> Any:
    """lfx's Finish; ``event`` (the raw ``complete`` event) rides on it for raw readers."""
    cls = _import("lfx.graph.graph.constants", "Finish") or _LocalFinish
    done = cls()
    with contextlib.suppress(AttributeError):
        done.event = event
    return done


def component_build_error(message: str, formatted_traceback: str = "") -> Exception | None:
    """lfx's ComponentBuildError(message, formatted_traceback), or None without lfx."""
    cls = _import("lfx.exceptions.component", "ComponentBuildError")
    if cls is None:
        return None
    try:
        return cls(message, formatted_traceback)
    except Exception:  # noqa: BLE001 - an lfx whose signature differs: the caller falls back
        logger.debug("guestflow: lfx's ComponentBuildError did not take (message, traceback)")
        return None


def _validate(cls: Any, value: dict[str, Any]) -> Any:
    validate = getattr(cls, "model_validate", None)
    if callable(validate):
        return validate(value)
    return cls(**value)


def rebuild_value(value: Any, type_name: str | None) -> Any:
    """One built value from its JSON form and its class name (``types`` of the event).

    Only lfx's ``Message``, ``Data`` and ``DataFrame`` are rebuilt; anything else (``str``,
    ``dict``, ``list``…) is already what it was. A value lfx refuses stays JSON, logged.
    """
    if type_name not in ("Message", "Data", "DataFrame") or value is None:
        return value
    if type_name == "Message":
        cls = _import("lfx.schema.message", "Message")
        if cls is None or not isinstance(value, dict):
            return value
        try:
            return _validate(cls, value)
        except Exception:  # noqa: BLE001 - fall back to the fields every Message has
            keep = ("text", "sender", "sender_name", "session_id", "files", "flow_id", "timestamp")
            with contextlib.suppress(Exception):
                return cls(**{k: value[k] for k in keep if value.get(k) is not None})
        logger.debug("guestflow: a Message value could not be rebuilt; kept as JSON")
        return value
    if type_name == "Data":
        cls = _import("lfx.schema.data", "Data")
        if cls is None or not isinstance(value, dict):
            return value
        # Data.model_dump() ({text_key, data, default_value}) is rebuilt as such; any other
        # dict is the payload itself.
        dumped = isinstance(value.get("data"), dict) and set(value) <= {"text_key", "data", "default_value"}
        payload = value if dumped else {"data": value}
        try:
            return cls(**payload)
        except Exception:  # noqa: BLE001
            logger.debug("guestflow: a Data value could not be rebuilt; kept as JSON")
            return value
    cls = _import("lfx.schema.dataframe", "DataFrame")
    rows = value.get("data") if isinstance(value, dict) and isinstance(value.get("data"), list) else value
    if cls is None or not isinstance(rows, list):
        return value
    try:
        return cls(rows)
    except Exception:  # noqa: BLE001
        logger.debug("guestflow: a DataFrame value could not be rebuilt; kept as JSON")
        return value


def result_data(raw: dict[str, Any], types: dict[str, Any]) -> Any:
    """lfx's ResultData with each result rebuilt by its class name."""
    fields = dict(raw)
    results = fields.get("results")
    if isinstance(results, dict):
        fields["results"] = {k: rebuild_value(v, types.get(k)) for k, v in results.items()}
    cls = _import("lfx.graph.schema", "ResultData")
    if cls is None:
        return _LocalResultData(**fields)
    with contextlib.suppress(Exception):
        return cls(**fields)
    fields.pop("messages", None)  # a guest's message list that lfx's ChatOutputResponse rejects
    with contextlib.suppress(Exception):
        return cls(**fields)
    return _LocalResultData(**fields)


class GuestComponent:
    """What readers of ``vertex.custom_component`` use: the display name and the id."""

    def __init__(self, display_name: str, vertex_id: str) -> None:
        self.display_name = display_name
        self._id = vertex_id

    def get_id(self) -> str:
        return self._id


class GuestVertex:
    """A vertex built in a guest, with the attributes lfx's Vertex has after a build.

    ``event`` is the run event it came from (``vertex_built``), kept for callers that
    read the raw stream; ``host_vertex`` the caller's own graph vertex when it has one.
    """

    def __init__(self, event: dict[str, Any], node: dict[str, Any] | None, result: Any, graph: Any) -> None:
        node = node or {}
        data = node.get("data") if isinstance(node.get("data"), dict) else {}
        info = data.get("node") if isinstance(data.get("node"), dict) else {}
        self.id = str(event.get("id") or node.get("id") or "")
        self.display_name = str(event.get("name") or info.get("display_name") or self.id)
        self.data = data
        self.vertex_type = str(data.get("type") or self.id.split("-")[0])
        outputs = info.get("outputs")
        self.outputs = list(outputs) if isinstance(outputs, list) else []
        self.is_input = any(t in self.id for t in _INPUT_TYPES)
        self.is_output = any(t in self.id for t in _OUTPUT_TYPES)
        self.custom_component = GuestComponent(self.display_name, self.id)
        self.graph = graph
        self.host_vertex = _host_vertex(graph, self.id)
        self.built = True
        self.frozen = False
        self.result = result
        results = getattr(result, "results", None)
        self.results = results if isinstance(results, dict) else {}
        self.built_object = self.results
        self.built_result = self.results
        artifacts = getattr(result, "artifacts", None)
        self.artifacts = artifacts if isinstance(artifacts, dict) else {}
        self.event = event

    def built_object_repr(self) -> str:
        return BUILT_REPR

    def __repr__(self) -> str:
        return f"GuestVertex(id={self.id!r}, display_name={self.display_name!r})"


def _host_vertex(graph: Any, vertex_id: str) -> Any:
    vertex_map = getattr(graph, "vertex_map", None)
    if isinstance(vertex_map, dict):
        return vertex_map.get(vertex_id)
    return None


def vertex_build_result(event: dict[str, Any], node: dict[str, Any] | None, graph: Any) -> Any:
    """A ``vertex_built`` event as lfx's ``VertexBuildResult``."""
    raw = event.get("result")
    if not isinstance(raw, dict):
        # A server before `result`: the output logs and logs it sent are what there is.
        raw = {
            "results": {},
            "outputs": event.get("outputs") if isinstance(event.get("outputs"), dict) else {},
            "component_id": event.get("id"),
            "component_display_name": event.get("name"),
        }
    types = event.get("types") if isinstance(event.get("types"), dict) else {}
    result = result_data(raw, types)
    vertex = GuestVertex(event, node, result, graph)
    artifacts = vertex.artifacts
    cls = vertex_build_result_class()
    return cls(result_dict=result, params=BUILT_REPR, valid=True, artifacts=artifacts, vertex=vertex)


def dump_result(result: Any) -> Any:
    """``result_dict.model_dump()`` as async_start puts it into ``on_end_vertex``."""
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        with contextlib.suppress(Exception):
            return dump()
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    return result
