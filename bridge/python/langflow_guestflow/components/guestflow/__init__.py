"""The "guestflow" bundle: the Guestflow Sandbox component."""

from .guestflow_sandbox import GuestflowSandboxComponent

__all__ = ["GuestflowSandboxComponent"]
