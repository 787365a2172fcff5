"""A role's turns as a chat: user prompts and agent steps (text, reasoning, tool calls).

ACP reports what an agent did, not where one model call ended and the next began; an agent
step here is a run of text and reasoning followed by the tool calls that came after it (a
new step starts when text follows a tool call). That matches how chat models emit an
assistant message with `tool_calls`, then read the tool results.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from benchflow.trajectory.conversation import (
    Message,
    Note,
    Thought,
    ToolCall,
    TurnBlock,
    TurnUsage,
)
from benchflow.trajectory.events import Usage


@dataclass
class UserStep:
    text: str
    ts: datetime | None = None


@dataclass
class AgentStep:
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    ts: datetime | None = None

    @property
    def empty(self) -> bool:
        return not (self.text or self.reasoning or self.calls)


Step = UserStep | AgentStep


def call_id(block: TurnBlock, call: ToolCall) -> str:
    """A tool call id unique in the role's chat (agents restart ids in every session)."""
    return f"t{block.turn if block.turn is not None else 'x'}_{call.id}"


def role_steps(blocks: Iterable[TurnBlock], role: str | None) -> list[Step]:
    """The chat of `role` (None: blocks without a role) across all its turns, in order.

    Tool calls get ids unique within the chat (`call_id`)."""
    steps: list[Step] = []
    for block in blocks:
        if block.role != role:
            continue
        if block.prompt is not None:
            steps.append(UserStep(block.prompt, block.started_at))
        current = AgentStep()
        for item in block.items:
            if isinstance(item, Message | Thought) and current.calls:
                steps.append(current)
                current = AgentStep()
            if isinstance(item, Message):
                current.text += item.text
            elif isinstance(item, Thought):
                current.reasoning += item.text
            elif isinstance(item, ToolCall):
                copy = ToolCall(**{**item.__dict__, "id": call_id(block, item)})
                current.calls.append(copy)
            elif isinstance(item, TurnUsage):
                current.usage = item.usage if current.usage is None else current.usage + item.usage
            elif isinstance(item, Note) and item.label in ("command", "oracle"):
                current.text += ("\n" if current.text else "") + f"$ {item.text}\n{item.output}"
        if not current.empty:
            steps.append(current)
        elif current.usage is not None:
            for prev in reversed(steps):  # usage reported after the last text of the turn
                if isinstance(prev, AgentStep):
                    prev.usage = current.usage if prev.usage is None else prev.usage + current.usage
                    break
    return steps


def roles_of(blocks: Iterable[TurnBlock]) -> list[str | None]:
    """Roles in order of first appearance."""
    seen: list[str | None] = []
    for block in blocks:
        if block.role not in seen:
            seen.append(block.role)
    return seen
