"""The one call that makes a sandbox: `create_sandbox(environment, spec)`."""

from __future__ import annotations

from typing import Any

from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.registry import get_provider
from benchflow.sandbox.spec import SandboxSpec


def create_sandbox(environment: str, spec: SandboxSpec,
                   provider_config: dict[str, Any] | None = None) -> Sandbox:
    """A not-yet-started sandbox of the provider registered as `environment`.

    Raises:
        ConfigError: no provider under that name, or its SDK is not installed.
    """
    return get_provider(environment, provider_config).create(spec)


__all__ = ["create_sandbox"]
