"""Find the calling agent's shell tool among the tools a request offers and fill its arguments.

Agents name and shape their shell tool differently: Claude Code `Bash` {command},
codex `shell` {command: [argv]} / `shell_command` {command} / `exec_command` {cmd} or the
built-in `local_shell`, gemini-cli `run_shell_command` {command}, opencode `bash`
{command, description}. The argument shape is read from the tool's JSON schema.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from benchflow.model_server.conversation import ToolSpec

SHELL_TOOL_NAMES = (
    "Bash",
    "bash",
    "shell",
    "shell_command",
    "exec_command",
    "run_shell_command",
    "local_shell",
    "run_terminal_cmd",
    "execute_command",
    "execute_bash",
    "terminal",
    "run_command",
)
"""Known shell tool names, in order of preference when a request offers several."""

COMMAND_KEYS = ("command", "cmd", "commands", "script", "shell_command", "code")
"""Argument names that carry the command, in order of preference."""

_SHELL_HINTS = ("shell", "bash", "exec", "terminal", "command")
_NOT_SHELL_HINTS = ("output", "kill", "stdin", "status")

SHELL_ARGV_PREFIX = ("bash", "-lc")
"""How a command string becomes an argv when the tool wants a list of strings."""


def find_tool(tools: list[ToolSpec], name: str) -> ToolSpec | None:
    """The offered tool called `name`, else the one offered tool a glob pattern `name`
    matches (`*benchflow*web_search`: agents prefix MCP tools each their own way); None
    when none or several match (see `tools_matching`)."""
    exact = next((t for t in tools if t.name == name), None)
    if exact is not None or not is_tool_pattern(name):
        return exact
    matches = tools_matching(tools, name)
    return matches[0] if len(matches) == 1 else None


def is_tool_pattern(name: str) -> bool:
    """Whether a script's tool name is a glob pattern (`*`, `?`, `[...]`)."""
    return any(c in name for c in "*?[")


def tools_matching(tools: list[ToolSpec], pattern: str) -> list[ToolSpec]:
    """The offered tools whose names match the glob `pattern` (case-sensitive)."""
    return [t for t in tools if fnmatchcase(t.name, pattern)]


def find_shell_tool(tools: list[ToolSpec]) -> ToolSpec | None:
    """The offered tool that runs shell commands, or None.

    Known names win (in `SHELL_TOOL_NAMES` order); otherwise a function tool whose name
    hints at a shell and whose schema has a command-like argument.
    """
    callable_tools = [t for t in tools if t.kind in ("function", "local_shell", "builtin")]
    for name in SHELL_TOOL_NAMES:
        tool = find_tool(callable_tools, name)
        if tool is not None:
            return tool
    for tool in callable_tools:
        lowered = tool.name.lower()
        if not any(h in lowered for h in _SHELL_HINTS) or any(
            h in lowered for h in _NOT_SHELL_HINTS
        ):
            continue
        if _command_key(normalize_schema(tool.schema)) is not None:
            return tool
    return None


def shell_arguments(tool: ToolSpec, command: str) -> dict[str, Any]:
    """Arguments for `tool` that run `command`, shaped by the tool's schema.

    The command goes into the command-like property, as a string or as
    `["bash", "-lc", command]` when the schema asks for an array. Other required
    properties get plausible values (a description, defaults, enum members).
    """
    if tool.kind == "local_shell":
        return {"command": [*SHELL_ARGV_PREFIX, command]}
    schema = normalize_schema(tool.schema)
    props = schema.get("properties") or {}
    key = _command_key(schema) or "command"
    args: dict[str, Any] = {key: _command_value(props.get(key) or {}, command)}
    for name in schema.get("required") or []:
        if name not in args and isinstance(props.get(name), dict):
            args[name] = filler_value(name, props[name], command)
    return args


def _command_key(schema: dict[str, Any]) -> str | None:
    props = schema.get("properties") or {}
    for key in COMMAND_KEYS:
        if key in props:
            return key
    for name in schema.get("required") or []:
        if normalize_schema(props.get(name)).get("type") in ("string", "array"):
            return name
    return None


def _command_value(prop: dict[str, Any], command: str) -> Any:
    prop = normalize_schema(prop)
    if prop.get("type") == "array":
        return [*SHELL_ARGV_PREFIX, command]
    return command


def filler_value(name: str, prop: dict[str, Any] | None, command: str = "") -> Any:
    """A plausible value for a required argument the script does not set."""
    prop = normalize_schema(prop)
    if "default" in prop:
        return prop["default"]
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type")
    lowered = name.lower()
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        if "timeout" in lowered:
            return 120000 if "ms" in lowered else 120
        return prop.get("minimum", 0)
    if kind == "array":
        return []
    if kind == "object":
        return {}
    if "desc" in lowered or "justification" in lowered or "reason" in lowered:
        return f"Run {command[:60]}" if command else "Scripted step"
    if lowered in ("workdir", "cwd", "dir", "dir_path", "directory", "working_directory"):
        return "."
    return ""


def normalize_schema(schema: Any) -> dict[str, Any]:
    """A JSON schema with lower-case `type` (Gemini sends "STRING") and nullable unions unwrapped."""
    if not isinstance(schema, dict):
        return {}
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), None)
    if isinstance(kind, str):
        out["type"] = kind.lower()
    elif kind is None:
        for union in ("anyOf", "oneOf", "any_of"):
            options = out.get(union)
            if isinstance(options, list):
                chosen = next(
                    (
                        o
                        for o in options
                        if isinstance(o, dict) and str(o.get("type", "")).lower() != "null"
                    ),
                    None,
                )
                if chosen is not None:
                    merged = {k: v for k, v in out.items() if k != union}
                    return normalize_schema({**merged, **chosen})
        if "properties" in out:
            out["type"] = "object"
    return out
