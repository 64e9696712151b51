#!/usr/bin/env python3
"""guestflow guest runner: executes one serialized Langflow graph and prints frames.

Invoked by the host as ``python3 /tmp/run/runner.py /tmp/run/spec.json``
(``PYTHONUNBUFFERED=1``, cwd ``/workspace``, inside ``timeout --kill-after=5 N``).
Python 3 standard library only. The frame protocol and every behaviour decision are
described in ``guest/README.md``. This file is the entry: it takes the run's secrets
(``variables.json``, unlinked at once), loads and validates spec.json, prepares the graph
payload (tweaks, the session id, ``load_from_db`` fields), picks the executor and runs it.
The pieces, beside it in the run directory:

* ``frame_protocol.py``: stdout capture and the frames (encoding, secret masking);
  ``frame_limits.py``: a frame too large, clipped to fit.
* ``flow_graph.py``: the graph model (Langflow's shapes, canvas notes, build order);
  ``flow_groups.py``: groups flattened.
* ``run_services.py``: what the host ships in: variables, session id, history;
  ``run_tweaks.py``: tweaks.
* ``core_values.py``, ``core_components.py``, ``core_executor.py``: the core executor;
  ``core_python.py``: its Python Interpreter.
* ``lfx_start.py``: the way to lfx (install_lfx, loading ``lfx_path.py``, why lfx cannot run);
  ``lfx_path.py``: Langflow's own engine (``executor: lfx``).

Each run compiles what it imports afresh, so each piece is imported only by a run that
needs it (guest/README.md).

Both executors stop at the first vertex that fails (Langflow's behaviour): its ``step``
(valid false) is the last step; the run then still ends with ``outputs`` and ``done`` and
the host decides. ``fatal`` (exit 1) is only for a bad spec, a flow the executor refuses,
an unusable executor or a runner fault.
"""

from __future__ import annotations

import json
import os
import sys

sys.dont_write_bytecode = True  # a run directory is used once: no __pycache__ left beside us

# Every run compiles these files afresh (a new run directory, no bytecode), so what a run
# does not need is imported where it is needed: the core executor only when it runs,
# tweaks only when the spec has some, lfx_start.py only when lfx may run, traceback on a fault.
from flow_graph import Graph  # noqa: E402
from frame_protocol import Emitter, OutputCapture, encode_frame, write_all  # noqa: E402
from run_errors import RunnerFatal, SpecError  # noqa: E402
from run_services import resolve_load_from_db, set_session_id, take_variables  # noqa: E402

RUNNER_VERSION = 1
EXECUTORS = ("auto", "core", "lfx")  # spec.json "executor"; auto is the default
HISTORY_TEXT_KEYS = ("text", "sender", "sender_name", "session_id", "timestamp", "id", "flow_id",
                     "context_id")


# -- spec ----------------------------------------------------------------------------------


def _optional(spec: dict, key: str, kind, what: str):
    value = spec.get(key)
    if value is not None and not isinstance(value, kind):
        raise SpecError(f"spec.{key}: expected {what}")
    return value


def _history(spec: dict) -> list:
    """spec.history: Langflow message dicts, oldest first; the fields the runner reads are typed."""
    history = _optional(spec, "history", list, "a list of Langflow messages (oldest first)") or []
    for i, message in enumerate(history):
        where = f"spec.history[{i}]"
        if not isinstance(message, dict):
            raise SpecError(f"{where}: expected an object (a Langflow message)")
        for key in HISTORY_TEXT_KEYS:
            if message.get(key) is not None and not isinstance(message[key], str):
                raise SpecError(f"{where}.{key}: expected a string")
        if message.get("error") is not None and not isinstance(message["error"], bool):
            raise SpecError(f"{where}.error: expected a boolean")
        for key, kind, what in (("files", list, "a list"), ("properties", dict, "an object")):
            if message.get(key) is not None and not isinstance(message[key], kind):
                raise SpecError(f"{where}.{key}: expected {what}")
    return history


def validate_spec(spec, variables=None) -> dict:
    """Checks spec.json and returns it normalized; raises SpecError naming the field.

    The graph payload is prepared before it is modelled, in the order Langflow's run applies
    these: tweaks (process_tweaks), the session id (Graph._run), then the `load_from_db`
    fields from `variables` (resolved when a vertex builds; RunnerFatal when one is not set).
    """
    if not isinstance(spec, dict):
        raise SpecError("spec: expected a JSON object")
    if "graph" not in spec:
        raise SpecError("spec.graph: required (the Graph.dump() nodes and edges)")
    session_id = _optional(spec, "session_id", str, "a string") or ""
    user_id = _optional(spec, "user_id", str, "a string")
    context = _optional(spec, "context", dict, "an object (the request's variables)")
    tweaks = _optional(spec, "tweaks", dict, "an object ({vertex id or display name: {field: "
                       "value}} or {field: value})") or {}
    history = _history(spec)
    if tweaks:
        from run_tweaks import apply_tweaks  # noqa: PLC0415 - most runs have no tweaks

        apply_tweaks(spec["graph"], tweaks)
    set_session_id(spec["graph"], session_id)
    resolve_load_from_db(spec["graph"], variables or {})
    graph = Graph(spec["graph"])

    raw_inputs = spec.get("inputs", [])
    if raw_inputs is None:
        raw_inputs = []
    if not isinstance(raw_inputs, list):
        raise SpecError("spec.inputs: expected a list")
    inputs = []
    for i, entry in enumerate(raw_inputs):
        where = f"spec.inputs[{i}]"
        if isinstance(entry, str):
            entry = {"input_value": entry}
        if not isinstance(entry, dict):
            raise SpecError(f"{where}: expected an object")
        value = entry.get("input_value")
        if value is None:
            value = ""  # Langflow: a None input_value defaults to ""
        if not isinstance(value, str):
            raise SpecError(f"{where}.input_value: expected a string")
        itype = entry.get("type")
        if itype is None:
            itype = "chat"  # Graph.arun's default
        if itype not in ("chat", "text", "any"):
            raise SpecError(f"{where}.type: expected one of chat, text, any")
        components = entry.get("components")
        if components is None:
            components = []
        if not isinstance(components, list) or not all(isinstance(c, str) for c in components):
            raise SpecError(f"{where}.components: expected a list of vertex ids or display names")
        inputs.append({"input_value": value, "type": itype, "components": components})

    outputs = spec.get("outputs", [])
    if outputs is None:
        outputs = []
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise SpecError("spec.outputs: expected a list of vertex ids or display names")

    options = spec.get("runtime_options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise SpecError("spec.runtime_options: expected an object")
    where = "spec.runtime_options"
    max_iterations = options.get("max_iterations")
    if max_iterations is not None and (
            isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1):
        raise SpecError(f"{where}.max_iterations: expected a positive integer")
    if options.get("config") is not None and not isinstance(options.get("config"), dict):
        raise SpecError(f"{where}.config: expected an object")
    for key in ("reset_output_values", "fallback_to_env_vars"):
        if options.get(key) is not None and not isinstance(options.get(key), bool):
            raise SpecError(f"{where}.{key}: expected a boolean")

    install_lfx = spec.get("install_lfx", False)
    if install_lfx is None:
        install_lfx = False
    if not isinstance(install_lfx, bool):
        raise SpecError("spec.install_lfx: expected a boolean")
    pip = spec.get("pip", [])
    if pip is None:
        pip = []
    if not isinstance(pip, list):
        raise SpecError("spec.pip: expected a list of requirement strings")
    for i, req in enumerate(pip):
        if not isinstance(req, str) or not req.strip() or any(c in req for c in "\0\r\n"):
            raise SpecError(f"spec.pip[{i}]: expected a non-empty single-line string")

    executor = spec.get("executor", "auto")
    if executor is None:
        executor = "auto"
    if not isinstance(executor, str) or executor not in EXECUTORS:
        shown = json.dumps(executor)[:80] if not isinstance(executor, str) else repr(executor[:80])
        raise SpecError(f"executor: expected one of {', '.join(EXECUTORS)} (got {shown})")
    if install_lfx and executor == "core":
        raise SpecError("install_lfx: true needs executor lfx or auto, not core")

    return {"graph": graph, "inputs": inputs, "outputs": outputs,
            "runtime_options": {k: v for k, v in options.items() if not str(k).startswith("_")},
            "install_lfx": install_lfx, "pip": pip, "executor": executor,
            "session_id": session_id, "user_id": user_id, "context": context, "tweaks": tweaks,
            "history": history, "variables": dict(variables or {})}


def load_spec(path: str, variables=None) -> dict:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:  # the host's file, not the caller's flow: no bad_request
        raise RunnerFatal(f"runner: cannot read the spec {path}: {exc.strerror or exc}") from None
    try:
        spec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SpecError(f"spec: not UTF-8 ({exc})") from None
    except ValueError as exc:
        raise SpecError(f"spec: not valid JSON ({exc})") from None
    return validate_spec(spec, variables)



# -- choosing the executor ---------------------------------------------------------------------


def _lfx_importable() -> bool:
    import importlib.util  # noqa: PLC0415

    try:
        return importlib.util.find_spec("lfx") is not None
    except (ImportError, ValueError):  # a broken lfx: let loading it tell why
        return True


def _core(spec: dict, emitter: Emitter, fallback_reason=None):
    from core_executor import CoreExecutor  # noqa: PLC0415 - not when lfx runs the flow

    return CoreExecutor(spec, emitter, fallback_reason)


def choose_executor(spec: dict, emitter: Emitter):
    """(executor, reason) for spec["executor"]; `lfx` never falls back to core."""
    mode = spec["executor"]
    if mode == "core":  # validate_spec refuses install_lfx with core
        return _core(spec, emitter), "executor core was requested"
    if mode == "auto" and not spec["install_lfx"] and not _lfx_importable():
        reason = "executor auto: lfx is not installed"
        return _core(spec, emitter, reason), reason
    from lfx_start import choose_lfx  # noqa: PLC0415 - only a run that may use lfx

    return choose_lfx(spec, emitter, _core)


# -- main ----------------------------------------------------------------------------------


def _warnings(spec: dict, emitter: Emitter) -> None:
    """Notes about parts of the spec that will not do what the caller may expect."""
    graph: Graph = spec["graph"]
    known = {n.id for n in graph.nodes} | {n.name for n in graph.nodes}
    missing = [o for o in spec["outputs"] if o not in known]
    if missing:
        emitter.note(warning="requested outputs match no vertex", outputs=missing)
    for i, entry in enumerate(spec["inputs"]):
        unknown = [c for c in entry["components"] if c not in known]
        if unknown:
            emitter.note(warning="input components match no vertex", input=i, components=unknown)
    frozen = [n.id for n in graph.nodes if n.frozen]
    if frozen:
        emitter.note(warning="frozen vertices are built: a guest has no results cached from "
                     "earlier runs (lfx also builds a frozen vertex on a cache miss)",
                     vertices=frozen)


def main(argv: list) -> int:
    # The secrets first: variables.json is gone before any lfx import or user code runs.
    variables, variables_error = take_variables(argv[1]) if len(argv) == 2 else ({}, None)
    try:
        capture = OutputCapture()
    except BaseException as exc:  # noqa: BLE001 - e.g. fd 1 closed: report on it directly
        line = encode_frame({"t": "fatal", "error": f"runner error: cannot set up stdout capture: "
                             f"{type(exc).__name__}: {exc}", "traceback": ""})
        try:
            write_all(1, line)
        except OSError:
            pass
        return 1
    emitter = Emitter(capture, variables.values())
    try:
        if len(argv) != 2:
            raise RunnerFatal("runner: usage: runner.py /tmp/run/spec.json")
        if variables_error is not None:
            raise RunnerFatal(f"invalid variables: {variables_error}", code="bad_request")
        spec = load_spec(argv[1], variables)
        executor, why = choose_executor(spec, emitter)
        graph = spec["graph"]
        start = {"runner": "guestflow", "version": RUNNER_VERSION, "executor": executor.name,
                 "reason": why, "python": sys.version.split()[0], "vertices": len(graph.nodes),
                 "edges": len(graph.edges), "runs": max(1, len(spec["inputs"]))}
        if getattr(executor, "lfx_version", None):
            start["lfx_version"] = executor.lfx_version
        if graph.ignored:
            start["ignored"] = list(graph.ignored)
        if graph.groups:
            start["groups"] = list(graph.groups)
        emitter.note(**start)
        _warnings(spec, emitter)
        executor.check()  # a flow the executor cannot run is refused before any vertex runs
        run_outputs = executor.run()
        emitter.outputs(run_outputs)
        context = getattr(executor, "context", None)
        if isinstance(context, dict):
            emitter.state(context)
        emitter.done()
        return 0
    except SpecError as exc:
        emitter.fatal(f"invalid spec: {exc}", code="bad_request")
    except RunnerFatal as exc:
        emitter.fatal(str(exc), exc.tb, exc.code, **exc.extra)
    except BaseException as exc:  # noqa: BLE001 - any runner fault becomes a fatal frame
        import traceback  # noqa: PLC0415 - only a fault needs it

        emitter.fatal(f"runner error: {type(exc).__name__}: {exc}", traceback.format_exc()[-8000:])
    return 1


def _entry() -> None:
    code = 1
    try:
        code = main(sys.argv)
    except BaseException:  # noqa: BLE001 - even frame writing failed: nothing left to report to
        code = 1
    # os._exit: user threads or grandchildren holding the capture pipe must not keep
    # the runner alive after its last frame.
    os._exit(code)


if __name__ == "__main__":
    _entry()
