"""The model agent's tools, run in the rollout's sandbox through the Sandbox protocol.

| tool | arguments | does |
| --- | --- | --- |
| `shell` | `command`, optional `timeout_sec` | `bash -lc COMMAND` in the workdir as the agent user |
| `read_file` | `path` | the file's text |
| `write_file` | `path`, `content` | writes the file (parents created) as the agent user |

Output is cut to `max_output_chars` with a marker saying how much was dropped.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal, get_args

from benchflow.sandbox.base import Sandbox

ToolName = Literal["shell", "read_file", "write_file"]
TOOL_NAMES: tuple[str, ...] = get_args(ToolName)

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "shell": {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a bash command in the sandbox (bash -lc) and return its exit "
                           "code and output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the bash command"},
                    "timeout_sec": {"type": "number", "description": "deadline in seconds"},
                },
                "required": ["command"],
            },
        },
    },
    "read_file": {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file in the sandbox.",
            "parameters": {"type": "object",
                           "properties": {"path": {"type": "string"}},
                           "required": ["path"]},
        },
    },
    "write_file": {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a text file in the sandbox (creating parent folders).",
            "parameters": {"type": "object",
                           "properties": {"path": {"type": "string"},
                                          "content": {"type": "string"}},
                           "required": ["path", "content"]},
        },
    },
}

_KIND = {"shell": "execute", "read_file": "read", "write_file": "edit"}


def truncate(text: str, limit: int) -> str:
    """`text`, or its head and tail around a marker saying how many characters were dropped."""
    if len(text) <= limit:
        return text
    half = max(0, limit // 2)
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n[... {dropped} characters truncated ...]\n{text[len(text) - half:]}"


@dataclass
class ToolRunner:
    """Runs tool calls in one sandbox as one user, in one workdir."""

    sandbox: Sandbox
    user: str | None
    workdir: str
    timeout_sec: float = 120.0
    max_output_chars: int = 20_000

    @staticmethod
    def kind(name: str) -> str:
        return _KIND.get(name, "other")

    async def run(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """(output for the model, whether the call failed). Unknown tools and bad arguments
        are reported to the model as failures, not raised."""
        if name == "shell":
            command = args.get("command")
            if not isinstance(command, str) or not command.strip():
                return "error: `command` (a string) is required", True
            timeout = args.get("timeout_sec")
            deadline = (float(timeout) if isinstance(timeout, (int, float)) and timeout > 0
                        else self.timeout_sec)
            deadline = min(deadline, self.timeout_sec)
            result = await self.sandbox.exec(["bash", "-lc", command], user=self.user,
                                             cwd=self.workdir, timeout=deadline)
            output = truncate(result.text(), self.max_output_chars)
            if result.timed_out:
                return f"[timed out after {deadline:g} s]\n{output}", True
            return f"[exit code {result.exit_code}]\n{output}", result.exit_code != 0
        if name == "read_file":
            path = args.get("path")
            if not isinstance(path, str) or not path:
                return "error: `path` (a string) is required", True
            result = await self.sandbox.exec(["cat", "--", path], user=self.user,
                                             cwd=self.workdir, timeout=self.timeout_sec)
            if not result.ok:
                return f"error: cannot read {path}: {result.text(2000).strip()}", True
            return truncate(result.stdout.decode("utf-8", "replace"), self.max_output_chars), False
        if name == "write_file":
            path, content = args.get("path"), args.get("content")
            if not isinstance(path, str) or not path or not isinstance(content, str):
                return "error: `path` and `content` (strings) are required", True
            # through the shell as the agent user, so file ownership and permissions hold
            script = f'mkdir -p -- "$(dirname -- {shlex.quote(path)})" && cat > {shlex.quote(path)}'
            result = await self._exec_with_stdin(script, content)
            if not result[1]:
                return f"wrote {len(content.encode())} bytes to {path}", False
            return f"error: cannot write {path}: {result[0]}", True
        return f"error: unknown tool {name!r} (tools: {', '.join(TOOL_NAMES)})", True

    async def _exec_with_stdin(self, script: str, content: str) -> tuple[str, bool]:
        # The Sandbox protocol's exec has no stdin: pass the content base64-encoded.
        import base64

        encoded = base64.b64encode(content.encode()).decode()
        command = f"printf %s {shlex.quote(encoded)} | base64 -d | {{ {script}; }}"
        result = await self.sandbox.exec(["bash", "-c", command], user=self.user,
                                         cwd=self.workdir, timeout=self.timeout_sec)
        return result.text(2000).strip(), not result.ok


__all__ = ["TOOL_NAMES", "TOOL_SCHEMAS", "ToolName", "ToolRunner", "truncate"]
