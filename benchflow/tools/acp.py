"""The tool server's tools for ACP agents (`RolloutConfig.acp_tools`).

A rollout with `acp_tools` gets its own tool server: benchflow starts it on the sandbox
network's gateway (under `model-only`, exactly its port is allowed, as the model
endpoint's is), opens one session with these settings and the item's `kwargs`, and
gives that session to every ACP session of the rollout as the streamable-HTTP MCP server
named `benchflow` (`benchflow/rollout/acp_tools.py`). Each agent names the tools its own
way to the model: `web:search` is claude's `mcp__benchflow__web_search`, codex's
`web_search` in the namespace `mcp__benchflow`, gemini's `mcp_benchflow_web_search`,
opencode's `benchflow_web_search` (all four take HTTP MCP servers; `make test-acp-tools`).

```python
RolloutConfig(..., acp_tools=AcpTools(tools=["web:search"],
                                      resource_init_configs={"web": {"corpus": "/data/docs"}}))
```
"""

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from benchflow._models import FrozenModel
from benchflow.errors import ConfigError
from benchflow.tools.base import check_resource_types, check_tool_names
from benchflow import bounds as B

MCP_SERVER_NAME = "benchflow"
"""The name of the MCP server ACP agents get the tools from."""


class AcpTools(FrozenModel):
    """Tool-server tools (`web:search`, `doc:read`, ...) for a rollout's ACP agents, and
    their session's settings: `resource_init_configs` by resource type (AgentFlow's, the
    `content` wrapper optional), under the item's `kwargs`."""

    tools: list[str] = Field(min_length=1)
    resource_types: list[str] = Field(default_factory=list)
    resource_init_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    timeout_sec: float = Field(default=120.0, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False,
                               description="per tool call")

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        try:
            return check_tool_names(value)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("tools: ")) from None

    @field_validator("resource_types")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        try:
            return check_resource_types(value)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("resource_types: ")) from None


def acp_tools(tools: list[str], *, config_path: str | Path | None = None,
              resource_types: list[str] | None = None,
              resource_init_configs: dict[str, Any] | None = None,
              timeout_sec: float = 120.0) -> AcpTools:
    """`AcpTools` whose settings are a tool server config file's `resources` (the file of
    `benchflow tools serve --config`, `--tool-config`, `sandbox_config_path`) with
    `resource_init_configs` laid over them, resource type by resource type.

    Raises:
        ConfigError: an unknown tool or resource type; an unreadable or invalid file.
    """
    from benchflow.tools.server import load_server_config
    from benchflow.tools.session import unwrap_config

    settings = {k: unwrap_config(v) for k, v in load_server_config(config_path).items()}
    for key, value in (resource_init_configs or {}).items():
        settings[key] = {**settings.get(key, {}), **unwrap_config(value)}
    try:
        return AcpTools(tools=list(tools), resource_types=list(resource_types or []),
                        resource_init_configs=settings, timeout_sec=timeout_sec)
    except ValidationError as exc:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise ConfigError(f"tools for ACP agents: {problems}") from None


__all__ = ["MCP_SERVER_NAME", "AcpTools", "acp_tools"]
