"""Port of lfx's ``ExecutorContract`` suite, run against GuestflowExecutor and a real server.

Source: langflow-ai/langflow ``src/lfx/tests/unit/execution/test_executor_contract.py``.
Every case of the upstream class is ported one to one (pytest fixtures become the two
``contract_*`` methods, ``@pytest.mark.asyncio`` becomes ``IsolatedAsyncioTestCase``);
the assertions and their messages are upstream's. The unit factory mirrors
``TestInProcessExecutorContract``'s: a fresh ChatInput -> ChatOutput graph per call, fed
through ``runtime_options["initial_inputs"]`` as an ``InputValueRequest``.

``test_contract_reference.py`` runs the same suite against a trivial in-memory executor
(no server), the way upstream checks its suite against ``InProcessExecutor`` first: if
the port were wrong, that is where it would fail.
"""

from __future__ import annotations

import asyncio
import inspect
import unittest
from collections.abc import AsyncIterator, Callable

from lfx.execution.executor import Executor
from lfx.execution.types import RunComplete, StepResult, Unit
from lfx.schema.schema import InputValueRequest

from tests import _flows
from tests._server import ModuleServer

MODULE = ModuleServer()
setUpModule = MODULE.start  # noqa: N816 (unittest looks these names up)
tearDownModule = MODULE.stop  # noqa: N816


class ExecutorContract:
    """Base class of behavioural assertions every Executor must satisfy (mixin)."""

    def contract_executor(self) -> Executor:
        msg = "Subclasses must override contract_executor"
        raise NotImplementedError(msg)

    def contract_unit_factory(self) -> Callable[[], Unit]:
        msg = "Subclasses must override contract_unit_factory"
        raise NotImplementedError(msg)

    # --- Universal seam guarantees ----------------------------------------------------

    def test_kind_is_a_non_empty_string(self) -> None:
        contract_executor = self.contract_executor()
        assert isinstance(contract_executor.kind, str)
        assert contract_executor.kind, "Executor.kind must be a non-empty string"

    async def test_execute_returns_async_iterator(self) -> None:
        contract_executor = self.contract_executor()
        stream = contract_executor.execute(self.contract_unit_factory()())
        try:
            assert isinstance(stream, AsyncIterator), (
                f"{type(contract_executor).__name__}.execute() returned a "
                f"{type(stream).__name__}, expected AsyncIterator. Consumers can't iterate "
                "this. Common cause: forgetting to make the method an `async def` "
                "generator."
            )
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def test_stream_ends_with_exactly_one_run_complete(self) -> None:
        contract_executor = self.contract_executor()
        items = [item async for item in contract_executor.execute(self.contract_unit_factory()())]

        assert items, "executor yielded nothing -- a RunComplete is mandatory"
        assert isinstance(items[-1], RunComplete), (
            f"final item was {type(items[-1]).__name__}; the seam requires a terminal "
            "RunComplete so run_to_completion() and downstream collectors can detect end-of-run."
        )
        run_completes = [i for i in items if isinstance(i, RunComplete)]
        assert len(run_completes) == 1, (
            f"executor yielded {len(run_completes)} RunComplete items; the seam allows "
            "at most one (and requires exactly one)."
        )
        non_terminal = items[:-1]
        bad = [i for i in non_terminal if not isinstance(i, StepResult)]
        assert not bad, (
            f"all pre-terminal items must be StepResult; got: {[type(i).__name__ for i in bad]}. "
            "Coordinator.stream() relies on this to filter; mixing other types makes "
            "the stream untyped at the seam boundary."
        )

    async def test_executor_is_reusable_across_runs(self) -> None:
        contract_executor = self.contract_executor()
        factory = self.contract_unit_factory()
        first = [item async for item in contract_executor.execute(factory())]
        second = [item async for item in contract_executor.execute(factory())]

        assert isinstance(first[-1], RunComplete)
        assert isinstance(second[-1], RunComplete)
        assert len(first) >= 1
        assert len(second) >= 1

    async def test_concurrent_runs_on_one_instance_are_isolated(self) -> None:
        contract_executor = self.contract_executor()
        factory = self.contract_unit_factory()

        async def drain() -> list[object]:
            return [item async for item in contract_executor.execute(factory())]

        a, b = await asyncio.gather(drain(), drain())
        assert isinstance(a[-1], RunComplete)
        assert isinstance(b[-1], RunComplete)

    async def test_consumer_cancellation_does_not_hang_or_leak(self) -> None:
        contract_executor = self.contract_executor()
        gen = contract_executor.execute(self.contract_unit_factory()())

        try:
            first = await asyncio.wait_for(anext(gen), timeout=10.0)
        except StopAsyncIteration:
            return

        assert isinstance(first, (StepResult, RunComplete)), (
            f"first yielded item was {type(first).__name__}; seam requires StepResult or RunComplete"
        )
        await asyncio.wait_for(gen.aclose(), timeout=10.0)

    async def test_execute_signature_takes_exactly_one_unit(self) -> None:
        contract_executor = self.contract_executor()
        sig = inspect.signature(contract_executor.execute)
        params = [p for p in sig.parameters.values() if p.name != "self"]
        assert len(params) == 1, (
            f"{type(contract_executor).__name__}.execute must accept exactly one positional "
            f"Unit argument; got signature: {sig}"
        )


def _chat_unit_factory() -> Callable[[], Unit]:
    def factory() -> Unit:
        return Unit(
            graph=_flows.hello_graph(),
            inputs=[],
            runtime_options={"initial_inputs": InputValueRequest(input_value="hi")},
        )

    return factory


class TestGuestflowExecutorContract(ExecutorContract, unittest.IsolatedAsyncioTestCase):
    """The upstream suite against GuestflowExecutor and a real ``guestflow serve``."""

    def contract_executor(self) -> Executor:
        from langflow_guestflow.executor import GuestflowExecutor

        assert MODULE.server is not None
        return GuestflowExecutor(url=MODULE.server.url, token=MODULE.server.token)

    def contract_unit_factory(self) -> Callable[[], Unit]:
        return _chat_unit_factory()


if __name__ == "__main__":
    unittest.main()
