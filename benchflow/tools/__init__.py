"""The tool sandbox: AgentFlow's typed tools (`web:search`, `web:browse`, `doc:read`,
`code:run`, `vm:screenshot`, `vm:click`, `vm:type`) served per task session over HTTP
and MCP by `benchflow tools serve` (see `benchflow.tools.server`).

Importing this package imports none of the tools' libraries (the `tools` extra); each
tool's module loads when a session first uses it.
"""

from benchflow.tools.base import (
    RESOURCE_TYPES,
    TOOL_NAMES,
    ToolResult,
    ToolSpec,
    check_resource_types,
    check_tool_names,
)
from benchflow.tools.client import RemoteSession, ToolClient, ToolServerProcess

__all__ = ["RESOURCE_TYPES", "TOOL_NAMES", "RemoteSession", "ToolClient", "ToolResult",
           "ToolServerProcess", "ToolSpec", "check_resource_types", "check_tool_names"]
