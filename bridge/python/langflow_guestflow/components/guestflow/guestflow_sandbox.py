"""The Guestflow Sandbox component: a disposable (or reusable) guest as a flow node.

Exists beside the sandbox backend because lfx's backend protocol is a stateless
``run(code, env) -> SandboxResult``: it has nowhere to reuse a guest or hand back the files
a program wrote. A component declares its own inputs and outputs, so both come back here,
through the runtime's component surface (``POST /v1/components/run``).

NOTE: no input may be named ``code``. Langflow reserves ``template["code"]`` for a
component's own source, so an input by that name is overwritten and the component fails to
load. The program input is ``python_program``.
"""

from __future__ import annotations

import asyncio

from lfx.custom.custom_component.component import Component
from lfx.inputs.inputs import BoolInput, DropdownInput, IntInput, MultilineInput, StrInput
from lfx.schema.data import Data
from lfx.schema.dataframe import DataFrame
from lfx.template.field.base import Output
from lfx.utils.sandbox.base import SandboxExecutionError, SandboxUnavailableError

from langflow_guestflow import _component_client, _http, _settings

_UNAVAILABLE = {"policy_refused", "unavailable", "not_found", "egress_drift", "paused"}


class GuestflowSandboxComponent(Component):
    """Run a Python program or a command in a guest, and collect the files it writes."""

    display_name = "Guestflow Sandbox"
    description = "Run a Python program or a command in a disposable guest; optionally reuse it and collect its files."
    icon = "square-terminal"
    name = "GuestflowSandbox"

    inputs = [
        MultilineInput(
            name="python_program",
            display_name="Python Program",
            info="Python source run with python3 in the guest. Ignored when Command is set. "
            "Write files to /workspace/artifacts to hand them to the next node.",
            value="print('hello from a guest')",
            input_types=["Message"],
            tool_mode=True,
        ),
        StrInput(
            name="command",
            display_name="Command",
            info="Run this program (argv[0], e.g. 'sh') instead of the Python Program.",
            advanced=True,
        ),
        StrInput(
            name="command_args",
            display_name="Command Arguments",
            info="Arguments passed to Command, one per entry (no shell parsing).",
            is_list=True,
            advanced=True,
        ),
        DropdownInput(
            name="reuse",
            display_name="Guest Reuse",
            options=list(_component_client.REUSE_MODES),
            value="none",
            info="'none': a fresh guest per execution, deleted afterwards. 'flow': one guest per "
            "(flow, component, network policy) kept across executions, so installed packages and "
            "files carry over -- and code from one run can read what an earlier run left behind. "
            "Reused guests are deleted with `guestflow reap --reusable`.",
        ),
        BoolInput(
            name="return_files",
            display_name="Return Files",
            value=False,
            info="Read /workspace/artifacts back after the run and emit it on the Files output.",
        ),
        BoolInput(
            name="allow_network",
            display_name="Allow Network",
            value=False,
            info="Off: the guest reaches nothing. On: unrestricted egress (hostname allowlists are "
            "not enforced). Changing it gets a different reused guest.",
        ),
        IntInput(
            name="timeout_seconds",
            display_name="Timeout (seconds)",
            value=60,
            advanced=True,
            info="Wall clock the program gets, enforced in the guest.",
        ),
        IntInput(
            name="memory_mb",
            display_name="Memory (MB)",
            value=0,
            advanced=True,
            info="Memory floor for the guest; 0 uses the runtime's LANGFLOW_SANDBOX_MEMORY_MB.",
        ),
    ]

    outputs = [
        Output(display_name="Results", name="results", method="run_sandbox"),
        Output(display_name="Files", name="files", method="returned_files"),
    ]

    def _request(self) -> _component_client.ComponentRequest:
        flow_id = getattr(getattr(self, "graph", None), "flow_id", None)
        reuse = self.reuse or "none"
        if reuse == "flow" and not flow_id:
            # Without a flow id two unrelated unsaved flows could name the same guest.
            self.log("Guest Reuse needs a saved flow (no flow id); running in a fresh guest")
            reuse = "none"
        command = (self.command or "").strip()
        args = self.command_args or []
        if isinstance(args, str):
            args = [args]
        program = self.python_program
        text = getattr(program, "text", program)  # a connected Message carries .text
        return _component_client.ComponentRequest(
            flow_id=str(flow_id or "unsaved-flow"),
            component_id=str(getattr(self, "_id", None) or self.name),
            program=None if command else str(text or ""),
            cmd=command or None,
            args=tuple(str(a) for a in args) if command else (),
            reuse=reuse,
            allow_network=bool(self.allow_network),
            timeout_seconds=int(self.timeout_seconds or 60),
            memory_mb=int(self.memory_mb) if self.memory_mb else None,
            return_files=bool(self.return_files),
        )

    async def _answer(self) -> _component_client.ComponentAnswer:
        # Both outputs read one execution: the first output to run performs it.
        cached = getattr(self, "_guestflow_answer", None)
        if cached is not None:
            return cached
        request = self._request()
        try:
            answer = await asyncio.to_thread(_component_client.run_component, request)
        except _settings.SettingsError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        except _http.GuestflowError as exc:
            if isinstance(exc, _http.GuestflowConnectionError) or exc.code in _UNAVAILABLE:
                msg = f"Guestflow Sandbox unusable: {exc.message} ({exc.code})"
                raise SandboxUnavailableError(msg) from exc
            msg = f"Guestflow Sandbox run failed: {exc.message} ({exc.code})"
            raise SandboxExecutionError(msg) from exc
        self._guestflow_answer = answer
        return answer

    async def run_sandbox(self) -> Data:
        """Run (or reuse) a guest and return the program's outcome."""
        answer = await self._answer()
        self.status = f"{answer.outcome}, exit {answer.exit_code}" + (" (reused guest)" if answer.reused else "")
        return Data(data=answer.summary())

    async def returned_files(self) -> DataFrame:
        """The files the program left in /workspace/artifacts, one row each."""
        answer = await self._answer()
        if answer.files_error:
            # Nothing came back; an empty table would read as "the program wrote nothing".
            msg = (
                f"returned files unavailable: {answer.files_error.get('message', '')} "
                f"({answer.files_error.get('code', 'error')})"
            )
            raise SandboxExecutionError(msg)
        for dropped in answer.dropped:
            self.log(f"dropped returned file {dropped.get('path')!r}: {dropped.get('reason')}")
        return DataFrame([f.row() for f in answer.files])
