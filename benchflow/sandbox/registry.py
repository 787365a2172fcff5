"""Sandbox providers by name: the built-ins plus the `benchflow.sandboxes` entry points.

Providers are imported lazily, so an optional SDK is only needed when its backend is used.
A third-party package registers its own with

```toml
[project.entry-points."benchflow.sandboxes"]
mycloud = "mypkg.sandbox:MyCloudProvider"
```
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from benchflow.errors import ConfigError
from benchflow.sandbox.provider import SandboxProvider

ENTRY_POINT_GROUP = "benchflow.sandboxes"

BUILTIN: dict[str, tuple[str, str | None]] = {
    "docker": ("benchflow.sandbox.docker.provider:DockerProvider", None),
    "daytona": ("benchflow.sandbox.daytona:DaytonaSandboxProvider", "daytona"),
    "modal": ("benchflow.sandbox.modal:ModalSandboxProvider", "modal"),
}
"""name -> (import path of the provider class, the pip extra its SDK comes with)."""


_REGISTERED: dict[str, type[SandboxProvider]] = {}
"""Providers registered from Python (`register_provider`), e.g. a benchmark's or a test's."""


def register_provider(cls: type[SandboxProvider]) -> None:
    """Register `cls` under `cls.name` for this process, beside the built-ins and entry
    points (for providers defined in code rather than installed as a package).

    Raises:
        ConfigError: the name is already a built-in backend.
    """
    if cls.name in BUILTIN:
        raise ConfigError(f"{cls.name!r} is a built-in sandbox backend: pick another name")
    _REGISTERED[cls.name] = cls


def registered_in_code() -> list[type[SandboxProvider]]:
    """The providers `register_provider` added in this process."""
    return list(_REGISTERED.values())


class UnknownBackendError(ConfigError):
    """An environment name no provider is registered under."""


@functools.cache
def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points  # scanning installed packages is slow: on demand

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.name not in BUILTIN}


def registered_backends() -> list[str]:
    """Every registered environment name: built-ins first, then plugins (sorted)."""
    return [*BUILTIN, *sorted({*_plugins(), *_REGISTERED})]


def check_backend(name: str) -> str:
    """`name` if a provider is registered under it.

    Raises:
        UnknownBackendError: listing the registered names.
    """
    if name not in BUILTIN and name not in _REGISTERED and name not in _plugins():
        raise UnknownBackendError(f"unknown sandbox environment {name!r}; registered: "
                                  f"{', '.join(registered_backends())}")
    return name


def provider_class(name: str) -> type[SandboxProvider]:
    """The provider class registered as `name`, imported now.

    Raises:
        UnknownBackendError: nothing registered under `name`.
        ConfigError: its module cannot be imported (naming the extra to install).
    """
    check_backend(name)
    if name in _REGISTERED:
        return _REGISTERED[name]
    target, extra = BUILTIN.get(name) or (_plugins()[name], None)
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        hint = f"pip install 'benchflow[{extra}]'" if extra else f"install the package providing {target}"
        raise ConfigError(f"sandbox environment {name!r} is not available ({exc.name} missing): "
                          f"{hint}") from exc
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, SandboxProvider)):
        raise ConfigError(f"sandbox environment {name!r}: {target} is not a SandboxProvider")
    return cls


def get_provider(name: str, provider_config: dict[str, Any] | None = None) -> SandboxProvider:
    """A provider instance for environment `name` (see `provider_class` for errors)."""
    return provider_class(name)(provider_config)


def capability_table() -> str:
    """A markdown table of every built-in backend's capabilities (docs/how-to/cloud-sandboxes.md
    embeds it; a test checks the two agree)."""
    yes = {True: "yes", False: "no"}
    rows = ["| backend | live processes (ACP) | exec as another user | network policies | "
            "snapshots (agent install cache) | volumes (agent layers) | GPUs | "
            "multi-container (compose) |", "|---" * 8 + "|"]
    for name in BUILTIN:
        caps = provider_class(name).capabilities
        policies = ", ".join(p for p in ("public", "none", "model-only")
                             if p in caps.network_policies)
        rows.append(f"| {name} | {yes[caps.live_processes]} | {yes[caps.root_exec]} | "
                    f"{policies} | {yes[caps.snapshots]} | {yes[caps.volumes]} | "
                    f"{yes[caps.gpus]} | {yes[caps.compose]} |")
    return "\n".join(rows) + "\n"


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "UnknownBackendError", "capability_table",
           "check_backend", "get_provider", "provider_class", "register_provider",
           "registered_backends", "registered_in_code"]
