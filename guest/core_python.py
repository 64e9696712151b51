"""guestflow guest runner: the core executor's Python Interpreter (`PythonREPLComponent`).

Apart from core_components.py because most flows have none: its builder there imports
this only when one builds (every run compiles what it imports afresh).
"""

from __future__ import annotations

import builtins
import importlib
import keyword
import linecache
import sys

from core_components import INPUT_FIELD_NAME, BuildContext, UserCodeError, is_stream
from core_values import Data, to_python, to_text
from frame_protocol import Capture, TextSink

RESULT_CAP = 256 << 10  # Python Interpreter result kept per vertex (head and tail)


def _user_traceback(exc: BaseException, filename: str) -> str:
    import traceback  # noqa: PLC0415 - only code that failed needs it

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _user_error(exc: BaseException, filename: str) -> UserCodeError:
    if isinstance(exc, SystemExit):
        return UserCodeError(f"SystemExit: {exc.code}", _user_traceback(exc, filename))
    return UserCodeError(f"{type(exc).__name__}: {exc}", _user_traceback(exc, filename))


def _compile_user_code(code: str, filename: str):
    """(body, last expression or None): the code's last statement, when it is an expression,
    is evaluated on its own so a generator it makes can be streamed."""
    import ast  # noqa: PLC0415 - only flows with a Python Interpreter pay for it

    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval")
    return compile(tree, filename, "exec"), last


def build_python_repl(ctx: BuildContext) -> dict:
    """Python Interpreter: `global_imports` + `python_code`, stdout is the result.

    An edge into `python_code` supplies the code itself (Langflow semantics). Every other
    edge binds its value as a global named after its target field (when that is an
    identifier), and `input_value` is always bound: the first such value, else None.
    Messages arrive as their text (str), Data as a dict. When the code's last statement is
    an expression whose value is a generator or an async generator (a streaming stub), it
    is drained, one `token` frame per chunk, and the streamed text is the result.
    """
    node = ctx.node
    imports = ctx.value("global_imports", "")
    if isinstance(imports, list):
        modules = [str(m).strip() for m in imports]
    else:
        modules = [m.strip() for m in to_text(imports).split(",")]
    code = ctx.text("python_code")
    env = {"__name__": "__main__", "__builtins__": builtins}
    for module in (m for m in modules if m):
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - a module can raise anything on import
            message = f"Could not import module {module}: {type(exc).__name__}: {exc}"
            raise UserCodeError(message, "") from None
        top = module.split(".")[0]
        env[top] = sys.modules[top]
    first = None
    for field, vals in ctx.incoming.items():
        if field in ("python_code", "global_imports") or not vals:
            continue
        value = to_python(vals[-1])
        if first is None:
            first = value
        if field.isidentifier() and not keyword.iskeyword(field):
            env[field] = value
    env.setdefault(INPUT_FIELD_NAME, first)

    filename = f"<python_code {node.id}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    result = Capture(RESULT_CAP)

    def tee(data: bytes) -> None:
        result.add(data)
        ctx.capture.sink._write_bytes(data)  # noqa: SLF001 - same capture as print()

    sink = TextSink(tee)
    sys.stdout = sink
    streamed = None
    try:
        body, last = _compile_user_code(code, filename)
        exec(body, env)  # noqa: S102 - running user code is the point
        if last is not None:
            value = eval(last, env)  # noqa: S307 - the code's own last expression
            if is_stream(value):
                sys.stdout = ctx.capture.sink  # what the stream prints is logs, not result
                streamed = ctx.drain(value)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise _user_error(exc, filename) from None
    except BaseException as exc:  # noqa: BLE001 - user code can raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _user_error(exc, filename) from None
    finally:
        sys.stdout = ctx.capture.sink
        linecache.cache.pop(filename, None)
    text = streamed if streamed is not None else result.text().strip()
    return {ctx.out("results"): Data({"result": text})}
