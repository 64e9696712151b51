"""Settings: where the guestflow server is, and the sandbox policy sent with each request.

Read fresh on every call (nothing is cached on an executor or backend instance), so a
worker that changes its environment, or a test that patches it, is seen at once.

Precedence for the ``LANGFLOW_SANDBOX_*`` policy: Langflow's own settings service when the
plugin runs inside Langflow (that is what Langflow's policy gate checks, so the request
must carry the same values), else the environment variables of the same names, else
Langflow's defaults (30 s, 192 MB, no network, no domains).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8470"

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}


class SettingsError(ValueError):
    """A setting is present but unusable (the caller turns it into a fail-closed error)."""


@dataclass(frozen=True)
class Endpoint:
    """The guestflow server: scheme, host, port, optional bearer token."""

    scheme: str
    host: str
    port: int
    token: str | None

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def headers(self) -> dict[str, str]:
        h = {"Host": f"{self.host}:{self.port}", "User-Agent": "langflow-guestflow"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h


@dataclass(frozen=True)
class SandboxPolicy:
    """Langflow's LANGFLOW_SANDBOX_* settings, as sent in a request body."""

    timeout_seconds: int = 30
    memory_mb: int = 192
    allow_network: bool = False
    allowed_domains: tuple[str, ...] = ()


def endpoint(url: str | None = None, token: str | None = None) -> Endpoint:
    """Parse ``GUESTFLOW_URL`` (or ``url``) and ``GUESTFLOW_TOKEN`` (or ``token``)."""
    raw = url if url is not None else os.environ.get("GUESTFLOW_URL", "") or DEFAULT_URL
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        msg = f"GUESTFLOW_URL must be http(s)://HOST[:PORT], got {raw!r}"
        raise SettingsError(msg)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        msg = f"GUESTFLOW_URL must not carry a path or query, got {raw!r}"
        raise SettingsError(msg)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        msg = f"GUESTFLOW_URL has a bad port: {raw!r}"
        raise SettingsError(msg) from exc
    tok = token if token is not None else os.environ.get("GUESTFLOW_TOKEN", "")
    return Endpoint(parts.scheme, parts.hostname, port, tok.strip() or None)


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    msg = f"{name} must be true or false, got {raw!r}"
    raise SettingsError(msg)


def _parse_int(name: str, raw: str, *, minimum: int = 1) -> int:
    try:
        value = int(raw.strip())
    except ValueError as exc:
        msg = f"{name} must be an integer, got {raw!r}"
        raise SettingsError(msg) from exc
    if value < minimum:
        msg = f"{name} must be at least {minimum}, got {value}"
        raise SettingsError(msg)
    return value


def _parse_domains(raw: str) -> tuple[str, ...]:
    """A JSON list (pydantic-settings' form) or a comma-separated list."""
    text = raw.strip()
    if not text:
        return ()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            msg = f"LANGFLOW_SANDBOX_ALLOWED_DOMAINS is not a JSON list: {raw!r}"
            raise SettingsError(msg) from exc
        if not isinstance(items, list):
            msg = f"LANGFLOW_SANDBOX_ALLOWED_DOMAINS is not a list: {raw!r}"
            raise SettingsError(msg)
        return tuple(str(item).strip() for item in items if str(item).strip())
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _langflow_settings():
    """Langflow's settings object when running inside Langflow, else None."""
    try:
        from lfx.services.deps import get_settings_service  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        service = get_settings_service()
    except Exception:  # noqa: BLE001 - a broken settings stack falls back to the environment
        return None
    return getattr(service, "settings", None) if service is not None else None


def sandbox_policy() -> SandboxPolicy:
    """The policy to send: Langflow's settings, else the environment, else defaults."""
    defaults = SandboxPolicy()
    settings = _langflow_settings()
    if settings is not None:
        domains = getattr(settings, "sandbox_allowed_domains", ()) or ()
        if isinstance(domains, str):
            domains = _parse_domains(domains)
        return SandboxPolicy(
            timeout_seconds=int(getattr(settings, "sandbox_timeout_seconds", defaults.timeout_seconds)),
            memory_mb=int(getattr(settings, "sandbox_memory_mb", defaults.memory_mb)),
            allow_network=bool(getattr(settings, "sandbox_allow_network", defaults.allow_network)),
            allowed_domains=tuple(str(d) for d in domains),
        )
    env = os.environ
    return SandboxPolicy(
        timeout_seconds=_parse_int("LANGFLOW_SANDBOX_TIMEOUT_SECONDS", env["LANGFLOW_SANDBOX_TIMEOUT_SECONDS"])
        if env.get("LANGFLOW_SANDBOX_TIMEOUT_SECONDS", "").strip()
        else defaults.timeout_seconds,
        memory_mb=_parse_int("LANGFLOW_SANDBOX_MEMORY_MB", env["LANGFLOW_SANDBOX_MEMORY_MB"])
        if env.get("LANGFLOW_SANDBOX_MEMORY_MB", "").strip()
        else defaults.memory_mb,
        allow_network=_parse_bool("LANGFLOW_SANDBOX_ALLOW_NETWORK", env.get("LANGFLOW_SANDBOX_ALLOW_NETWORK", "")),
        allowed_domains=_parse_domains(env.get("LANGFLOW_SANDBOX_ALLOWED_DOMAINS", "")),
    )


def float_env(name: str, default: float) -> float:
    """A positive float from the environment (plugin tuning knobs)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        msg = f"{name} must be a number of seconds, got {raw!r}"
        raise SettingsError(msg) from exc
    if value <= 0:
        msg = f"{name} must be positive, got {raw!r}"
        raise SettingsError(msg)
    return value
