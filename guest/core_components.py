"""guestflow guest runner: the component types the core executor builds, as Langflow's do.

Each builder takes a `BuildContext` and returns `{output name: value}`. A value may be a
generator or an async generator (a streaming output): the executor drains it into a Message,
one `token` frame per chunk, before the vertex's step (`Graph._run` / `consume_async_generator`).
"""

from __future__ import annotations

import types

from core_values import Data, DataFrame, Message, to_record, to_text
from flow_graph import Graph, Node
from run_errors import LFX_IMAGE_HINT, RunnerFatal, VertexFailure
from run_services import truthy

INPUT_FIELD_NAME = "input_value"
MEMORY_ALL_SENDERS = "Machine and User"


def is_stream(value) -> bool:
    """A streaming output: what Langflow drains with consume_async_generator."""
    return isinstance(value, (types.GeneratorType, types.AsyncGeneratorType))


class BuildContext:
    """What a component builder sees: its node, incoming values by field, the caller input,
    and the run (its session id, history, and the emitter for tokens and stored messages)."""

    def __init__(self, node: Node, incoming: dict, caller_input, run) -> None:
        self.node = node
        self.incoming = incoming  # field -> [values in edge order]
        self.caller_input = caller_input  # str if the caller's input targets this vertex
        self.run = run  # the CoreExecutor: session_id, history, emitter
        self.capture = run.emitter.capture

    def values(self, field: str) -> list:
        return self.incoming.get(field, [])

    def value(self, field: str, default=None):
        """The last edge into `field` wins (Langflow params semantics), else the template value."""
        vals = self.values(field)
        return vals[-1] if vals else self.node.field(field, default)

    def text(self, field: str, default: str = "") -> str:
        return to_text(self.value(field, default))

    def out(self, default: str) -> str:
        return self.node.outputs[0] if self.node.outputs else default

    def should_store(self) -> bool:
        """`should_store_message` (a BoolInput whose default is true)."""
        return truthy(self.value("should_store_message", True))

    def store(self, message: Message) -> None:
        """Langflow's send_message / astore_message: into the session's history, and a
        `message` frame carrying the stored dict."""
        stored = message.store(self.node)
        self.run.history.store(stored)
        self.run.emitter.message(self.node.id, stored)

    def drain(self, stream) -> str:
        """Drains a generator or async generator, one `token` frame per chunk (Langflow's
        on_token: chunk and message id); returns the whole text."""
        import uuid  # noqa: PLC0415 - here, not at the top: most runs never stream

        message_id = str(uuid.uuid4())
        parts: list = []

        def take(chunk) -> None:
            text = chunk.text if isinstance(getattr(chunk, "text", None), str) else to_text(chunk)
            parts.append(text)
            self.run.emitter.token(self.node.id, text, message_id)

        if isinstance(stream, types.AsyncGeneratorType):
            import asyncio  # noqa: PLC0415 - 40 ms to import: only for an async stream

            async def pump() -> None:
                async for chunk in stream:
                    take(chunk)

            asyncio.run(pump())
        else:
            for chunk in stream:
                take(chunk)
        return "".join(parts)


def _sender(ctx: BuildContext, default_sender: str, default_name: str):
    return (ctx.text("sender", default_sender) or default_sender,
            ctx.text("sender_name", default_name) or default_name)


def build_chat_input(ctx: BuildContext) -> dict:
    """ChatInput.message_response: stored when it has a session id (its own or the run's) and
    `should_store_message`."""
    text = ctx.caller_input if ctx.caller_input is not None else ctx.text(INPUT_FIELD_NAME)
    sender, name = _sender(ctx, "User", "User")
    session_id = ctx.text("session_id") or ctx.run.session_id
    message = Message(text, sender, name, session_id)
    message.context_id = ctx.text("context_id")
    if session_id and ctx.should_store():
        ctx.store(message)
    return {ctx.out("message"): message}


def build_text_input(ctx: BuildContext) -> dict:
    text = ctx.caller_input if ctx.caller_input is not None else ctx.text(INPUT_FIELD_NAME)
    return {ctx.out("text"): Message(text)}


def build_chat_output(ctx: BuildContext) -> dict:
    """ChatOutput.message_response: stored when its own `session_id` is set (the run's session
    id is set on it before the run) and `should_store_message`."""
    sender, name = _sender(ctx, "Machine", "AI")
    text = ctx.text(INPUT_FIELD_NAME)
    own_session = ctx.text("session_id")
    message = Message(text, sender, name, own_session or ctx.run.session_id)
    message.context_id = ctx.text("context_id")
    if own_session and ctx.should_store():
        ctx.store(message)
    return {ctx.out("message"): message}


def build_text_output(ctx: BuildContext) -> dict:
    return {ctx.out("text"): Message(ctx.text(INPUT_FIELD_NAME))}


class _PromptVariables(dict):
    def __init__(self, ctx: BuildContext) -> None:
        super().__init__()
        self.ctx = ctx

    def __missing__(self, key):
        ctx = self.ctx
        vals = ctx.values(key)
        if vals:  # several edges into one variable are joined line by line
            return to_text(vals[0] if len(vals) == 1 else vals)
        if key in ctx.node.template and key != "template":
            return to_text(ctx.node.field(key, ""))
        raise VertexFailure(
            f"Prompt variable {{{key}}} has no value: connect an edge to the field {key!r} "
            f"or give the template field {key!r} a value")


def _format(template: str, mapping, what: str) -> str:
    try:
        return template.format_map(mapping)
    except VertexFailure:
        raise
    except KeyError as exc:  # a mapping without __missing__
        raise VertexFailure(f"{what}: no value for {{{exc.args[0]}}}") from None
    except (ValueError, IndexError, AttributeError, TypeError) as exc:
        raise VertexFailure(f"{what}: invalid template ({exc})") from None


def build_prompt(ctx: BuildContext) -> dict:
    template = ctx.text("template")
    text = _format(template, _PromptVariables(ctx), "Prompt")
    return {ctx.out("prompt"): Message(text)}


class _RecordFields(dict):
    def __init__(self, record: dict) -> None:
        super().__init__(record)
        self.setdefault("data", record)

    def __missing__(self, key):
        keys = ", ".join(sorted(str(k) for k in self if k != "data")) or "none"
        raise VertexFailure(f"template variable {{{key}}} is not a field of the data (fields: {keys})")


def _items(values: list) -> list:
    out = []
    for v in values:
        if isinstance(v, DataFrame):
            out.extend(Data(row) for row in v.rows)
        else:
            out.extend(v if isinstance(v, list) else [v])
    return out


def build_parse_data(ctx: BuildContext) -> dict:
    template = ctx.text("template", "{text}")
    sep = ctx.text("sep", "\n")
    items = _items(ctx.values("data"))
    text = sep.join(_format(template, _RecordFields(to_record(i)), "Parse Data") for i in items)
    out = {"text": Message(text), "data_list": [Data(to_record(i)) for i in items]}
    names = ctx.node.outputs or ["text"]
    return {name: out[name] for name in names if name in out} or {"text": out["text"]}


def build_parser(ctx: BuildContext) -> dict:
    items = _items(ctx.values("input_data"))
    sep = ctx.text("sep", "\n")
    if ctx.text("mode", "Parser") == "Stringify":
        text = sep.join(to_text(i) for i in items)
    else:
        pattern = ctx.text("pattern", "Text: {text}")
        text = sep.join(_format(pattern, _RecordFields(to_record(i)), "Parser") for i in items)
    return {ctx.out("parsed_text"): Message(text)}


class UserCodeError(Exception):
    """User code (the Python Interpreter's) failed: its message and its own traceback."""

    def __init__(self, message: str, tb: str) -> None:
        super().__init__(message)
        self.tb = tb


def build_python_repl(ctx: BuildContext) -> dict:
    """Python Interpreter: in core_python.py, imported only by a flow that has one."""
    from core_python import build_python_repl as build  # noqa: PLC0415

    return build(ctx)


def _count(ctx: BuildContext, field: str, default: int) -> int:
    value = ctx.value(field, default)
    if isinstance(value, bool):
        raise VertexFailure(f"{field}: expected a whole number")
    try:
        return int(value if not isinstance(value, str) or value.strip() else default)
    except (TypeError, ValueError):
        raise VertexFailure(f"{field}: expected a whole number (got {to_text(value)[:40]!r})") from None


def _memory_store(ctx: BuildContext) -> dict:
    """Message History in Store mode (MemoryComponent.store_message, Langflow's tables)."""
    incoming = ctx.value("message")
    if isinstance(incoming, Message):
        message = Message(incoming.text, incoming.sender, incoming.sender_name, incoming.session_id)
    else:
        message = Message(to_text(incoming))
    message.session_id = ctx.text("session_id") or message.session_id
    message.sender = ctx.text("sender") or message.sender or "Machine"
    message.sender_name = ctx.text("sender_name") or message.sender_name or "AI"
    if not message.session_id:
        raise VertexFailure(
            f"All of session_id, sender, and sender_name must be provided. Session ID: "
            f"{message.session_id}, Sender: {message.sender}, Sender Name: {message.sender_name}")
    ctx.store(message)
    return {ctx.out("stored_messages"): message}


def build_memory(ctx: BuildContext) -> dict:
    """Message History (type `Memory`, lfx's MemoryComponent) over the session's history.

    Retrieve (the default mode): the messages of `session_id` (none set: every message),
    filtered by sender type (`sender_type`, or `sender` in exports made before that field
    existed; "Machine and User" is no filter) and `sender_name`, in time order (`order`),
    the newest `n_messages` of them (0: none); `messages_text` formats each with `template`
    (default "{sender_name}: {text}") one per line, `dataframe` holds them as rows.
    """
    if ctx.text("mode", "Retrieve") == "Store":
        return _memory_store(ctx)
    field = "sender_type" if "sender_type" in ctx.node.template else "sender"
    sender = ctx.text(field, MEMORY_ALL_SENDERS) or MEMORY_ALL_SENDERS
    count = _count(ctx, "n_messages", 100)
    order = "DESC" if ctx.text("order", "Ascending") == "Descending" else "ASC"
    found = [] if count == 0 else ctx.run.history.retrieve(
        sender=None if sender == MEMORY_ALL_SENDERS else sender,
        sender_name=ctx.text("sender_name") or None, session_id=ctx.text("session_id") or None,
        order=order)
    if count > 0:
        found = found[-count:] if order == "ASC" else found[:count]
    template = ctx.text("template", "{sender_name}: {text}") or "{sender_name}: {text}"
    text = "\n".join(_format(template, _RecordFields(dict(m)), "Message History") for m in found)
    out = {"messages_text": Message(text), "dataframe": DataFrame([dict(m) for m in found])}
    names = [n for n in ctx.node.outputs if n in out] or list(out)
    return {name: out[name] for name in names}


CORE_COMPONENTS = {
    "ChatInput": build_chat_input,
    "TextInput": build_text_input,
    "ChatOutput": build_chat_output,
    "TextOutput": build_text_output,
    "Prompt": build_prompt,
    "PythonREPLComponent": build_python_repl,
    "ParseData": build_parse_data,
    "ParserComponent": build_parser,
    "Memory": build_memory,
}


def _vertex_list(items, limit: int = 50) -> str:
    shown = "; ".join(f"{i['id']} \"{i['name']}\" ({i['type']})" for i in items[:limit])
    return shown + (f"; … and {len(items) - limit} more" if len(items) > limit else "")


def core_refusal(graph: Graph, fallback_reason: str | None = None):
    """RunnerFatal (bad_request) when the core executor cannot run `graph`, else None.

    Checked before any vertex runs, so a flow it cannot finish never half-runs: every
    unsupported vertex is listed at once (id, display name, type), with what runs it.
    """
    unsupported = [{"id": n.id, "name": n.name, "type": n.type}
                   for n in graph.nodes if n.type not in CORE_COMPONENTS]
    problems = []
    if unsupported:
        which = ("1 vertex has a component type" if len(unsupported) == 1
                 else f"{len(unsupported)} vertices have component types")
        problems.append(f"{which} it does not build: {_vertex_list(unsupported)} (it builds only "
                        f"{', '.join(CORE_COMPONENTS)})")
    if graph.cycle:
        shown = ", ".join(graph.cycle[:10]) + (", …" if len(graph.cycle) > 10 else "")
        problems.append(f"the edges form a cycle (through {shown}) and it runs acyclic graphs only")
    if not problems:
        return None
    why = f" (executor auto chose core: {fallback_reason})" if fallback_reason else ""
    message = (f"guestflow's core executor cannot run this flow, so no vertex ran{why}: "
               + "; ".join(problems) + ". To run every Langflow component, " + LFX_IMAGE_HINT + ".")
    extra = {"unsupported": unsupported} if unsupported else {}
    if graph.cycle:
        extra["cycle"] = list(graph.cycle)
    return RunnerFatal(message, code="bad_request", **extra)
