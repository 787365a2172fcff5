"""MCP servers handed to agents at ACP `session/new` (`mcpServers`).

Three sources, merged by name (later wins): the task (Harbor's `[[environment.mcp_servers]]`,
native `sandbox.mcp_servers`), a Claude-style `.mcp.json` (`--mcp-config`), and
`RolloutConfig.mcp_servers`. A stdio server is a command the agent starts inside the
sandbox; an http or sse server is reached by URL. Only agents whose ACP capabilities
accept a transport receive servers of it (every ACP agent takes stdio); the others run
without it (a warning), or fail when it is `required` (the tool server of `acp_tools`).
"""

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from benchflow._models import FrozenModel
from benchflow.errors import ConfigError

McpTransport = Literal["stdio", "sse", "streamable-http"]


class McpServer(FrozenModel):
    """One MCP server: `command`/`args`/`env` for stdio, `url`/`headers` for sse and http.

    `transport` follows Harbor (`http` is read as `streamable-http`); values in `env` and
    `headers` may hold `${VAR}` / `${VAR:-default}` templates, resolved from the host when
    the rollout starts (`benchflow.task.env_templates`), and are never recorded in results.
    """

    name: str = Field(min_length=1)
    transport: McpTransport = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    required: bool = Field(default=False, description="an agent that does not accept the "
                           "transport fails the rollout instead of running without it")

    @field_validator("transport", mode="before")
    @classmethod
    def _http_alias(cls, value: Any) -> Any:
        return "streamable-http" if value == "http" else value

    @model_validator(mode="after")
    def _fields_of_transport(self) -> "McpServer":
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"MCP server {self.name!r}: transport 'stdio' needs `command`")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"MCP server {self.name!r}: transport {self.transport!r} needs `url`")
        return self

    @property
    def acp_kind(self) -> Literal["stdio", "http", "sse"]:
        """The ACP capability this server needs (`mcpCapabilities.http` / `.sse`)."""
        return "http" if self.transport == "streamable-http" else self.transport


def load_mcp_config(path: Path) -> list[McpServer]:
    """Servers of a Claude-style `.mcp.json`: `{"mcpServers": {name: {command, args, env} |
    {type: "http" | "sse", url, headers}}}`.

    Raises:
        ConfigError: unreadable file, bad JSON, or an invalid server (naming file and server).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read MCP config: {exc}") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: expected an object with an `mcpServers` object "
                          '(e.g. {"mcpServers": {"files": {"command": "mcp-files"}}})')
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: mcpServers.{name}: expected an object")
        entry = dict(entry)
        kind = entry.pop("type", None)
        transport = kind or ("stdio" if "command" in entry else "streamable-http")
        try:
            out.append(McpServer.model_validate({"name": name, "transport": transport, **entry}))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}"
                                 for e in exc.errors())
            raise ConfigError(f"{path}: mcpServers.{name}: {problems}") from exc
    return out


def merge_servers(*layers: Iterable[McpServer]) -> list[McpServer]:
    """Servers by name, a later layer replacing an earlier server of the same name."""
    merged: dict[str, McpServer] = {}
    for layer in layers:
        for server in layer:
            merged[server.name] = server
    return list(merged.values())


__all__ = ["McpServer", "McpTransport", "load_mcp_config", "merge_servers"]
