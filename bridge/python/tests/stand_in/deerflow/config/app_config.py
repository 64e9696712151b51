"""deerflow/config/app_config.py: how code reaches DeerFlow's config (``get_app_config``),
without its YAML loader: a test sets the config with ``set_app_config`` (as DeerFlow's own
tests do), and with none set the lookup fails as DeerFlow's does with no config.yaml.
``resolve_env_variables`` is DeerFlow's ``$VAR`` rule, applied to a loaded file's values."""

import os
from typing import Any

_app_config: Any = None


class AppConfig:
    @classmethod
    def resolve_env_variables(cls, config: Any) -> Any:
        if isinstance(config, str):
            if config.startswith("$"):
                value = os.getenv(config[1:])
                if value is None:
                    raise ValueError(f"Environment variable {config[1:]} not found for config value {config}")
                return value
            return config
        if isinstance(config, dict):
            return {k: cls.resolve_env_variables(v) for k, v in config.items()}
        if isinstance(config, list):
            return [cls.resolve_env_variables(item) for item in config]
        return config


def get_app_config() -> Any:
    if _app_config is None:
        raise FileNotFoundError("Config file not found (the stand-in loads no config.yaml: set_app_config first)")
    return _app_config


def set_app_config(config: Any) -> None:
    global _app_config
    _app_config = config


def reset_app_config() -> None:
    global _app_config
    _app_config = None
