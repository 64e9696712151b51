"""guestflow guest runner, lfx path: run the graph with Langflow's own engine.

Imported lazily by runner.py when spec.json's `executor` is `lfx` (or `auto` and lfx
imports). The host uploads it next to runner.py. It rebuilds the graph with
`Graph.from_payload`, targets the caller's input the way `Graph._run` does
(`_set_inputs`), drives `async_start` with the forwarded runtime options, reports one
`vertex_start`/`step` per built vertex, and harvests outputs exactly like `Graph._run`:
built vertices whose id or display name the caller asked for, else every output vertex.

The lfx API used here, and nothing else (tests/fixtures/lfx_guest/lfx is a stand-in that
implements exactly this): `lfx.graph.graph.base.Graph` with `from_payload(payload)`,
`_prepared`/`prepare()`, `_set_inputs(components, inputs, input_type)`,
`async_start(...)` (an async generator of `VertexBuildResult`s ending with a `Finish`),
`_run_queue` (its head is the vertex the next step builds), `get_vertex(id)`,
`get_all_successors(vertex, flat=True)` and `vertices`; a vertex's `id`, `display_name`,
`outputs`, `built`, `is_output` and `result` (a `ResultData` with `model_dump`); a build
result's `vertex`, `valid` and `result_dict.outputs`; `lfx.graph.graph.constants.Finish`.

Unlike the core executor, a failing vertex stops the run (Langflow's behaviour); every
vertex not built by then gets a not-built step: "upstream <id> failed" for those downstream
of the failure, "the run stopped when <id> failed" for the others. Generators (streaming
outputs) are not drained, so such a vertex reports an empty result, as the seed documents.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import time
import traceback

_GRAPH = None
_FINISH = None
VERSION = None
_FORWARDED = ("max_iterations", "config", "reset_output_values", "fallback_to_env_vars")
_NEEDED = ("from_payload", "async_start", "prepare", "get_vertex")


def load() -> None:
    """Imports lfx; raises (ImportError or whatever lfx raises) when it cannot be used."""
    global _GRAPH, _FINISH, VERSION  # noqa: PLW0603 - a lazy import cache
    import lfx  # noqa: PLC0415
    from lfx.graph.graph.base import Graph  # noqa: PLC0415

    missing = [name for name in _NEEDED if not callable(getattr(Graph, name, None))]
    if missing:
        raise ImportError(f"lfx's Graph has no {', '.join(missing)}: this lfx is not one "
                          "guestflow can drive")
    try:
        from lfx.graph.graph.constants import Finish  # noqa: PLC0415
    except ImportError:
        Finish = None  # noqa: N806
    _GRAPH, _FINISH = Graph, Finish
    VERSION = _version(lfx)


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


def _is_finish(result) -> bool:
    if _FINISH is not None and isinstance(result, _FINISH):
        return True
    return type(result).__name__ == "Finish"


def _peek(graph):
    queue = getattr(graph, "_run_queue", None)
    try:
        return queue[0] if queue else None
    except (TypeError, IndexError, KeyError):
        return None


def _vertex(graph, vid):
    try:
        return graph.get_vertex(vid)
    except Exception:  # noqa: BLE001 - lfx raises ValueError for an unknown id
        return None


def _name(graph, vid) -> str:
    vertex = _vertex(graph, vid)
    name = getattr(vertex, "display_name", None)
    return name if isinstance(name, str) and name else vid


def _downstream(graph, vertex) -> set:
    """Ids of every vertex downstream of `vertex` (lfx's flat list may repeat a vertex)."""
    try:
        return {v.id for v in graph.get_all_successors(vertex, flat=True)}
    except Exception:  # noqa: BLE001 - older lfx: no flat successors; walk successor_map
        seen, stack = set(), [vertex.id]
        successor_map = getattr(graph, "successor_map", {}) or {}
        while stack:
            for nxt in successor_map.get(stack.pop(), []):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen


class LfxExecutor:
    name = "lfx"

    def __init__(self, spec: dict, emitter, error_outputs, fatal) -> None:
        self.spec = spec
        self.emitter = emitter
        self.error_outputs = error_outputs  # runner.error_outputs: one failure shape for both
        self.fatal = fatal  # runner.RunnerFatal(message, code=None, tb="", **extra)
        self.payload = spec["graph"].payload
        self.lfx_version = VERSION
        self.dropped = []
        self._loaded = None  # the first run's graph, built by check()

    def _load(self):
        try:
            return _GRAPH.from_payload(copy.deepcopy(self.payload))
        except Exception as exc:  # noqa: BLE001 - lfx refuses the flow: the caller's to fix
            raise self.fatal(f"lfx could not load the flow: {type(exc).__name__}: {exc}",
                             code="bad_request", tb=traceback.format_exc()[-8000:]) from None

    def check(self) -> None:
        """Loads the graph once before anything runs: a flow lfx refuses never half-runs."""
        self._loaded = self._load()

    def run(self) -> list:
        return asyncio.run(self._run_all())

    async def _run_all(self) -> list:
        spec = self.spec
        runs = spec["inputs"] or [None]
        out = []
        for i, entry in enumerate(runs):
            if entry is None:
                run_inputs, components, input_type = {}, [], None
            else:
                run_inputs = {"input_value": entry["input_value"]}
                components, input_type = entry["components"], entry["type"]
            if len(runs) > 1:
                self.emitter.note(run=i, inputs=run_inputs)
            outputs = await self._run_once(run_inputs, components, input_type)
            out.append({"inputs": run_inputs, "outputs": outputs})
        return out

    def _start_kwargs(self, graph, run_inputs: dict, targeted: bool) -> dict:
        params = inspect.signature(graph.async_start).parameters
        options = self.spec["runtime_options"]
        kwargs = {}
        for key in _FORWARDED:
            if options.get(key) is None:
                continue
            if key in params:
                kwargs[key] = options[key]
            elif key not in self.dropped:
                self.dropped.append(key)
                self.emitter.note(warning=f"this lfx's async_start has no {key}; not forwarded")
        if run_inputs and not targeted and "inputs" in params:
            kwargs["inputs"] = run_inputs
        return kwargs

    async def _run_once(self, run_inputs: dict, components: list, input_type) -> list:
        emitter = self.emitter
        graph = self._loaded if self._loaded is not None else self._load()
        self._loaded = None
        if not getattr(graph, "_prepared", True):
            graph.prepare()
        targeted = False
        if run_inputs and hasattr(graph, "_set_inputs"):
            graph._set_inputs(components, dict(run_inputs), input_type)  # noqa: SLF001
            targeted = True
        stream = graph.async_start(**self._start_kwargs(graph, run_inputs, targeted))
        while True:
            vid = _peek(graph)  # astep builds the head of the run queue
            if vid is not None:
                emitter.vertex_start(vid, _name(graph, vid))
            cap = emitter.begin_capture()
            started = time.perf_counter()
            try:
                result = await stream.__anext__()
            except StopAsyncIteration:
                emitter.end_capture(cap)
                break
            except Exception as exc:  # noqa: BLE001 - a vertex build failed: Langflow stops here
                logs = emitter.end_capture(cap)
                if vid is None:  # nothing to blame: lfx itself stopped
                    raise self.fatal(f"lfx stopped the run: {type(exc).__name__}: {exc}",
                                     tb=traceback.format_exc()[-8000:]) from None
                self._failed(graph, vid, exc, logs, time.perf_counter() - started)
                break
            logs = emitter.end_capture(cap)
            if _is_finish(result):
                break
            vertex = getattr(result, "vertex", None)
            if vertex is None:
                continue
            data = getattr(result, "result_dict", None)
            outputs = getattr(data, "outputs", None) or {}
            emitter.step(vertex.id, vertex.display_name, bool(getattr(result, "valid", True)),
                         round((time.perf_counter() - started) * 1000), outputs, logs)
        return self._harvest(graph)

    def _failed(self, graph, vid, exc, logs, elapsed) -> None:
        error = f"{type(exc).__name__}: {exc}"
        tb = getattr(exc, "formatted_traceback", None) or traceback.format_exc()
        vertex = _vertex(graph, vid)
        label = "output"
        outputs = getattr(vertex, "outputs", None)
        if outputs and isinstance(outputs[0], dict) and isinstance(outputs[0].get("name"), str):
            label = outputs[0]["name"]
        if logs and not logs.endswith("\n"):
            logs += "\n"
        self.emitter.step(vid, _name(graph, vid), False, round(elapsed * 1000),
                          self.error_outputs(label, error, tb), logs + error, error=error)
        downstream = _downstream(graph, vertex) if vertex is not None else set()
        for other in graph.vertices:  # payload order; each unbuilt vertex once
            if other.id == vid or getattr(other, "built", False):
                continue
            if other.id in downstream:
                message = f"not built: upstream {vid} failed"
            else:
                message = f"not built: the run stopped when {vid} failed (lfx stops at the first failure)"
            self.emitter.step(other.id, other.display_name, False, 0, {"error": message}, message,
                              error=message)

    def _harvest(self, graph) -> list:
        """Graph._run: built vertices the caller asked for, else every output vertex."""
        wanted = self.spec["outputs"]
        out = []
        for vertex in graph.vertices:
            if not vertex.built:
                continue
            if (not wanted and vertex.is_output) or vertex.display_name in wanted or vertex.id in wanted:
                result = vertex.result
                if result is not None and hasattr(result, "model_dump"):
                    try:
                        result = result.model_dump(mode="json")
                    except Exception:  # noqa: BLE001 - fall back to the runner's own encoding
                        result = result.model_dump()
                out.append(result)
        return out
