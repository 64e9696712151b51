from .app_config import get_app_config

__all__ = ["get_app_config"]
