"""Optional extras, imported lazily: a missing one is a ConfigError naming what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from benchflow.errors import ConfigError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, or say which extra of benchflow provides it.

    Raises:
        ConfigError: `module` is not installed (`pip install 'benchflow[<extra>]'`).
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or module.split(".")[0] != exc.name.split(".")[0]:
            raise
        raise ConfigError(f"{what} needs the {extra!r} extra ({exc.name} is not installed): "
                          f"pip install 'benchflow[{extra}]'") from exc


__all__ = ["require"]
