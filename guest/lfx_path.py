"""guestflow guest runner, lfx path: run the graph with Langflow's own engine.

Imported lazily by runner.py only when `lfx` is importable in the guest (a template with
Langflow baked in, or `install_lfx`). The host uploads it next to runner.py. It rebuilds
the graph with `Graph.from_payload`, targets the caller's input the way `Graph._run` does
(`_set_inputs`), drives `async_start` with the forwarded runtime options, reports one
`vertex_start`/`step` per built vertex, and harvests outputs exactly like `Graph._run`:
built vertices whose id or display name the caller asked for, else every output vertex.

Unlike the core executor, a failing vertex stops the run (Langflow's behaviour); its
successors are then reported as not built. Generators (streaming outputs) are not
drained, so such a vertex reports an empty result, as the seed documents.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import time
import traceback

_GRAPH = None
_FINISH = None
_FORWARDED = ("max_iterations", "config", "reset_output_values", "fallback_to_env_vars")


def load() -> None:
    """Imports lfx; raises (ImportError or whatever lfx raises) when it cannot be used."""
    global _GRAPH, _FINISH  # noqa: PLW0603 - a lazy import cache
    from lfx.graph.graph.base import Graph  # noqa: PLC0415

    try:
        from lfx.graph.graph.constants import Finish  # noqa: PLC0415
    except ImportError:
        Finish = None  # noqa: N806
    _GRAPH, _FINISH = Graph, Finish


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


def _name(graph, vid) -> str:
    try:
        return graph.get_vertex(vid).display_name
    except Exception:  # noqa: BLE001
        return vid


def _successors(graph, vertex) -> list:
    try:
        return list(graph.get_all_successors(vertex, flat=True))
    except Exception:  # noqa: BLE001 - older lfx: no flat successors; report nothing extra
        return []


class LfxExecutor:
    name = "lfx"

    def __init__(self, spec: dict, emitter, error_outputs) -> None:
        self.spec = spec
        self.emitter = emitter
        self.error_outputs = error_outputs  # runner.error_outputs: one failure shape for both
        self.payload = spec["graph"].payload
        self.dropped = []

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
        graph = _GRAPH.from_payload(copy.deepcopy(self.payload))
        if not getattr(graph, "_prepared", True):
            graph.prepare()
        targeted = False
        if run_inputs and hasattr(graph, "_set_inputs"):
            graph._set_inputs(components, dict(run_inputs), input_type)  # noqa: SLF001
            targeted = True
        stream = graph.async_start(**self._start_kwargs(graph, run_inputs, targeted))
        while True:
            vid = _peek(graph)
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
        vertex = None
        if vid is not None:
            try:
                vertex = graph.get_vertex(vid)
            except Exception:  # noqa: BLE001
                vertex = None
        vid = vid or "graph"
        name = vertex.display_name if vertex is not None else vid
        label = "output"
        if vertex is not None and getattr(vertex, "outputs", None):
            label = vertex.outputs[0].get("name", "output")
        if logs and not logs.endswith("\n"):
            logs += "\n"
        self.emitter.step(vid, name, False, round(elapsed * 1000),
                          self.error_outputs(label, error, tb), logs + error, error=error)
        for succ in _successors(graph, vertex) if vertex is not None else []:
            if getattr(succ, "built", False):
                continue
            message = f"not built: upstream {vid} failed"
            self.emitter.step(succ.id, succ.display_name, False, 0, {"error": message}, message,
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
