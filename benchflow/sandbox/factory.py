"""Sandbox backends by name, imported lazily so optional SDKs stay optional."""

from __future__ import annotations

import importlib

from benchflow.errors import ConfigError
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.spec import SandboxSpec

BACKENDS: dict[str, tuple[str, str | None]] = {
    "docker": ("benchflow.sandbox.docker:DockerSandbox", None),
    "daytona": ("benchflow.sandbox.daytona:DaytonaSandbox", "daytona"),
    "modal": ("benchflow.sandbox.modal:ModalSandbox", "modal"),
}


def create_sandbox(environment: str, spec: SandboxSpec) -> Sandbox:
    """A not-yet-started sandbox of backend `environment` for `spec`."""
    if environment not in BACKENDS:
        raise ConfigError(f"unknown environment {environment!r}; choose one of {', '.join(BACKENDS)}")
    target, extra = BACKENDS[environment]
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        hint = f"pip install 'benchflow[{extra}]'" if extra else "reinstall benchflow"
        raise ConfigError(f"environment {environment!r} is not available ({exc.name} missing): "
                          f"{hint}") from exc
    return getattr(module, cls_name)(spec)
