"""guestflow guest runner, lfx path: Langflow's own engine runs the flow as Langflow's run does.

Imported lazily by runner.py when spec.json's `executor` is `lfx` (or `auto` and lfx
imports); the host uploads it next to runner.py. runner.py has already applied the tweaks,
the session id and the `load_from_db` variables to the payload. Then, as Langflow's
`/api/v1/run` does (`Graph._arun_legacy` -> `Graph._run` -> `Graph.process`):

* `Graph.from_payload(payload, user_id=..., context=...)`, `graph.session_id` set;
* per caller input: `_set_inputs` (the input components and type), `session_id` on every
  vertex that has the field, then the vertices layer by layer in lfx's run order
  (`sort_vertices`, `build_vertex`, `get_next_runnable_vertices`); a layer's vertices are
  built one after the other (lfx builds them concurrently), each reported as
  `vertex_start` then `step` (with `result`, the ResultData dict, and `types`);
* the first vertex that fails stops the run (Langflow raises there): its step, valid
  false, is the last; nothing after it builds and no later input runs;
* outputs harvested as `Graph._run` does: built vertices, a vertex without a result first
  drained (`consume_async_generator`), the ones the caller named (id or display name),
  else every output vertex;
* an EventManager in every build: `on_token` -> `token` frames (before the vertex's step);
* lfx's memory API (`aget_messages`, `astore_message`, `aupdate_messages`) served from the
  session's history (spec.history): a component reads the session's messages, and each
  message stored becomes a `message` frame and part of the history later vertices read (a
  streamed message is stored first with empty text, then updated: a second `message`
  frame with the same id and the whole text);
* the graph's context after the run, JSON-able parts only, as `self.context` (runner.py
  sends it as the `state` frame).

The lfx API used: `lfx.graph.graph.base.Graph` (`from_payload`, `session_id`, `context`,
`vertices`, `get_vertex`, `_set_inputs`, `has_session_id_vertices`, `sort_vertices`,
`build_vertex`, `get_next_runnable_vertices`, `run_manager.remove_vertex_from_runnables`),
vertices (`id`, `display_name`, `outputs`, `built`, `is_output`, `result`, `results`,
`update_raw_params`, `consume_async_generator`), `lfx.events.event_manager.EventManager`,
`lfx.memory`, `lfx.schema.message.Message` and `lfx.exceptions.component.ComponentBuildError`.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import sys
import time
import traceback
import uuid
from collections import deque

from run_services import History

_GRAPH = None
_EVENTS = None
_MESSAGE = None
_BUILD_ERROR = None
VERSION = None
_NEEDED = ("from_payload", "sort_vertices", "build_vertex", "get_next_runnable_vertices", "_set_inputs",
           "get_vertex")
_MEMORY_FUNCTIONS = ("aget_messages", "astore_message", "aupdate_messages")
# Graph.async_start's options: Langflow's /api/v1/run path (_arun_legacy) takes none of them.
_STREAMING_ONLY = ("max_iterations", "config", "reset_output_values")


def load() -> None:
    """Imports lfx; raises (ImportError or whatever lfx raises) when it cannot be used."""
    global _GRAPH, _EVENTS, _MESSAGE, _BUILD_ERROR, VERSION  # noqa: PLW0603 - a lazy import cache
    import lfx  # noqa: PLC0415
    import lfx.memory  # noqa: F401, PLC0415
    from lfx.events.event_manager import EventManager  # noqa: PLC0415
    from lfx.exceptions.component import ComponentBuildError  # noqa: PLC0415
    from lfx.graph.graph.base import Graph  # noqa: PLC0415
    from lfx.schema.message import Message  # noqa: PLC0415

    missing = [name for name in _NEEDED if not callable(getattr(Graph, name, None))]
    if missing:
        raise ImportError(f"lfx's Graph has no {', '.join(missing)}: this lfx is not one "
                          "guestflow can drive")
    _GRAPH, _EVENTS, _MESSAGE, _BUILD_ERROR = Graph, EventManager, Message, ComponentBuildError
    VERSION = _version(lfx)


_TYPED_VALUES = ("Data", "Message", "DataFrame")


def _typed_value(type_name: str, value):
    """The lfx object of that class from its JSON (lfx's JSON dump of it)."""
    if type_name == "Data":
        from lfx.schema.data import Data  # noqa: PLC0415
        return Data(data=value) if isinstance(value, dict) else Data(data={"value": value})
    if type_name == "Message":
        return _message(value) if isinstance(value, dict) else _MESSAGE(text=str(value))
    from lfx.schema.dataframe import DataFrame  # noqa: PLC0415
    return DataFrame(value)


def _version(module) -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            return version("lfx")
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    found = getattr(module, "__version__", None)
    return found if isinstance(found, str) else None


def _dump(value):
    """A pydantic-style value as JSON-able data (the runner's encoder handles the rest)."""
    if hasattr(value, "model_dump"):
        try:
            return value.model_dump(mode="json")
        except Exception:  # noqa: BLE001 - fall back to the runner's own encoding
            return value.model_dump()
    return value


def _json_ok(value) -> bool:
    """Whether `value` survives JSON as it is (the state frame keeps only those)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _message(stored: dict):
    """A history entry as lfx's Message (lfx's Data validator keeps unknown keys in `data`;
    a Message model that refuses them gets the fields it declares)."""
    try:
        return _MESSAGE(**stored)
    except TypeError:
        fields = getattr(_MESSAGE, "model_fields", None) or {}
        return _MESSAGE(**{k: v for k, v in stored.items() if k in fields})


def _langflow_error(vertex, exc) -> str:
    """The error Langflow puts after "Error building Component <name>: \\n\\n" (the host
    rebuilds that text from the display name and this); any other failure as it is."""
    if isinstance(exc, _BUILD_ERROR):
        prefix = f"Error building Component {getattr(vertex, 'display_name', '')}: \n\n"
        text = getattr(exc, "message", None) or str(exc)
        return text[len(prefix):] if text.startswith(prefix) else text
    return f"{type(exc).__name__}: {exc}"


class LfxExecutor:
    name = "lfx"

    def __init__(self, spec: dict, emitter, error_outputs, fatal) -> None:
        self.spec = spec
        self.emitter = emitter
        self.error_outputs = error_outputs  # runner's error_outputs: one failure shape for both
        self.fatal = fatal  # RunnerFatal(message, code=None, tb="", **extra)
        self.payload = spec["graph"].payload
        self.lfx_version = VERSION
        self.history = History(spec["history"])
        self.context = None  # the graph's context after the run: runner.py's state frame
        self.failed = False
        self._graph = None
        self._current = None  # the vertex being built: whose tokens and messages arrive now
        self._events = None

    # -- lfx's memory API, served from the session's history -------------------------------

    async def _aget_messages(self, sender=None, sender_name=None, session_id=None, context_id=None,  # noqa: ARG002
                             order_by="timestamp", order="DESC", flow_id=None, limit=None,  # noqa: ARG002
                             user_id=None):  # noqa: ARG002
        found = self.history.retrieve(sender=sender, sender_name=sender_name,
                                      session_id=str(session_id) if session_id else None,
                                      limit=limit, order=str(order or "DESC").upper())
        return [_message(m) for m in found]

    async def _astore_message(self, message, flow_id=None, run_id=None, user_id=None):  # noqa: ARG002
        """lfx's stub (the same checks and stamps), kept in the session's history and sent
        to the host as a `message` frame."""
        if not message:
            return []
        if not message.session_id or not message.sender or not message.sender_name:
            raise ValueError(
                f"All of session_id, sender, and sender_name must be provided. Session ID: "
                f"{message.session_id}, Sender: {message.sender}, Sender Name: {message.sender_name}")
        if flow_id:
            message.flow_id = str(flow_id)
        if run_id and hasattr(message, "run_id"):
            message.run_id = str(run_id)
        if not getattr(message, "id", None):
            message.id = str(uuid.uuid4())
        data = _dump(message)
        if not isinstance(message.text, str):
            data["text"] = ""  # still streaming: its text arrives as tokens, then an update
        self.history.store(data)
        self.emitter.message(self._current or "", data)
        return [message]

    async def _aupdate_messages(self, messages):
        """lfx's update (a streamed message's final text): the history's entry with that id
        replaced, and a `message` frame with the same id (the host replaces its copy)."""
        if not isinstance(messages, list):
            messages = [messages]
        for message in messages:
            if not getattr(message, "id", None):
                raise ValueError(f"Failed to update message: Message without ID cannot be updated: {message}")
            data = _dump(message)
            kept = self.history.messages
            at = next((i for i, m in enumerate(kept) if m.get("id") == data.get("id")), None)
            if at is None:
                self.history.store(data)
            else:
                kept[at] = data
            self.emitter.message(self._current or "", data)
        return messages

    def _serve_memory(self) -> None:
        """Every lfx module's binding of the memory functions (lfx.memory, its stubs, what
        imported them by name) now reaches the session's history."""
        import lfx.memory  # noqa: PLC0415

        served = {"aget_messages": self._aget_messages, "astore_message": self._astore_message,
                  "aupdate_messages": self._aupdate_messages}
        originals = {}
        for name in _MEMORY_FUNCTIONS:
            for module_name in ("lfx.memory", "lfx.memory.stubs"):
                found = getattr(sys.modules.get(module_name), name, None)
                if found is not None:
                    originals[id(found)] = name
        for module_name, module in list(sys.modules.items()):
            if not (module_name == "lfx" or module_name.startswith("lfx.")) or module is None:
                continue
            for attr in _MEMORY_FUNCTIONS:
                current = getattr(module, attr, None)
                if current is not None and id(current) in originals:
                    setattr(module, attr, served[originals[id(current)]])
        for name in _MEMORY_FUNCTIONS:
            setattr(lfx.memory, name, served[name])

    # -- events ---------------------------------------------------------------------------

    def _on_token(self, *, manager, event_type, data) -> None:  # noqa: ARG002
        if isinstance(data, dict):
            self.emitter.token(self._current or "", str(data.get("chunk", "")), str(data.get("id", "")))

    def _event_manager(self):
        """Langflow's stream-tokens manager, its token callback a `token` frame; messages
        reach the host from astore_message (so a message is sent once), the rest is dropped."""
        manager = _EVENTS(None)
        manager.register_event("on_token", "token", self._on_token)
        for name, event_type in (("on_message", "add_message"), ("on_end", "end"),
                                 ("on_end_vertex", "end_vertex"), ("on_error", "error"),
                                 ("on_build_start", "build_start"), ("on_build_end", "build_end")):
            manager.register_event(name, event_type, _dropped)
        return manager

    # -- the run ----------------------------------------------------------------------------

    def _load(self):
        spec = self.spec
        context = copy.deepcopy(spec["context"]) if spec["context"] else None
        try:
            graph = _GRAPH.from_payload(copy.deepcopy(self.payload), user_id=spec["user_id"],
                                        context=context)
        except Exception as exc:  # noqa: BLE001 - lfx refuses the flow: the caller's to fix
            raise self.fatal(f"lfx could not load the flow: {type(exc).__name__}: {exc}",
                             code="bad_request", tb=traceback.format_exc()[-8000:]) from None
        if spec["session_id"]:
            graph.session_id = spec["session_id"]
        self._set_typed_values(graph)
        return graph

    def _set_typed_values(self, graph) -> None:
        """A value the host graph held as an lfx object (a Loop's `Data` item, set with
        update_raw_params) arrives as a tweak `{"value": JSON, "value_type": "Data"}`: the
        vertex gets the object again, as it had it in process."""
        for raw in self.payload.get("nodes") or []:
            data = raw.get("data") if isinstance(raw, dict) else None
            node = data.get("node") if isinstance(data, dict) else None
            template = node.get("template") if isinstance(node, dict) else None
            if not isinstance(template, dict):
                continue
            typed = {field: entry for field, entry in template.items()
                     if isinstance(entry, dict) and entry.get("value_type") in _TYPED_VALUES}
            if not typed:
                continue
            vertex = graph.get_vertex(raw.get("id"))
            vertex.update_raw_params({field: _typed_value(entry["value_type"], entry.get("value"))
                                      for field, entry in typed.items()}, overwrite=True)

    def check(self) -> None:
        """Serves the memory API, then loads the graph before anything runs: components are
        instantiated there (their imports see the served memory), and a flow lfx refuses
        never half-runs."""
        self._serve_memory()
        self._events = self._event_manager()
        self._graph = self._load()
        options = self.spec["runtime_options"]
        unused = [key for key in _STREAMING_ONLY if options.get(key) is not None]
        if unused:
            self.emitter.note(warning="runtime options of Langflow's streaming run (async_start) "
                              "that its /api/v1/run path (_arun_legacy), which lfx runs here, "
                              "does not take: not used", options=unused)

    def run(self) -> list:
        try:
            return asyncio.run(self._run_all())
        finally:
            if self._graph is not None:
                context = dict(getattr(self._graph, "context", {}) or {})
                self.context = {k: v for k, v in context.items() if isinstance(k, str) and _json_ok(v)}

    async def _run_all(self) -> list:
        if self._graph is None:
            self.check()
        graph = self._graph
        runs = self.spec["inputs"] or [None]
        out = []
        for i, entry in enumerate(runs):
            if entry is None:
                run_inputs, components, input_type = {}, [], None
            else:
                run_inputs = {"input_value": entry["input_value"]}
                components, input_type = entry["components"], entry["type"]
            if len(runs) > 1:
                self.emitter.note(run=i, inputs=run_inputs)
            outputs = await self._run_once(graph, run_inputs, components, input_type)
            out.append({"inputs": run_inputs, "outputs": outputs})
            if self.failed:  # Langflow's run raised here: later inputs do not run
                break
        return out

    async def _run_once(self, graph, run_inputs: dict, components: list, input_type) -> list:
        """Graph._run, one vertex at a time."""
        if run_inputs:
            graph._set_inputs(components, dict(run_inputs), input_type)  # noqa: SLF001
        session_id = self.spec["session_id"]
        if session_id:  # runner.py put it in the payload too; _run sets it on the vertices
            for vertex_id in getattr(graph, "has_session_id_vertices", []):
                graph.get_vertex(vertex_id).update_raw_params({"session_id": session_id})
        if not await self._process(graph):
            self.failed = True
        return await self._harvest(graph)

    async def _process(self, graph) -> bool:
        """Graph.process: layer by layer in lfx's order; False once a vertex failed."""
        to_process = deque(graph.sort_vertices())
        initialize_run = getattr(graph, "initialize_run", None)
        if initialize_run is not None:
            await initialize_run()
        lock = asyncio.Lock()
        while to_process:
            batch = list(to_process)
            to_process.clear()
            built = []
            for vertex_id in batch:
                vertex = await self._build(graph, vertex_id)
                if vertex is None:
                    return False
                built.append(vertex)
            for vertex in built:
                removed = graph.run_manager.remove_vertex_from_runnables(vertex.id)
                if inspect.isawaitable(removed):  # a coroutine in some lfx revisions
                    await removed
            following = []
            for vertex in built:
                following.extend(await graph.get_next_runnable_vertices(lock, vertex=vertex, cache=False))
            to_process.extend(sorted(set(following)))
        return True

    async def _build(self, graph, vertex_id: str):
        """Builds one vertex and reports it; the vertex, or None when it failed."""
        emitter = self.emitter
        vertex = graph.get_vertex(vertex_id)
        emitter.vertex_start(vertex_id, vertex.display_name)
        self._current = vertex_id
        cap = emitter.begin_capture()
        started = time.perf_counter()
        try:
            result = await graph.build_vertex(
                vertex_id=vertex_id, user_id=graph.user_id, inputs_dict={},
                fallback_to_env_vars=bool(self.spec["runtime_options"].get("fallback_to_env_vars")),
                event_manager=self._events)
        except Exception as exc:  # noqa: BLE001 - the vertex failed: Langflow stops here
            logs = emitter.end_capture(cap)
            self._failed(vertex, exc, logs, time.perf_counter() - started)
            return None
        finally:
            self._current = None
        logs = emitter.end_capture(cap)
        data = result.result_dict
        outputs = getattr(data, "outputs", None) or {}
        emitter.step(vertex_id, vertex.display_name, bool(result.valid),
                     round((time.perf_counter() - started) * 1000), outputs, logs,
                     result=_dump(data),
                     types={name: type(value).__name__
                            for name, value in (getattr(vertex, "results", None) or {}).items()})
        return vertex

    def _failed(self, vertex, exc, logs: str, elapsed: float) -> None:
        error = _langflow_error(vertex, exc)
        tb = getattr(exc, "formatted_traceback", None) or traceback.format_exc()
        label = "output"
        outputs = getattr(vertex, "outputs", None)
        if outputs and isinstance(outputs[0], dict) and isinstance(outputs[0].get("name"), str):
            label = outputs[0]["name"]
        if logs and not logs.endswith("\n"):
            logs += "\n"
        self.emitter.step(vertex.id, vertex.display_name, False, round(elapsed * 1000),
                          self.error_outputs(label, error, tb), logs + error, error=error)

    async def _harvest(self, graph) -> list:
        """Graph._run: built vertices the caller asked for, else every output vertex; a
        vertex without a result is drained first (consume_async_generator)."""
        wanted = self.spec["outputs"]
        stream = bool(self.spec["runtime_options"].get("stream"))
        out = []
        for vertex in graph.vertices:
            if not vertex.built:
                continue
            if not vertex.result and not stream and hasattr(vertex, "consume_async_generator"):
                await vertex.consume_async_generator()
            if (not wanted and vertex.is_output) or vertex.display_name in wanted or vertex.id in wanted:
                out.append(_dump(vertex.result))
        return out


def _dropped(*, manager, event_type, data) -> None:  # noqa: ARG001
    """An lfx event the guest does not send: the host makes its own from the frames."""
