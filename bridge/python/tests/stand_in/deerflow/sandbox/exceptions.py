"""deerflow/sandbox/exceptions.py: the errors a provider raises (same names and fields)."""


class SandboxError(Exception):
    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}


class SandboxNotFoundError(SandboxError):
    def __init__(self, message: str = "Sandbox not found", sandbox_id: str | None = None):
        super().__init__(message, {"sandbox_id": sandbox_id} if sandbox_id else None)
        self.sandbox_id = sandbox_id


class SandboxCapacityExceededError(SandboxError):
    CODE = "SANDBOX_CAPACITY_EXCEEDED"

    def __init__(
        self,
        message: str = "All sandbox replica slots are in use",
        *,
        active: int = 0,
        warm: int = 0,
        reserved: int = 0,
        replicas: int = 0,
        retry_after_seconds: float = 5.0,
        reason: str = "capacity",
    ) -> None:
        super().__init__(message, {"code": self.CODE, "reason": reason, "replicas": replicas})
        self.active = active
        self.warm = warm
        self.reserved = reserved
        self.replicas = replicas
        self.retry_after_seconds = retry_after_seconds
        self.reason = reason
