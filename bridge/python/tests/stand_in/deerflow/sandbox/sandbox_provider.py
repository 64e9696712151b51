"""deerflow/sandbox/sandbox_provider.py: the ``SandboxProvider`` ABC (without DeerFlow's
config-driven singleton helpers, which import its whole app config)."""

import asyncio
from abc import ABC, abstractmethod

from deerflow.sandbox.sandbox import Sandbox


class SandboxProvider(ABC):
    uses_thread_data_mounts: bool = False
    needs_upload_permission_adjustment: bool = True

    @abstractmethod
    def acquire(self, thread_id: str | None = None, *, user_id: str | None = None) -> str:
        pass

    async def acquire_async(self, thread_id: str | None = None, *, user_id: str | None = None) -> str:
        return await asyncio.to_thread(self.acquire, thread_id, user_id=user_id)

    @abstractmethod
    def get(self, sandbox_id: str) -> Sandbox | None:
        pass

    @abstractmethod
    def release(self, sandbox_id: str) -> None:
        pass

    def reset(self) -> None:
        pass
