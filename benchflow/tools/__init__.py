"""The tool sandbox: AgentFlow's typed tools (`web:search`, `web:browse`, `doc:read`,
`code:run`, `vm:screenshot`, `vm:click`, `vm:type`) served per task session over HTTP
and MCP by `benchflow tools serve` (see `benchflow.tools.server`).

Importing this package imports none of the tools' libraries (the `tools` extra); each
tool's module loads when a session first uses it. `AcpTools` gives the tools to a
rollout's ACP agents over MCP (`benchflow.tools.acp`).
"""

from benchflow.tools.acp import AcpTools
from benchflow.tools.base import (
    RESOURCE_TYPES,
    TOOL_NAMES,
    ToolResult,
    ToolSpec,
    check_resource_types,
    check_tool_names,
)

_LAZY = {"RemoteSession": "benchflow.tools.client", "ToolClient": "benchflow.tools.client",
         "ToolServerProcess": "benchflow.tools.client", "ToolServer": "benchflow.tools.server"}


def __getattr__(name: str) -> object:  # the client imports httpx: only when used
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'benchflow.tools' has no attribute {name!r}")


__all__ = ["RESOURCE_TYPES", "TOOL_NAMES", "AcpTools", "RemoteSession", "ToolClient", "ToolResult",
           "ToolServer", "ToolServerProcess", "ToolSpec", "check_resource_types",
           "check_tool_names"]
