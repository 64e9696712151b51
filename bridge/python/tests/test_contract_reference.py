"""The ported ExecutorContract suite checked against a known-good in-memory executor.

Upstream runs its suite against ``InProcessExecutor`` first so a wrong suite fails there;
lfx's real executor cannot run here, so a trivial reference executor plays that role. No
server is involved.
"""

from __future__ import annotations

import asyncio
import unittest
from collections.abc import AsyncIterator, Callable

from lfx.execution.executor import Executor
from lfx.execution.types import RunComplete, StepResult, Unit

from tests.test_executor_contract import ExecutorContract, _chat_unit_factory


class _ReferenceExecutor(Executor):
    kind = "reference"

    async def execute(self, unit: Unit) -> AsyncIterator[StepResult | RunComplete]:
        for vertex in unit.graph.dump()["data"]["nodes"]:
            await asyncio.sleep(0)
            yield StepResult(payload={"type": "vertex_built", "id": vertex["id"]})
        yield RunComplete(outputs=[])


class TestReferenceExecutorContract(ExecutorContract, unittest.IsolatedAsyncioTestCase):
    """The ported suite itself, checked against a known-good executor (no server)."""

    def contract_executor(self) -> Executor:
        return _ReferenceExecutor()

    def contract_unit_factory(self) -> Callable[[], Unit]:
        return _chat_unit_factory()



class TestBrokenExecutorsFailTheSuite(unittest.IsolatedAsyncioTestCase):
    """The suite must be able to fail: executors that break the seam are caught."""

    async def test_missing_run_complete_is_caught(self) -> None:
        class NoTerminal(_ReferenceExecutor):
            async def execute(self, unit: Unit) -> AsyncIterator[StepResult | RunComplete]:
                yield StepResult(payload={})

        case = TestReferenceExecutorContract()
        case.contract_executor = NoTerminal  # type: ignore[method-assign]
        with self.assertRaises(AssertionError):
            await case.test_stream_ends_with_exactly_one_run_complete()

    async def test_two_run_completes_are_caught(self) -> None:
        class TwoTerminals(_ReferenceExecutor):
            async def execute(self, unit: Unit) -> AsyncIterator[StepResult | RunComplete]:
                yield RunComplete(outputs=[])
                yield RunComplete(outputs=[])

        case = TestReferenceExecutorContract()
        case.contract_executor = TwoTerminals  # type: ignore[method-assign]
        with self.assertRaises(AssertionError):
            await case.test_stream_ends_with_exactly_one_run_complete()

    def test_varargs_signature_is_caught(self) -> None:
        class VarArgs(_ReferenceExecutor):
            async def execute(self, *args, **kwargs):  # type: ignore[override]
                yield RunComplete(outputs=[])

        case = TestReferenceExecutorContract()
        case.contract_executor = VarArgs  # type: ignore[method-assign]
        with self.assertRaises(AssertionError):
            asyncio.run(case.test_execute_signature_takes_exactly_one_unit())


if __name__ == "__main__":
    unittest.main()
