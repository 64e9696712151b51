"""guestflow guest runner: the core executor (`executor: core`, or `auto` without a usable lfx).

Runs the vertices one at a time in a deterministic topological order for the component
types in `core_components.CORE_COMPONENTS`, refusing a graph with any other type (or a
cycle) before any vertex runs. Like Langflow's run it stops at the first vertex that fails:
that vertex's step (valid false) is the last step. Streaming outputs (generators) are
drained before the vertex's step, one `token` frame per chunk, as `Graph._run` drains them.
"""

from __future__ import annotations

import time

from core_components import (
    CORE_COMPONENTS,
    INPUT_FIELD_NAME,
    BuildContext,
    UserCodeError,
    core_refusal,
    is_stream,
)
from core_values import Message, output_log, result_data, type_names
from flow_graph import Graph, Node
from frame_protocol import Emitter, error_outputs
from run_errors import VertexFailure
from run_services import History


def _targeted(node: Node, run_inputs: dict, components: list, input_type) -> bool:
    """Graph._set_inputs: which input vertices the caller's input goes to."""
    if not node.is_input or not run_inputs:
        return False
    if components and node.id not in components and node.name not in components:
        return False
    if input_type is not None and input_type != "any" and input_type not in node.id.lower():
        return False
    return True


class CoreExecutor:
    name = "core"

    def __init__(self, spec: dict, emitter: Emitter, fallback_reason: str | None = None) -> None:
        self.graph: Graph = spec["graph"]
        self.spec = spec
        self.emitter = emitter
        self.fallback_reason = fallback_reason  # why auto did not pick lfx, if it did not
        self.session_id = spec["session_id"] or ""
        self.history = History(spec["history"])
        self.context = spec["context"]  # graph.context: nothing in the core set changes it
        self.failed = False

    def check(self) -> None:
        """Refuses, before anything runs, a graph this executor cannot finish."""
        refusal = core_refusal(self.graph, self.fallback_reason)
        if refusal is not None:
            raise refusal

    def run(self) -> list:
        spec, emitter = self.spec, self.emitter
        requested = spec["outputs"]
        runs = spec["inputs"] or [None]
        run_outputs = []
        for i, entry in enumerate(runs):
            if entry is None:
                run_inputs, components, input_type = {}, [], None
            else:
                run_inputs = {INPUT_FIELD_NAME: entry["input_value"]}
                components, input_type = entry["components"], entry["type"]
            if len(runs) > 1:
                emitter.note(run=i, inputs=run_inputs)
            outputs = self._run_once(run_inputs, components, input_type, requested)
            run_outputs.append({"inputs": run_inputs, "outputs": outputs})
            if self.failed:  # Langflow's run raises here: later inputs do not run either
                break
        return run_outputs

    def _build(self, node: Node, ctx: BuildContext):
        """(values, error, traceback) of one vertex; streams are drained here."""
        try:
            produced = CORE_COMPONENTS[node.type](ctx)  # check() refused any other type
            for name, value in produced.items():
                if is_stream(value):
                    produced[name] = Message(ctx.drain(value))
            return produced, None, None
        except VertexFailure as exc:
            return None, str(exc), ""
        except UserCodeError as exc:  # its text is the user code's "ValueError: boom"
            return None, str(exc), exc.tb
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a component fault fails its vertex only
            import traceback  # noqa: PLC0415 - only a failed vertex needs it

            # The exception's own text, as lfx's `{exc}` in ComponentBuildError: the host
            # names the vertex ("Error building Component <name>: ...").
            return None, str(exc), traceback.format_exc()

    def _run_once(self, run_inputs, components, input_type, requested) -> list:
        graph, emitter = self.graph, self.emitter
        values: dict[str, dict] = {}
        results: dict[str, dict] = {}
        for node in graph.order:
            incoming: dict[str, list] = {}
            for edge in graph.incoming[node.id]:
                produced = values[edge.source]
                if edge.output is not None and edge.output in produced:
                    value = produced[edge.output]
                else:
                    value = next(iter(produced.values()), None)
                incoming.setdefault(edge.field, []).append(value)
            caller_input = (run_inputs.get(INPUT_FIELD_NAME)
                            if _targeted(node, run_inputs, components, input_type) else None)
            ctx = BuildContext(node, incoming, caller_input, self)
            emitter.vertex_start(node.id, node.name)
            cap = emitter.begin_capture()
            started = time.perf_counter()
            produced, error, tb = self._build(node, ctx)
            elapsed = time.perf_counter() - started
            logs = emitter.end_capture(cap)
            if error is None:
                values[node.id] = produced
                results[node.id] = result_data(node, produced, elapsed)
                emitter.step(node.id, node.name, True, round(elapsed * 1000),
                             {name: output_log(v) for name, v in produced.items()}, logs,
                             result=results[node.id], types=type_names(produced))
                continue
            if logs and not logs.endswith("\n"):
                logs += "\n"
            emitter.step(node.id, node.name, False, round(elapsed * 1000),
                         error_outputs(node.outputs[0] if node.outputs else "output",
                                       error, tb or ""), logs + error, error=error)
            self.failed = True  # Langflow stops the run at the first vertex that fails
            break
        harvested = []
        for node in graph.nodes:  # Graph._run: payload order, built vertices only
            if node.id not in results:
                continue
            if (not requested and node.is_output) or node.id in requested or node.name in requested:
                harvested.append(results[node.id])
        return harvested
