"""A tool session: one task's tools, its resources' settings and its item's kwargs.

A session is created per task (a QA item, a rollout): `resource_init_configs` give each
resource type its settings (AgentFlow's `{"doc": {"content": {"seed_path": ...}}}`; the
`content` wrapper is optional) and the item's `kwargs` (e.g. `seed_path`) are laid over
every resource's settings, so `config("doc")["seed_path"]` is the item's file when it
names one. Resources that need a sandbox (`code`, `vm`) get one Docker sandbox per
session, started on first use and stopped when the session closes.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from benchflow.tools.base import ToolResult, ToolSpec, check_resource_types, load_spec

log = logging.getLogger(__name__)


def unwrap_config(config: Any) -> dict[str, Any]:
    """A resource's settings without AgentFlow's optional `content` wrapper."""
    if not isinstance(config, Mapping):
        return {}
    if set(config) == {"content"} and isinstance(config["content"], Mapping):
        return dict(config["content"])
    return dict(config)


class ToolSession:
    """One task's tools and resources (see the module docstring)."""

    def __init__(self, tools: Sequence[str], *, resource_types: Sequence[str] = (),
                 init_configs: Mapping[str, Any] | None = None,
                 kwargs: Mapping[str, Any] | None = None,
                 defaults: Mapping[str, Any] | None = None, timeout_sec: float = 120.0) -> None:
        self.id = secrets.token_hex(8)
        self.specs: dict[str, ToolSpec] = {name: load_spec(name) for name in tools}
        self.resource_types = check_resource_types(list(resource_types))
        self.kwargs = dict(kwargs or {})
        self.timeout_sec = timeout_sec
        self._configs = {k: unwrap_config(v) for k, v in (defaults or {}).items()}
        for key, value in (init_configs or {}).items():
            self._configs[key] = {**self._configs.get(key, {}), **unwrap_config(value)}
        self.state: dict[str, Any] = {}
        """Per-resource objects the tools keep (an index, a sandbox)."""
        self._lock = anyio.Lock()

    def config(self, resource_type: str) -> dict[str, Any]:
        """The resource's settings: server defaults < init config < the item's kwargs."""
        return {**self._configs.get(resource_type, {}), **self.kwargs}

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run one tool; failures the model can act on come back as `is_error` results."""
        spec = self.specs.get(name) or next(
            (s for s in self.specs.values() if s.function_name == name), None)
        if spec is None:
            return ToolResult(f"error: no tool {name!r} in this session (tools: "
                              f"{', '.join(self.specs)})", is_error=True)
        try:
            with anyio.fail_after(self.timeout_sec):
                return await spec.fn(self, dict(arguments))
        except TimeoutError:
            return ToolResult(f"error: {spec.name} timed out after {self.timeout_sec:g} s",
                              is_error=True)
        except (ValueError, KeyError, TypeError, OSError) as exc:
            return ToolResult(f"error: {spec.name}: {exc}", is_error=True)

    async def close(self) -> None:
        """Release the session's resources (its sandbox, if one was started)."""
        for value in list(self.state.values()):
            closer = getattr(value, "aclose", None)
            if closer is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await closer()
                    except Exception as exc:  # noqa: BLE001 - closing must not fail a run
                        log.warning("tool session %s: closing a resource failed: %s",
                                    self.id, exc)
        self.state.clear()

    async def shared(self, key: str, factory: Any) -> Any:
        """The session's object under `key`, made once by `await factory()`."""
        async with self._lock:
            if key not in self.state:
                self.state[key] = await factory()
            return self.state[key]


__all__ = ["ToolSession", "unwrap_config"]
