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
    ToolResultEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
    WorkspaceChangesEvent,
)
from benchflow.trajectory.tool_calls import ToolCall, content_text, matches_wire_id


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
        elif isinstance(event, ToolCallEvent | ToolCallUpdateEvent):
            key = (event.session_id, event.tool_call_id or "")
            update = _with_event_fields(event)
            call = block._calls.get(key)
            if call is None:  # a new call (an update without its start: begun on an earlier page)
                call = ToolCall.start(update, seq=event.seq, ts=event.ts,
                                      call_id=event.tool_call_id or f"seq-{event.seq}")
                if isinstance(event, ToolCallUpdateEvent) and not call.title:
                    call.title = "(started earlier)"
                block._calls[key] = call
                block.items.append(call)
            else:
                call.apply(update, event.ts)
        elif isinstance(event, ToolResultEvent):
            target = next((c for c in block.tool_calls
                           if matches_wire_id(c.id, event.tool_call_id)), None)
            if target is not None:
                target.apply_model_result(arguments=event.arguments, output=event.output,
                                          name=event.name)
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


def _with_event_fields(event: ToolCallEvent | ToolCallUpdateEvent) -> dict[str, Any]:
    """The event's raw update, with the title, kind and status the event states where the
    update lacks them (events written by benchflow itself may state them only there)."""
    update = event.update
    stated = {"title": event.title, "kind": getattr(event, "kind", None), "status": event.status}
    missing = {k: v for k, v in stated.items() if v and not update.get(k)}
    return {**update, **missing} if missing else update


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
