from .sandbox import Sandbox
from .sandbox_provider import SandboxProvider, get_sandbox_provider

__all__ = ["Sandbox", "SandboxProvider", "get_sandbox_provider"]
