"""The tool sandbox's types: a tool's spec, its result, the registry of known tools.

Tools are named `<resource type>:<action>` (AgentFlow's names): `web:search`,
`web:browse`, `doc:read`, `code:run`, `vm:screenshot`, `vm:click`, `vm:type`. Each is
implemented in the module of its resource type and imported only when a session uses it
(the libraries behind them are the `tools` extra).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchflow.errors import ConfigError, ToolServerError

if TYPE_CHECKING:
    from benchflow.tools.session import ToolSession


@dataclass(frozen=True)
class ToolResult:
    """What one call returns: text for the model, PNG images, whether it failed."""

    text: str
    images: tuple[bytes, ...] = ()
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        import base64

        return {"text": self.text, "is_error": self.is_error,
                "images": [base64.b64encode(png).decode() for png in self.images]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolResult:
        import base64

        return cls(text=str(data.get("text", "")), is_error=bool(data.get("is_error")),
                   images=tuple(base64.b64decode(i) for i in data.get("images", [])))


ToolFn = Callable[["ToolSession", dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, what it does (for the model), its JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFn = field(repr=False, compare=False)

    @property
    def resource_type(self) -> str:
        return self.name.split(":", 1)[0]

    @property
    def function_name(self) -> str:
        """The name models see (`web_search`): function names cannot hold ':'."""
        return self.name.replace(":", "_")

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools=` entry."""
        return {"type": "function", "function": {
            "name": self.function_name, "description": self.description,
            "parameters": self.parameters}}


# tool name -> the module defining it (imported on first use)
TOOL_MODULES: dict[str, str] = {
    "web:search": "benchflow.tools.web",
    "web:browse": "benchflow.tools.web",
    "doc:read": "benchflow.tools.doc",
    "code:run": "benchflow.tools.code",
    "vm:screenshot": "benchflow.tools.vm",
    "vm:click": "benchflow.tools.vm",
    "vm:type": "benchflow.tools.vm",
}
TOOL_NAMES: tuple[str, ...] = tuple(TOOL_MODULES)
RESOURCE_TYPES: tuple[str, ...] = tuple(dict.fromkeys(n.split(":")[0] for n in TOOL_NAMES))


def unknown_tool(name: str, extra: Sequence[str] = ()) -> str:
    """Why `name` is no tool, naming the nearest and every known tool."""
    from benchflow._suggest import suggest

    known = [*extra, *TOOL_NAMES]
    near = suggest(name, known)
    hint = f" (did you mean {near!r}?)" if near else ""
    return f"unknown tool {name!r}{hint}; known tools: {', '.join(known)}"


def check_tool_names(names: Sequence[str], where: str = "tools") -> list[str]:
    """The names, each a tool of the tool server.

    Raises:
        ConfigError: an unknown name (the known ones are listed).
    """
    for name in names:
        if name not in TOOL_MODULES:
            raise ConfigError(f"{where}: {unknown_tool(name)}")
    return list(names)


def check_resource_types(types: Sequence[str], where: str = "resource_types") -> list[str]:
    """The names, each a resource type.

    Raises:
        ConfigError: an unknown resource type.
    """
    for name in types:
        if name not in RESOURCE_TYPES:
            raise ConfigError(f"{where}: unknown resource type {name!r}; resource types: "
                              f"{', '.join(RESOURCE_TYPES)}")
    return list(types)


def load_spec(name: str) -> ToolSpec:
    """The spec of a known tool (imports its module).

    Raises:
        ConfigError: unknown tool, or its library extra is missing.
    """
    check_tool_names([name])
    module = importlib.import_module(TOOL_MODULES[name])
    specs: dict[str, ToolSpec] = module.TOOLS
    return specs[name]


__all__ = ["RESOURCE_TYPES", "TOOL_MODULES", "TOOL_NAMES", "ToolResult", "ToolServerError",
           "ToolSpec", "check_resource_types", "check_tool_names", "load_spec", "unknown_tool"]
