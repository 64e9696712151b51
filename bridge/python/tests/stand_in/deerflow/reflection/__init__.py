"""deerflow/reflection: ``resolve_class``, how ``sandbox.use`` becomes a class."""

from importlib import import_module


def resolve_class(class_path: str, base_class: type | None = None) -> type:
    try:
        module_path, name = class_path.rsplit(":", 1)
    except ValueError as err:
        raise ImportError(f"{class_path} doesn't look like a variable path. Example: parent_package_name.sub_package_name.module_name:variable_name") from err
    module = import_module(module_path)
    try:
        cls = getattr(module, name)
    except AttributeError as err:
        raise ImportError(f"Module {module_path} does not define a {name} attribute/class") from err
    if not isinstance(cls, type):
        raise ValueError(f"{class_path} is not a valid class")
    if base_class is not None and not issubclass(cls, base_class):
        raise ValueError(f"{class_path} is not a subclass of {base_class.__name__}")
    return cls
