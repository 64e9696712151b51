"""``lfx.executors`` entry point: run a whole flow graph in a guestflow guest.

``LANGFLOW_EXECUTOR_KIND=guestflow`` routes lfx's ``Coordinator`` (``/api/v1/run``, the
lfx CLI, Loop subgraphs, ``Graph.arun``) here. Langflow's UI build endpoint walks the
vertices itself and never enters this path, so the playground still runs in-process.

What one ``execute(unit)`` does, as lfx's ``InProcessExecutor`` would
(``execution/backends/in_process.py``):

1. Serializes ``unit.graph.dump()`` and the caller inputs (``unit.inputs`` and/or
   ``runtime_options["initial_inputs"]``, an ``InputValueRequest``, a dict, a string or a
   list of those -- ``Coordinator.stream`` passes ``inputs=[]`` and the real inputs in
   ``initial_inputs``), plus the run state that lives on the graph object and not in its
   dump (``_runtime``): ``session_id``, ``user_id``, ``context``, values set after load
   (sent as ``tweaks``), the user's variables (``variables``: secrets, resolved on this
   host) and the session's history from Langflow's memory. POSTs ``/v1/runs``.
2. Reads the NDJSON run events as they arrive. Streaming path: each ``vertex_built`` is
   yielded as ``StepResult(payload=VertexBuildResult)`` rebuilt from the event (``_shapes``;
   ``payload.vertex.event`` is the raw event), the ``complete`` event as
   ``StepResult(payload=Finish())``, then ``RunComplete(outputs=[RunOutputs…])``. Legacy
   path (``runtime_options["_use_arun_legacy"]``, what ``Graph.arun`` / ``/api/v1/run``
   use): only the ``RunComplete``.
3. Feeds the caller's ``runtime_options["event_manager"]`` as events arrive, with the
   names and payloads of an in-process run: ``on_token`` (``token``), ``on_message``
   (``message``, after storing it with ``astore_message``); on the streaming path also
   ``on_build_start`` (``vertex_started``) and ``on_end_vertex`` (``vertex_built``:
   ``{"build_data": {id, valid, data}}``), which only ``Graph.async_start`` sends, and
   ``on_error`` (``error``) -- on the legacy path Langflow's run endpoint sends that itself
   when the run raises.
4. On the ``error`` event it raises, on both paths, after the steps before it, what lfx's
   run raises: for a failed vertex (``failed`` is set) lfx's ``ComponentBuildError`` with
   Langflow's text on the streaming path, ``ValueError("Error running graph: …")`` from it
   on the legacy path (``Graph._run`` wraps it so); otherwise, or without lfx,
   :class:`GuestflowRunError`. The ``complete`` event's ``context`` is set back on the
   host graph.
5. If the consumer stops early (``aclose()``, task cancellation, an exception), the run is
   cancelled with ``DELETE /v1/runs/{id}`` before the generator finishes (bounded by a few
   seconds), and the request also carries ``cancel_on_disconnect: true`` so a worker that
   dies mid-run does not leave its run going. A stream that breaks mid-run is rejoined
   from the last seq.

Runtime options honoured: ``initial_inputs``; ``max_iterations``, ``config``,
``reset_output_values``, ``fallback_to_env_vars`` (forwarded when JSON-serializable;
``fallback_to_env_vars`` also lets a variable come from this worker's environment);
``outputs`` (vertex ids or display names to harvest, as ``Graph.arun`` passes them);
``inputs_components`` / ``types`` (merged into the seam-level inputs, as
``Graph._arun_legacy`` does); ``session_id`` and ``event_manager``; and this executor's own
``guestflow_timeout_seconds`` (the run's wall clock, at most the server's executor limit)
and ``guestflow_executor`` (``auto``, ``core`` or ``lfx``: the guest executor; else
``GUESTFLOW_RUNNER_EXECUTOR`` of the worker, else the server's setting). Anything else
cannot cross a process boundary and is dropped with a debug log; ``_``-prefixed keys are
ignored.

No per-run state lives on the executor: lfx's registry hands the same instance to every
concurrent run, so everything a run needs is a local of its own generator frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from lfx.execution.executor import Executor
from lfx.execution.types import RunComplete, StepResult

from langflow_guestflow import _http, _runtime, _settings, _shapes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from lfx.execution.types import Unit

logger = logging.getLogger(__name__)

FORWARDED_OPTIONS = ("max_iterations", "config", "reset_output_values", "fallback_to_env_vars")
INPUT_KEYS = ("input_value", "type", "session", "components")
MAX_EVENT_LINE = 256 << 20  # a `complete` line carries every harvested output
CANCEL_TIMEOUT_SECONDS = 5.0
MAX_REJOINS = 3
# Keys that shape the request body itself rather than being forwarded.
_BODY_OPTIONS = (
    "initial_inputs",
    "outputs",
    "inputs_components",
    "types",
    "session_id",
    "event_manager",
    "stream",
    "guestflow_timeout_seconds",
    "guestflow_executor",
)
EXECUTORS = ("auto", "core", "lfx")


class GuestflowRunError(RuntimeError):
    """The run ended with an ``error`` event, or was refused before it started."""

    def __init__(self, code: str, message: str, run_id: str | None = None) -> None:
        super().__init__(f"guestflow run {run_id or '(not started)'} failed: {code}: {message}")
        self.code = code
        self.message = message
        self.run_id = run_id


class GuestflowExecutor(Executor):
    """Runs each ``Unit`` as one whole-flow run on a ``guestflow serve`` node runtime."""

    kind = "guestflow"

    def __init__(self, url: str | None = None, token: str | None = None) -> None:
        # Configuration only (None = read GUESTFLOW_URL / GUESTFLOW_TOKEN at each run).
        self._url = url
        self._token = token

    async def execute(self, unit: Unit) -> AsyncIterator[StepResult | RunComplete]:
        """Streaming path: a StepResult per built vertex, Finish, then one RunComplete."""
        try:
            ep = _settings.endpoint(self._url, self._token)
            idle = _settings.float_env("GUESTFLOW_STREAM_IDLE_TIMEOUT_SECONDS", 120.0)
        except _settings.SettingsError as exc:
            raise GuestflowRunError("bad_request", str(exc)) from exc
        opts = dict(unit.runtime_options or {})
        legacy = bool(opts.get("_use_arun_legacy"))
        body = build_run_body(unit)
        secrets = await add_run_state(body, unit)
        run = _RunEvents(unit.graph, body["flow"], opts.get("event_manager"), secrets)

        run_id: str | None = None
        next_seq = 0
        finished = False
        resp: _http.AsyncResponse | None = None
        try:
            resp = await _http.open_stream(ep, "POST", "/v1/runs", body, accept="application/x-ndjson")
            if resp.status != 200:
                data = await resp.read_all(idle_timeout=30.0)
                err = _http.error_from_answer(resp.status, data, resp.headers)
                raise GuestflowRunError(err.code, run.scrub(err.message), err.run_id)
            run_id = resp.headers.get("x-guestflow-run-id") or None
            rejoins = 0
            while True:
                try:
                    async for line in resp.lines(max_line=MAX_EVENT_LINE, idle_timeout=idle):
                        event = _decode_event(line)
                        run_id = run_id or event.get("run_id")
                        seq = event.get("seq")
                        if isinstance(seq, int) and seq < next_seq:
                            continue  # replayed by a rejoin
                        if isinstance(seq, int) and seq != next_seq:
                            msg = f"run event seq {seq} arrived where {next_seq} was expected"
                            raise GuestflowRunError("transient", msg, run_id)
                        next_seq += 1
                        etype = event.get("type")
                        if etype == "complete":
                            finished = True
                            _runtime.apply_context(unit.graph, event.get("context"), body.get("context"))
                            if not legacy:
                                yield StepResult(payload=_shapes.finish(event))
                            yield RunComplete(outputs=rebuild_run_outputs(event.get("outputs")))
                            return
                        if etype == "error":
                            finished = True
                            if not legacy:
                                # The legacy caller (Langflow's run endpoint) sends its own
                                # error event when the run raises, as it does in process.
                                await run.on_error(event)
                            raise run.failure(event, run_id, legacy=legacy)
                        payload = await run.on_event(event, legacy=legacy)
                        if payload is not None:
                            yield StepResult(payload=payload)
                    problem = "the run stream ended before the run's terminal event"
                except _http.GuestflowConnectionError as exc:
                    problem = str(exc)
                # The stream broke mid-run (server dropped a slow reader, a proxy reset...).
                # The run may still be going: join it again from the next event.
                await resp.aclose()
                if run_id is None or rejoins >= MAX_REJOINS:
                    raise GuestflowRunError("transient", problem, run_id)
                rejoins += 1
                logger.warning("guestflow run %s: %s; rejoining at seq %d", run_id, problem, next_seq)
                path = f"/v1/runs/{quote(run_id, safe='')}/events?from_seq={next_seq}"
                resp = await _http.open_stream(ep, "GET", path, accept="application/x-ndjson")
                if resp.status != 200:
                    data = await resp.read_all(idle_timeout=30.0)
                    err = _http.error_from_answer(resp.status, data, resp.headers)
                    raise GuestflowRunError(err.code, f"rejoining the run failed: {err.message}", run_id)
        except _http.GuestflowError as exc:
            raise GuestflowRunError(exc.code, run.scrub(exc.message), run_id or exc.run_id) from exc
        finally:
            if resp is not None:
                await resp.aclose()
            if not finished and run_id is not None:
                # The consumer left (aclose / cancellation / error) before the run ended.
                await _cancel(ep, run_id)


class _RunEvents:
    """One run's events turned into lfx shapes, the caller's event_manager calls and memory."""

    def __init__(self, graph: Any, dump: Any, event_manager: Any, secrets: dict[str, str]) -> None:
        self.graph = graph
        self.nodes = {_runtime.node_id(n): n for n in _runtime.nodes_of(dump)}
        self.event_manager = event_manager
        self.secrets = secrets
        flow_id = None if isinstance(graph, (dict, str, bytes)) else getattr(graph, "flow_id", None)
        self.messages = _runtime.MessageStore(flow_id)

    def scrub(self, text: str) -> str:
        return _runtime.scrub(text, self.secrets)

    async def _emit(self, name: str, data: Any) -> None:
        if self.event_manager is None:
            return
        result = getattr(self.event_manager, name)(data=data)
        if inspect.isawaitable(result):
            await result

    async def on_event(self, event: dict[str, Any], *, legacy: bool) -> Any:
        """A non-terminal event: the caller's callbacks; the payload to yield, if any."""
        etype = event.get("type")
        if etype == "vertex_built":
            if legacy:
                return None  # Graph._run neither yields nor announces built vertices
            built = _shapes.vertex_build_result(event, self.nodes.get(str(event.get("id"))), self.graph)
            build_data = {"id": built.vertex.id, "valid": True, "data": _shapes.dump_result(built.result_dict)}
            await self._emit("on_end_vertex", {"build_data": build_data})
            return built
        if etype == "vertex_started":
            if not legacy:
                await self._emit("on_build_start", {"id": event.get("id")})
        elif etype == "token":
            await self._emit("on_token", event.get("data"))
        elif etype == "message":
            data = event.get("data")
            try:
                first = await self.messages.put(data)
            except Exception as exc:
                msg = f"storing a message of the run in Langflow's memory failed: {type(exc).__name__}: {exc}"
                raise GuestflowRunError("unavailable", self.scrub(msg), event.get("run_id")) from exc
            if first:  # a streamed message's final text is an update: lfx sends no message event for it
                await self._emit("on_message", data)
        return None

    async def on_error(self, event: dict[str, Any]) -> None:
        await self._emit("on_error", {"error": self.scrub(str(event.get("message") or ""))})

    def failure(self, event: dict[str, Any], run_id: str | None, *, legacy: bool) -> Exception:
        """What lfx's run raises for this ``error`` event.

        A failed vertex: lfx's ``ComponentBuildError`` with Langflow's text (the streaming
        path, ``Graph.async_start``); the legacy path's ``Graph._run`` wraps it as
        ``ValueError("Error running graph: …")``. Anything else (a timeout, a cancelled or
        refused run, no lfx here): GuestflowRunError.
        """
        code = str(event.get("code") or "guest_failed")
        message = self.scrub(str(event.get("message") or ""))
        if code == "guest_failed" and event.get("failed"):
            built = _shapes.component_build_error(message, self.scrub(str(event.get("traceback") or "")))
            if built is not None and legacy:
                wrapped = ValueError(f"Error running graph: {built}")
                wrapped.__cause__ = built
                return wrapped
            if built is not None:
                return built
        return GuestflowRunError(code, message, run_id)


async def _cancel(ep: _settings.Endpoint, run_id: str) -> None:
    """DELETE the run, bounded; never raises (it runs inside a finally)."""
    path = f"/v1/runs/{quote(run_id, safe='')}"
    try:
        await asyncio.wait_for(
            _http.request_json_async(ep, "DELETE", path, timeout=CANCEL_TIMEOUT_SECONDS),
            CANCEL_TIMEOUT_SECONDS,
        )
    except asyncio.CancelledError:
        # Cancelled again while cancelling: the request carried cancel_on_disconnect, and
        # closing the stream above already told the server. Let the cancellation through.
        raise
    except Exception as exc:  # noqa: BLE001 - best effort, logged
        logger.warning("guestflow: cancelling run %s failed: %s", run_id, exc)


def _decode_event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        msg = f"a run event line is not JSON: {line[:120]!r}"
        raise GuestflowRunError("transient", msg) from exc
    if not isinstance(event, dict):
        msg = f"a run event is not a JSON object: {line[:120]!r}"
        raise GuestflowRunError("transient", msg)
    return event


async def add_run_state(body: dict[str, Any], unit: Unit) -> dict[str, str]:
    """The graph's run state into ``body``; returns the secrets sent (``variables``).

    Raises GuestflowRunError (``bad_request``) naming a variable that is not set, and
    (``unavailable``) when Langflow's memory cannot be read: before anything runs.
    """
    graph = unit.graph
    opts = unit.runtime_options or {}
    if isinstance(graph, (dict, str, bytes)):
        graph = None  # a bare dump has no run state
    dump = body["flow"]
    session = _runtime.session_id(graph, opts)
    if session and opts.get("_use_arun_legacy") and opts.get("session_id") and graph is not None:
        # Graph._arun_legacy: `if session_id: self.session_id = session_id`.
        with contextlib.suppress(AttributeError, TypeError):
            graph.session_id = session
    if session:
        body["session_id"] = session
    if user := _runtime.user_id(graph):
        body["user_id"] = user
    if context := _runtime.context(graph):
        body["context"] = context
    tweaks = _runtime.tweaks(graph, dump) if graph is not None else {}
    if tweaks:
        body["tweaks"] = tweaks
    try:
        variables = await _runtime.resolve_variables(
            graph, dump, fallback_to_env_vars=bool(opts.get("fallback_to_env_vars"))
        )
    except _runtime.VariableError as exc:
        raise GuestflowRunError("bad_request", str(exc)) from exc
    if variables:
        body["variables"] = variables
    try:
        history = await _runtime.history(session)
    except Exception as exc:
        msg = f"reading session {session}'s messages from Langflow's memory failed: {type(exc).__name__}: {exc}"
        raise GuestflowRunError("unavailable", _runtime.scrub(msg, variables)) from exc
    if history is not None:
        body["history"] = history
    return variables


# -- request body --------------------------------------------------------------------------


def build_run_body(unit: Unit) -> dict[str, Any]:
    """The ``POST /v1/runs`` body for one unit."""
    opts = dict(unit.runtime_options or {})
    body: dict[str, Any] = {"flow": _graph_payload(unit.graph), "stream": True, "cancel_on_disconnect": True}

    inputs = _seam_inputs(unit.inputs, opts.get("inputs_components"), opts.get("types"))
    if inputs:
        body["inputs"] = inputs
    runtime_options: dict[str, Any] = {}
    initial = opts.get("initial_inputs")
    if initial is not None:
        runtime_options["initial_inputs"] = _normalize_inputs(initial)
    for key, value in opts.items():
        if key in FORWARDED_OPTIONS:
            if value is None:
                continue
            try:
                json.dumps(value, default=_http._json_default)  # noqa: SLF001
            except (TypeError, ValueError):
                logger.debug("guestflow: runtime_options[%r] is not JSON; dropped", key)
                continue
            runtime_options[key] = value
        elif key not in _BODY_OPTIONS and not key.startswith("_"):
            logger.debug("guestflow: runtime_options[%r] cannot cross a process boundary; dropped", key)
    if runtime_options:
        body["runtime_options"] = runtime_options
    outputs = opts.get("outputs")
    if outputs:
        body["outputs"] = [str(o) for o in outputs]
    timeout = opts.get("guestflow_timeout_seconds")
    if timeout is not None:
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            msg = f"runtime_options['guestflow_timeout_seconds'] must be a positive integer, got {timeout!r}"
            raise GuestflowRunError("bad_request", msg)
        body["timeout_seconds"] = timeout
    # The guest executor: this run's option, else the worker's GUESTFLOW_RUNNER_EXECUTOR, else
    # the server's own setting.
    executor = opts.get("guestflow_executor")
    if executor is None:
        executor = os.environ.get("GUESTFLOW_RUNNER_EXECUTOR", "").strip() or None
    if executor is not None:
        if executor not in EXECUTORS:
            msg = f"the guest executor must be one of {', '.join(EXECUTORS)}, got {executor!r}"
            raise GuestflowRunError("bad_request", msg)
        body["executor"] = executor
    return body


def _graph_payload(graph: Any) -> Any:
    """``Graph.dump()`` for a real graph; a dict or JSON text passes through."""
    if isinstance(graph, dict):
        return graph
    if isinstance(graph, (str, bytes)):
        return json.loads(graph)
    dump = getattr(graph, "dump", None)
    if not callable(dump):
        msg = f"Unit.graph must be an lfx Graph (with dump()) or a Graph.dump() dict, got {type(graph).__name__}"
        raise TypeError(msg)
    return dump()


def _normalize_one(value: Any) -> Any:
    """One caller input as the server's ``{input_value, type?, session?, components?}``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        raw = value
    elif callable(getattr(value, "model_dump", None)):
        raw = value.model_dump()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        raw = dataclasses.asdict(value)
    elif callable(getattr(value, "dict", None)):
        raw = value.dict()
    else:
        msg = f"cannot send a caller input of type {type(value).__name__}"
        raise TypeError(msg)
    out = {key: raw[key] for key in INPUT_KEYS if raw.get(key) is not None}
    if "type" not in out and raw.get("input_type") is not None:
        out["type"] = raw["input_type"]  # /api/v1/run's name for it
    if "components" in out:
        out["components"] = [str(c) for c in out["components"]]
    return out


def _normalize_inputs(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalize_one(v) for v in value]
    return _normalize_one(value)


def _seam_inputs(inputs: Any, components: Any, types: Any) -> list[Any]:
    """``unit.inputs`` with Graph.arun's per-input components / types folded in."""
    out = []
    for i, item in enumerate(inputs or []):
        one = _normalize_one(item)
        if isinstance(one, str):
            one = {"input_value": one}
        if isinstance(one, dict):
            if isinstance(components, (list, tuple)) and i < len(components) and components[i]:
                one.setdefault("components", [str(c) for c in components[i]])
            if isinstance(types, (list, tuple)) and i < len(types) and types[i]:
                one.setdefault("type", str(types[i]))
        out.append(one)
    return out


# -- outputs --------------------------------------------------------------------------------


def _field_names(cls: type) -> set[str] | None:
    fields = getattr(cls, "model_fields", None)  # pydantic v2
    if isinstance(fields, dict):
        return set(fields)
    fields = getattr(cls, "__fields__", None)  # pydantic v1
    if isinstance(fields, dict):
        return set(fields)
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return None


def rebuild_run_outputs(raw: Any) -> list[Any]:
    """``complete.outputs`` as ``list[lfx.graph.schema.RunOutputs]`` (dicts without lfx)."""
    if not isinstance(raw, list):
        return []
    try:
        from lfx.graph.schema import ResultData, RunOutputs
    except ImportError:
        return list(raw)
    names = _field_names(ResultData)

    def result_data(item: Any) -> Any:
        if not isinstance(item, dict):
            return None
        kwargs = {k: v for k, v in item.items() if names is None or k in names}
        try:
            return ResultData(**kwargs)
        except Exception:  # noqa: BLE001 - e.g. a message lfx's ChatOutputResponse rejects
            kwargs.pop("messages", None)
            with contextlib.suppress(Exception):
                return ResultData(**kwargs)
            return None

    rebuilt = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        outputs = entry.get("outputs") if isinstance(entry.get("outputs"), list) else []
        inputs = entry.get("inputs") if isinstance(entry.get("inputs"), dict) else {}
        rebuilt.append(RunOutputs(inputs=inputs, outputs=[result_data(o) for o in outputs]))
    return rebuilt
