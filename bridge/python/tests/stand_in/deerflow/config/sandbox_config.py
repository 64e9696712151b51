"""deerflow/config/sandbox_config.py: the ``sandbox:`` section's model, every declared field
with DeerFlow's default. DeerFlow's is a pydantic model with ``extra="allow"``; this one
keeps what a provider reads of it: the fields as attributes, ``model_fields_set`` (the
declared keys the section names) and ``model_extra`` (the keys it does not declare)."""

from typing import Any


class _Model:
    _fields: dict[str, Any] = {}
    _required: tuple[str, ...] = ()

    def __init__(self, **data: Any) -> None:
        for name in self._required:
            if name not in data:
                raise ValueError(f"{type(self).__name__}: field {name!r} is required")
        for name, default in self._fields.items():
            setattr(self, name, data.get(name, default() if callable(default) else default))
        self.model_fields_set = {k for k in data if k in self._fields}
        self.model_extra = {k: v for k, v in data.items() if k not in self._fields}
        for key, value in self.model_extra.items():
            setattr(self, key, value)


class SandboxOwnershipConfig(_Model):
    _fields = {"type": "memory", "redis_url": None, "renewal_interval_seconds": 30.0, "ttl_multiplier": 4.0, "key_prefix": "deerflow:sandbox:owner"}


class VolumeMountConfig(_Model):
    _fields = {"host_path": None, "container_path": None, "read_only": False}
    _required = ("host_path", "container_path")


class SandboxConfig(_Model):
    _fields = {
        "use": None,
        "allow_host_bash": False,
        "image": None,
        "port": None,
        "replicas": None,
        "overflow_policy": "wait",
        "acquire_timeout": 30,
        "burst_limit": 0,
        "container_prefix": None,
        "idle_timeout": None,
        "health_check_skip_seconds": None,
        "ownership": None,
        "mounts": list,
        "thread_data_mounts": None,
        "environment": dict,
        "bash_output_max_chars": 20000,
        "read_file_output_max_chars": 50000,
        "ls_output_max_chars": 20000,
        "bash_command_timeout": 600,
        "provisioner_api_key": None,
    }
    _required = ("use",)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        if self.replicas is not None and self.replicas <= 0:
            raise ValueError("replicas: Input should be greater than 0")
        if self.bash_command_timeout <= 0:
            raise ValueError("bash_command_timeout: Input should be greater than 0")
        if self.overflow_policy not in ("wait", "reject", "burst"):
            raise ValueError("overflow_policy: Input should be 'wait', 'reject' or 'burst'")
        self.mounts = [m if isinstance(m, VolumeMountConfig) else VolumeMountConfig(**m) for m in self.mounts]
        if isinstance(self.ownership, dict):
            self.ownership = SandboxOwnershipConfig(**self.ownership)
