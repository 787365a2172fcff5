"""Trajectory events grouped into turns: one prompt and everything the agent did for it.

The viewer renders these blocks and the exporters turn them into chat messages. Grouping
streams (constant memory per block): a block starts at each prompt benchflow sent, and at
each change of scene or role. Tool calls are paired with their updates inside a block by
`(session_id, tool_call_id)` (ids repeat across sessions: `call-1` in every one).

```python
for block in group_turns(iter_events(path)):
    block.role, block.turn, block.prompt
    for item in block.items:      # Message | Thought | ToolCall | Plan | TurnUsage | Note
        ...
```
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchflow.trajectory.events import (
    AgentMessageEvent,
    AgentStateEvent,
    AgentThoughtEvent,
    CommandEvent,
    ErrorEvent,
    Event,
    FileChange,
    OracleEvent,
    PermissionEvent,
    PlanEvent,
    ToolCallEvent,
    ToolCallUpdateEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
    WorkspaceChangesEvent,
)


@dataclass
class Message:
    """Text the agent sent (consecutive chunks merged)."""

    text: str
    seq: int
    kind: str = "message"


@dataclass
class Thought:
    """The agent's reasoning text (consecutive chunks merged)."""

    text: str
    seq: int
    kind: str = "thought"


@dataclass
class ToolCall:
    """One tool call with its result: `output` is the text of its last content update."""

    id: str
    title: str
    tool_kind: str | None
    seq: int
    input: Any = None
    status: str | None = None
    output: str = ""
    ended_at: datetime | None = None
    started_at: datetime | None = None
    kind: str = "tool"

    @property
    def name(self) -> str:
        """A function-like name for chat formats: the ACP kind, else `tool`."""
        return self.tool_kind or "tool"

    @property
    def arguments(self) -> str:
        """The call's input as a JSON string (`{"title": ...}` when the agent sent none)."""
        value = self.input if self.input is not None else {"title": self.title}
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    @property
    def duration_sec(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return round((self.ended_at - self.started_at).total_seconds(), 3)


@dataclass
class Plan:
    entries: list[dict[str, Any]]
    seq: int
    kind: str = "plan"


@dataclass
class TurnUsage:
    """Tokens and cost of the turn (`scope: turn` usage events)."""

    usage: Usage
    seq: int
    kind: str = "usage"


@dataclass
class Note:
    """Anything else worth showing: commands, oracle runs, permissions, errors, state."""

    label: str
    text: str
    seq: int
    error: bool = False
    output: str = ""
    kind: str = "note"


@dataclass
class Changes:
    """What the turn did to the workspace (a `workspace_changes` event)."""

    changes: list[FileChange]
    seq: int
    kind: str = "changes"


Item = Message | Thought | ToolCall | Plan | TurnUsage | Note | Changes


@dataclass
class TurnBlock:
    """One prompt of one role and what followed it, in wire order."""

    scene: str | None
    role: str | None
    turn: int | None
    round: int | None
    session_id: str | None
    prompt: str | None = None
    first_seq: int | None = None
    started_at: datetime | None = None
    items: list[Item] = field(default_factory=list)
    continued: bool = False
    _calls: dict[tuple[str | None, str], ToolCall] = field(default_factory=dict, repr=False)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [i for i in self.items if isinstance(i, ToolCall)]

    @property
    def usage(self) -> Usage | None:
        total: Usage | None = None
        for item in self.items:
            if isinstance(item, TurnUsage):
                total = item.usage if total is None else total + item.usage
        return total


def content_text(content: Any) -> str:
    """The text of an ACP tool-call `content` list: text blocks, diffs (new text); terminals
    (live output elsewhere) are skipped."""
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


def _output_of(update: dict[str, Any]) -> str:
    text = content_text(update.get("content"))
    if text:
        return text
    raw = update.get("rawOutput")
    if isinstance(raw, dict) and isinstance(raw.get("output"), str):
        return raw["output"]
    if isinstance(raw, str):
        return raw
    return ""


class _Grouper:
    def __init__(self) -> None:
        self.block: TurnBlock | None = None

    def _new(self, event: Event, prompt: str | None) -> TurnBlock:
        return TurnBlock(scene=event.scene, role=event.role, turn=event.turn, round=event.round,
                         session_id=event.session_id, prompt=prompt, first_seq=event.seq,
                         started_at=event.ts)

    def feed(self, event: Event) -> Iterator[TurnBlock]:
        is_prompt = isinstance(event, UserMessageEvent) and event.update is None
        place_changed = self.block is not None and (
            (event.scene, event.role) != (self.block.scene, self.block.role))
        if is_prompt or place_changed or self.block is None:
            carried: list[Item] = []
            old = self.block
            if (old is not None and is_prompt and old.prompt is None and not place_changed
                    and all(isinstance(i, Note) for i in old.items)):
                carried = old.items  # session setup (model selection) joins the first prompt
            elif old is not None:
                yield old
            prompt = event.text if isinstance(event, UserMessageEvent) and is_prompt else None
            self.block = self._new(event, prompt)
            self.block.items.extend(carried)
            if is_prompt:
                return
        block = self.block
        assert block is not None
        self._add(block, event)

    def _add(self, block: TurnBlock, event: Event) -> None:
        if block.turn is None and event.turn is not None:
            block.turn = event.turn
        last = block.items[-1] if block.items else None
        if isinstance(event, AgentMessageEvent):
            if isinstance(last, Message):
                last.text += event.text
            else:
                block.items.append(Message(event.text, event.seq))
        elif isinstance(event, AgentThoughtEvent):
            if isinstance(last, Thought):
                last.text += event.text
            else:
                block.items.append(Thought(event.text, event.seq))
        elif isinstance(event, UserMessageEvent):
            block.items.append(Note("user message (replayed)", event.text, event.seq))
        elif isinstance(event, ToolCallEvent):
            call = ToolCall(id=event.tool_call_id or f"seq-{event.seq}",
                            title=event.title or "", tool_kind=event.kind, seq=event.seq,
                            input=event.update.get("rawInput"), status=event.status,
                            started_at=event.ts)
            call.output = _output_of(event.update)
            block._calls[(event.session_id, call.id)] = call
            block.items.append(call)
        elif isinstance(event, ToolCallUpdateEvent):
            key = (event.session_id, event.tool_call_id or "")
            call = block._calls.get(key)
            if call is None:  # started on an earlier page, or never announced
                call = ToolCall(id=event.tool_call_id or f"seq-{event.seq}",
                                title=event.title or "(started earlier)", tool_kind=None,
                                seq=event.seq)
                block._calls[key] = call
                block.items.append(call)
            if event.title:
                call.title = event.title
            if event.status:
                call.status = event.status
                if event.status in ("completed", "failed"):
                    call.ended_at = event.ts
            if call.input is None and event.update.get("rawInput") is not None:
                call.input = event.update.get("rawInput")
            output = _output_of(event.update)
            if output:
                call.output = output
        elif isinstance(event, PlanEvent):
            block.items.append(Plan(event.entries or [], event.seq))
        elif isinstance(event, UsageEvent):
            if event.scope == "turn" and event.usage is not None:
                block.items.append(TurnUsage(event.usage, event.seq))
        elif isinstance(event, CommandEvent | OracleEvent):
            exit_code = "" if event.exit_code is None else f" (exit {event.exit_code})"
            block.items.append(Note(event.type, event.command + exit_code, event.seq,
                                    error=bool(event.exit_code), output=event.output))
        elif isinstance(event, PermissionEvent):
            title = event.tool_call.get("title") or event.tool_call.get("toolCallId") or ""
            block.items.append(Note("permission", f"{title}: {event.outcome} "
                                    f"{event.option_kind or ''} ({event.policy})", event.seq))
        elif isinstance(event, ErrorEvent):
            block.items.append(Note(f"error: {event.error_type}", event.message, event.seq,
                                    error=True, output=event.stderr_tail or ""))
        elif isinstance(event, WorkspaceChangesEvent):
            block.items.append(Changes(event.changes, event.seq))
        elif isinstance(event, AgentStateEvent) and event.name == "model":
            requested = event.update.get("requested")
            if requested:
                block.items.append(Note("model", str(requested), event.seq))


def group_turns(events: Iterable[Event]) -> Iterator[TurnBlock]:
    """Blocks of events, one per prompt (and per scene/role change), in file order."""
    grouper = _Grouper()
    for event in events:
        yield from grouper.feed(event)
    if grouper.block is not None:
        yield grouper.block


__all__ = [
    "Changes",
    "Item",
    "Message",
    "Note",
    "Plan",
    "Thought",
    "ToolCall",
    "TurnBlock",
    "TurnUsage",
    "content_text",
    "group_turns",
]
