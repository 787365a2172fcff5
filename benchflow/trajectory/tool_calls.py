"""One tool call, assembled from everything the agent reported about it.

An ACP agent reports a tool call as a `tool_call` update followed by any number of
`tool_call_update`s, and each real agent puts the arguments and the output in different
places (recorded from the real agents in `tests/golden/`):

| agent    | arguments                                      | output                                    |
|----------|------------------------------------------------|-------------------------------------------|
| claude   | `rawInput: {}` first, `{command}` in an update | `rawOutput` (a string); content in a fence|
| codex    | `rawInput.command` (argv) on the `tool_call`   | `rawOutput.formatted_output`, `aggregated_output`, `stdout`/`stderr`, `exit_code` |
| opencode | `rawInput: {cwd}` first, `{command, cwd}` later| content text, `rawOutput.output`, `rawOutput.metadata.exit` |
| gemini   | none (the title is the command)                | none: the result comes from the model call (`tool_result` event) |

The rules, applied in wire order by `ToolCall.apply()`:

- arguments: each non-empty `rawInput` object is merged over what came before (later keys
  win), so an empty `{}` never hides a command sent later; a non-object `rawInput`
  replaces it. A `tool_result` event (the call as the agent sent it to the model) fills
  arguments the ACP updates never had.
- output: each update's output is, in order, its `rawOutput` (a string; or an object's
  `output`, `formatted_output`, `aggregated_output`, `stdout` + `stderr`, or an MCP
  `content` list), else its `content` text (text blocks and diffs); a later non-empty
  output replaces an earlier one. What the opening `tool_call` carries is only a preview
  (gemini puts `[current working directory /app]` there): any later output, or a
  `tool_result` event, replaces it; a `tool_result` event also fills an empty output.
- exit code: `rawOutput.exit_code` / `exitCode` / `metadata.exit`, the last one seen.
- status, title and kind: the last non-empty value.

The viewer, the exporters (`sft`, `sharegpt`, `atif`), the ACP recorder and the model agent
all use this model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_OUTPUT_KEYS = ("output", "formatted_output", "aggregated_output")
_EXIT_KEYS = ("exit_code", "exitCode")
_ENDED = ("completed", "failed")


def content_text(content: Any) -> str:
    """The text of an ACP tool-call `content` list: text blocks, diffs (`--- path` and the
    new text); terminals (their output lives in the client) are skipped."""
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "content":
            inner = block.get("content")
            if isinstance(inner, dict) and inner.get("type") == "text":
                parts.append(str(inner.get("text", "")))
        elif block.get("type") == "diff":
            parts.append(f"--- {block.get('path', '')}\n{block.get('newText', '')}")
    return "".join(parts)


def raw_output_text(raw: Any) -> str:
    """The output text in an ACP `rawOutput`, whatever the agent's shape ('' if none)."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict):
        return ""
    for key in _OUTPUT_KEYS:
        value = raw.get(key)
        if isinstance(value, str) and value:
            return value
    streams = [raw.get(k) for k in ("stdout", "stderr")]
    text = "".join(s for s in streams if isinstance(s, str))
    if text:
        return text
    blocks = raw.get("content")
    if isinstance(blocks, list):  # an MCP tool result
        return "".join(str(b.get("text", "")) for b in blocks
                       if isinstance(b, dict) and b.get("type") == "text")
    return ""


def exit_code_of(raw: Any) -> int | None:
    """The exit code in an ACP `rawOutput` (codex `exit_code`, opencode `metadata.exit`)."""
    if not isinstance(raw, dict):
        return None
    meta = raw.get("metadata")
    candidates = [raw.get(k) for k in _EXIT_KEYS]
    if isinstance(meta, dict):
        candidates.append(meta.get("exit"))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def update_output(update: dict[str, Any]) -> str:
    """The output one update carries: its `rawOutput`, else its `content` text."""
    return raw_output_text(update.get("rawOutput")) or content_text(update.get("content"))


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == "" or value == []


@dataclass
class ToolCall:
    """One tool call with its merged arguments (`input`) and output (see the module rules)."""

    id: str
    title: str = ""
    tool_kind: str | None = None
    seq: int = 0
    input: Any = None
    status: str | None = None
    output: str = ""
    exit_code: int | None = None
    tool_name: str | None = None
    """The agent's own name for the tool when it says (claude's `Bash`, gemini's
    `run_shell_command` from its model call), else None."""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    kind: str = "tool"
    preview: bool = False
    """`output` came from the opening `tool_call` only (a description, not a result)."""

    @classmethod
    def start(cls, update: dict[str, Any], *, seq: int = 0, ts: datetime | None = None,
              call_id: str | None = None) -> ToolCall:
        """A call from its first update (a `tool_call`, or an update for an unseen id)."""
        ident = call_id or str(update.get("toolCallId") or f"seq-{seq}")
        call = cls(id=ident, seq=seq, started_at=ts)
        call.apply(update, ts)
        return call

    def apply(self, update: dict[str, Any], ts: datetime | None = None) -> None:
        """Merge one `tool_call` / `tool_call_update` (its raw ACP update) into the call."""
        title, kind, status = update.get("title"), update.get("kind"), update.get("status")
        if isinstance(title, str) and title:
            self.title = title
        if isinstance(kind, str) and kind:
            self.tool_kind = kind
        if isinstance(status, str) and status:
            self.status = status
            if status in _ENDED and ts is not None:
                self.ended_at = ts
        meta = update.get("_meta")
        claude = meta.get("claudeCode") if isinstance(meta, dict) else None
        if isinstance(claude, dict) and isinstance(claude.get("toolName"), str):
            self.tool_name = claude["toolName"]
        raw_input = update.get("rawInput")
        if isinstance(raw_input, dict):
            if raw_input:
                base = self.input if isinstance(self.input, dict) else {}
                self.input = {**base, **raw_input}
            elif self.input is None:
                self.input = {}
        elif not _empty(raw_input):
            self.input = raw_input
        output = update_output(update)
        if output:
            self.output = output
            self.preview = update.get("sessionUpdate") == "tool_call"
        exit_code = exit_code_of(update.get("rawOutput"))
        if exit_code is not None:
            self.exit_code = exit_code

    def apply_model_result(self, *, arguments: dict[str, Any] | None, output: str | None,
                           name: str | None) -> None:
        """Fill what the ACP updates lacked from the call as the agent sent it to the model
        (a `tool_result` event): arguments, output and the tool's name."""
        if _empty(self.input) and arguments:
            self.input = dict(arguments)
        if (not self.output or self.preview) and output:
            self.output, self.preview = output, False
        if self.tool_name is None and name:
            self.tool_name = name

    @property
    def name(self) -> str:
        """A function-like name for chat formats: the ACP kind, else `tool`."""
        return self.tool_kind or "tool"

    @property
    def has_arguments(self) -> bool:
        return not _empty(self.input)

    @property
    def arguments(self) -> str:
        """The call's input as a JSON string (`{"title": ...}` when the agent sent none)."""
        value = self.input if self.has_arguments else {"title": self.title}
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    @property
    def command(self) -> str | None:
        """The shell command of an execute call: `command` as a string (an argv's last
        element, codex's `["/bin/sh", "-lc", CMD]`), else the title; None for other kinds."""
        if self.tool_kind != "execute":
            return None
        value = self.input.get("command") if isinstance(self.input, dict) else None
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value[-1]
        if isinstance(value, str) and value:
            return value
        return self.title or None

    @property
    def duration_sec(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return round((self.ended_at - self.started_at).total_seconds(), 3)


def matches_wire_id(acp_id: str, wire_id: str) -> bool:
    """Whether a model call's tool call id names the ACP tool call `acp_id` (gemini
    prefixes the wire id with the tool's name: `run_shell_command__<id>`)."""
    return acp_id == wire_id or (bool(wire_id) and acp_id.endswith("_" + wire_id))


@dataclass
class ToolCallTracker:
    """Tool calls by id as their updates stream in (the recorder's and the tests' view)."""

    calls: dict[str, ToolCall] = field(default_factory=dict)

    def feed(self, update: dict[str, Any], *, seq: int = 0,
             ts: datetime | None = None) -> ToolCall | None:
        kind = update.get("sessionUpdate")
        if kind not in ("tool_call", "tool_call_update"):
            return None
        ident = str(update.get("toolCallId") or f"seq-{seq}")
        call = self.calls.get(ident)
        if call is None:
            call = self.calls[ident] = ToolCall.start(update, seq=seq, ts=ts, call_id=ident)
        else:
            call.apply(update, ts)
        return call

    def incomplete(self) -> list[str]:
        """Ids of calls that have no arguments or no output yet (a preview is none)."""
        return [c.id for c in self.calls.values()
                if not (c.has_arguments and c.output and not c.preview)]


def tool_calls(updates: Iterable[dict[str, Any]]) -> dict[str, ToolCall]:
    """The tool calls in a stream of raw ACP updates, by id, merged."""
    tracker = ToolCallTracker()
    for seq, update in enumerate(updates):
        tracker.feed(update, seq=seq)
    return tracker.calls


__all__ = [
    "ToolCall",
    "ToolCallTracker",
    "content_text",
    "exit_code_of",
    "matches_wire_id",
    "raw_output_text",
    "tool_calls",
    "update_output",
]
