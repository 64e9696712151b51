"""deerflow/config/paths.py: the sandbox's virtual user-data prefix."""

VIRTUAL_PATH_PREFIX = "/mnt/user-data"
