"""deerflow/sandbox/exceptions.py: the errors a sandbox or provider raises (same names,
fields and text)."""


class SandboxError(Exception):
    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def __str__(self) -> str:
        if self.details:
            return f"{self.message} ({', '.join(f'{k}={v}' for k, v in self.details.items())})"
        return self.message


class SandboxNotFoundError(SandboxError):
    def __init__(self, message: str = "Sandbox not found", sandbox_id: str | None = None):
        super().__init__(message, {"sandbox_id": sandbox_id} if sandbox_id else None)
        self.sandbox_id = sandbox_id


class SandboxRuntimeError(SandboxError):
    pass


class SandboxCommandError(SandboxError):
    def __init__(self, message: str, command: str | None = None, exit_code: int | None = None):
        details = {}
        if command:
            details["command"] = command[:100] + "..." if len(command) > 100 else command
        if exit_code is not None:
            details["exit_code"] = exit_code
        super().__init__(message, details)
        self.command = command
        self.exit_code = exit_code


class SandboxFileError(SandboxError):
    def __init__(self, message: str, path: str | None = None, operation: str | None = None):
        details = {}
        if path:
            details["path"] = path
        if operation:
            details["operation"] = operation
        super().__init__(message, details)
        self.path = path
        self.operation = operation


class SandboxPermissionError(SandboxFileError):
    pass


class SandboxFileNotFoundError(SandboxFileError):
    pass


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
        details: dict[str, object] = {
            "code": self.CODE,
            "reason": reason,
            "replicas": replicas,
            "retryable": True,
            "retry_after_seconds": retry_after_seconds,
        }
        if active:
            details["active"] = active
        if warm:
            details["warm"] = warm
        if reserved:
            details["reserved"] = reserved
        super().__init__(message, details)
        self.active = active
        self.warm = warm
        self.reserved = reserved
        self.replicas = replicas
        self.retry_after_seconds = retry_after_seconds
        self.reason = reason
