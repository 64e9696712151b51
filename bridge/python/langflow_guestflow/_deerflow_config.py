"""DeerFlow's ``sandbox:`` config section as the Guestflow provider reads it.

DeerFlow builds the provider with no arguments (``sandbox_provider.get_sandbox_provider``:
``cls()``) and keeps its settings in ``get_app_config().sandbox``, a ``SandboxConfig`` with
``extra="allow"``: its own providers read the declared fields as attributes and their own
keys from ``model_extra`` (``community/e2b_sandbox``, ``community/boxlite``). Every key the
section names is either honoured here or refused at construction with a message naming it,
so nothing a config asks for is silently dropped. ``$VAR`` values were already resolved by
DeerFlow's loader (``AppConfig.resolve_env_variables``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class GuestflowConfigError(ValueError):
    """A ``sandbox:`` key the provider cannot honour (the message names it)."""


# Keys DeerFlow itself reads (its tools and its provider factory): accepted as they are.
DEERFLOW_KEYS = frozenset({"use", "bash_output_max_chars", "read_file_output_max_chars", "ls_output_max_chars"})

# Keys guestflow cannot honour, with why (the refusal names the key and says this).
REFUSED = {
    "thread_data_mounts": "a guestflow guest never shares the gateway's thread directories",
    "port": "an AioSandboxProvider setting (guestflow guests have no container ports)",
    "container_prefix": "an AioSandboxProvider setting (guestflow names its guests itself)",
    "health_check_skip_seconds": "a BoxliteProvider setting",
    "ownership": "guestflow serve owns every session itself (gateways sharing one server need no ownership store)",
    "provisioner_api_key": "an AioSandboxProvider provisioner setting",
}

# Keys of the provider's own, not DeerFlow's.
OWN_KEYS = frozenset({"allow_network", "sync_thread_dir"})

HONOURED = frozenset(
    {
        "image",
        "environment",
        "replicas",
        "overflow_policy",
        "acquire_timeout",
        "burst_limit",
        "bash_command_timeout",
        "allow_host_bash",
        "mounts",
        "idle_timeout",
        "memory_mib",
        "cpus",
    }
)

# The server's bounds on the per-session keys (POST /v1/sessions refuses past them too;
# memory_mib and cpus are further bounded by the server's shapes and
# GUESTFLOW_SESSION_MAX_MEMORY_MIB, which only the server knows).
MAX_IDLE_TIMEOUT_SECONDS = 604800


@dataclass(frozen=True)
class SessionSettings:
    """What the provider does with the section."""

    image: str | None = None  # POST /v1/sessions "image"; None = the server's default
    allow_network: bool = False  # POST /v1/sessions "allow_network"
    environment: dict[str, str] = field(default_factory=dict)  # under every command's env
    replicas: int | None = None  # sessions of this provider active at once; None = the server's cap only
    wait_for_capacity: bool = True  # overflow_policy "wait" (DeerFlow's default) vs "reject"
    acquire_timeout: float = 30.0  # seconds "wait" waits for a free slot
    command_timeout: int = 600  # bash_command_timeout: a command's timeout when the caller gives none
    mounts: tuple[dict[str, Any], ...] = ()  # POST /v1/sessions "mounts", DeerFlow's shape
    sync_thread_dir: bool = True  # send DeerFlow's thread directory ("thread_dir") with each acquire
    idle_timeout: int | None = None  # POST /v1/sessions "idle_timeout_seconds"; None = the server's; 0 = never
    memory_mib: int | None = None  # POST /v1/sessions "memory_mib" (BoxLite's per-box memory, MiB)
    cpus: int | None = None  # POST /v1/sessions "cpus" (BoxLite's per-box vCPUs)


def _given(section: Any) -> dict[str, Any]:
    """The keys the section names, with their values: DeerFlow's model (declared keys
    set, plus ``model_extra``), a mapping, or a namespace (as DeerFlow's tests stub it)."""
    if section is None:
        return {}
    if isinstance(section, Mapping):
        return dict(section)
    fields_set = getattr(section, "model_fields_set", None)
    if fields_set is not None:
        out = {name: getattr(section, name) for name in fields_set}
        out.update(getattr(section, "model_extra", None) or {})
        return out
    return {k: v for k, v in vars(section).items() if not k.startswith("_")}


def _refuse(key: str, why: str) -> GuestflowConfigError:
    return GuestflowConfigError(f"sandbox.{key}: {why}")


def _number(key: str, value: Any, *, minimum: float, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _refuse(key, f"expected a number, got {value!r}")
    if integer and value != int(value):
        raise _refuse(key, f"expected a whole number, got {value!r}")
    if value < minimum:
        raise _refuse(key, f"expected at least {minimum:g}, got {value!r}")
    return value


def _mount(index: int, mount: Any) -> dict[str, Any]:
    """One of DeerFlow's ``mounts`` (``VolumeMountConfig`` or its mapping) as the session
    API takes it; the server refuses a host path outside its GUESTFLOW_SESSION_MOUNT_ROOTS."""
    get = mount.get if isinstance(mount, Mapping) else lambda k, d=None: getattr(mount, k, d)
    out: dict[str, Any] = {}
    for key in ("host_path", "container_path"):
        value = get(key)
        if not isinstance(value, str) or not value.startswith("/") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise _refuse(f"mounts[{index}].{key}", f"expected an absolute path, got {value!r}")
        out[key] = value
    read_only = get("read_only", False)
    if not isinstance(read_only, bool):
        raise _refuse(f"mounts[{index}].read_only", f"expected true or false, got {read_only!r}")
    out["read_only"] = read_only
    return out


def settings_from(section: Any) -> SessionSettings:
    """The section's settings; ``GuestflowConfigError`` naming the first key that cannot
    be honoured (before anything is sent)."""
    given = _given(section)
    for key in sorted(given):
        if key in REFUSED:
            raise _refuse(key, REFUSED[key])
        if key not in DEERFLOW_KEYS and key not in HONOURED and key not in OWN_KEYS:
            raise _refuse(key, "not a key the guestflow provider knows (it honours image, environment, mounts, replicas, idle_timeout, memory_mib, cpus, overflow_policy, acquire_timeout, bash_command_timeout, allow_network and sync_thread_dir)")
    out: dict[str, Any] = {}
    if given.get("image") is not None:
        if not isinstance(given["image"], str) or not given["image"] or "\0" in given["image"]:
            raise _refuse("image", f"expected an image name, got {given['image']!r}")
        out["image"] = given["image"]
    for flag in ("allow_network", "sync_thread_dir"):
        if flag in given:
            if not isinstance(given[flag], bool):
                raise _refuse(flag, f"expected true or false, got {given[flag]!r}")
            out[flag] = given[flag]
    if given.get("mounts"):
        out["mounts"] = tuple(_mount(i, m) for i, m in enumerate(given["mounts"]))
    if given.get("allow_host_bash"):
        raise _refuse("allow_host_bash", "true applies to LocalSandboxProvider only; guestflow runs every command in a guest, never on the host")
    env = given.get("environment") or {}
    if not isinstance(env, Mapping):
        raise _refuse("environment", f"expected a mapping of names to values, got {type(env).__name__}")
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise _refuse("environment", f"key {name!r} is not a valid POSIX environment variable name (must match ^[A-Za-z_][A-Za-z0-9_]*$)")
        if isinstance(value, (dict, list)) or "\0" in str(value):
            raise _refuse("environment", f"value of {name} must be a string without NUL")
    out["environment"] = {name: "" if value is None else str(value) for name, value in env.items()}
    if given.get("replicas") is not None:
        out["replicas"] = int(_number("replicas", given["replicas"], minimum=1, integer=True))
    policy = given.get("overflow_policy")
    if policy is not None:
        if policy == "burst":
            raise _refuse("overflow_policy", "'burst' (E2B's extra slots) is not offered: use 'wait' or 'reject'")
        if policy not in ("wait", "reject"):
            raise _refuse("overflow_policy", f"expected 'wait' or 'reject', got {policy!r}")
        out["wait_for_capacity"] = policy == "wait"
    if given.get("acquire_timeout") is not None:
        out["acquire_timeout"] = float(_number("acquire_timeout", given["acquire_timeout"], minimum=1))
    if given.get("burst_limit"):
        raise _refuse("burst_limit", "burst capacity is not offered (only 0)")
    if given.get("idle_timeout") is not None:
        out["idle_timeout"] = int(_number("idle_timeout", given["idle_timeout"], minimum=0, integer=True))
        if out["idle_timeout"] > MAX_IDLE_TIMEOUT_SECONDS:
            raise _refuse("idle_timeout", f"at most {MAX_IDLE_TIMEOUT_SECONDS} seconds (the server's limit), got {given['idle_timeout']!r}")
    for key in ("memory_mib", "cpus"):
        if given.get(key) is not None:
            out[key] = int(_number(key, given[key], minimum=1, integer=True))
    if given.get("bash_command_timeout") is not None:
        out["command_timeout"] = int(_number("bash_command_timeout", given["bash_command_timeout"], minimum=1, integer=True))
        if out["command_timeout"] > 86400:
            raise _refuse("bash_command_timeout", "at most 86400 seconds (the server's limit)")
    return SessionSettings(**out)
