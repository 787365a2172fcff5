"""Fixtures for the scripted model server tests: a script, a running server, agents' tool schemas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchflow.model_server import ModelServer, Script, parse_script

SCRIPT = {
    "name": "write-then-read",
    "steps": [
        {"shell": "echo 42 > /app/answer.txt"},
        {"shell": "cat /app/answer.txt", "say": "Reading it back."},
        {"text": "The answer file contains 42."},
    ],
    "side_answers": {"title": "Scripted session"},
}

# Tool schemas as the real agents offer them (trimmed to the fields that matter).
CLAUDE_BASH = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to execute"},
        "timeout": {"type": "number"},
        "description": {"type": "string"},
        "run_in_background": {"type": "boolean"},
    },
    "required": ["command"],
    "additionalProperties": False,
}
CLAUDE_BASH_OUTPUT = {
    "type": "object",
    "properties": {"bash_id": {"type": "string"}},
    "required": ["bash_id"],
}
CODEX_SHELL = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}},
        "workdir": {"type": "string"},
        "timeout_ms": {"type": "number"},
    },
    "required": ["command"],
    "additionalProperties": False,
}
CODEX_EXEC = {
    "type": "object",
    "properties": {"cmd": {"type": "string"}, "yield_time_ms": {"type": "number"}},
    "required": ["cmd"],
}
GEMINI_SHELL = {
    "type": "OBJECT",
    "properties": {
        "command": {"type": "STRING"},
        "description": {"type": "STRING"},
        "dir_path": {"type": "STRING"},
    },
    "required": ["command"],
}
OPENCODE_BASH = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "timeout": {"type": "number"},
        "description": {"type": "string", "description": "5-10 words"},
    },
    "required": ["command", "description"],
    "additionalProperties": False,
}


@pytest.fixture
def schemas() -> dict[str, dict[str, Any]]:
    """The agents' shell tool schemas, keyed by agent."""
    return {
        "claude": CLAUDE_BASH,
        "claude_bash_output": CLAUDE_BASH_OUTPUT,
        "codex_shell": CODEX_SHELL,
        "codex_exec": CODEX_EXEC,
        "gemini": GEMINI_SHELL,
        "opencode": OPENCODE_BASH,
    }


@pytest.fixture
def script() -> Script:
    return parse_script(SCRIPT)


@pytest.fixture
def server(script: Script, tmp_path: Path) -> Iterator[ModelServer]:
    with ModelServer(script, host="127.0.0.1", port=0, log_dir=tmp_path / "rollout") as srv:
        yield srv
