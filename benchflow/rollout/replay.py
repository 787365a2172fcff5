"""The history a forked rollout gives a role that already had turns before the fork point.

A fork restarts every agent from the snapshot before turn N. A role whose earlier turns
(before N) should be remembered gets them as text at the start of its first prompt after
the fork: for each earlier turn, the prompt it was given, the commands and tools it ran,
and its final answer, from the original rollout's trajectory. The format (stable, so a
study can rely on it):

```
[benchflow] This conversation continues from a restored sandbox. Your earlier turns in it:

## Turn 0
Prompt: <the prompt>
Tools you ran: <title>; <title>
Your final answer: <text>

[benchflow] End of the earlier turns. The workspace is as you left it. Your next task:

<the prompt of the turn>
```

Texts are cut to `MAX_FIELD_CHARS` each.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from benchflow.trajectory.conversation import Message, ToolCall, TurnBlock, group_turns
from benchflow.trajectory.reader import iter_events

MAX_FIELD_CHARS = 4000
HEADER = ("[benchflow] This conversation continues from a restored sandbox. "
          "Your earlier turns in it:")
FOOTER = ("[benchflow] End of the earlier turns. The workspace is as you left it. "
          "Your next task:")


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_FIELD_CHARS else text[:MAX_FIELD_CHARS] + " [...]"


def role_history(blocks: Iterable[TurnBlock], role: str, scene: str | None,
                 before_turn: int) -> str | None:
    """The summary of `role`'s turns in `scene` before turn `before_turn` (None: none)."""
    parts = []
    for block in blocks:
        if (block.role != role or block.scene != scene or block.turn is None
                or block.turn >= before_turn or block.prompt is None):
            continue
        tools = [i.title for i in block.items if isinstance(i, ToolCall) and i.title]
        answers = [i.text for i in block.items if isinstance(i, Message) and i.text.strip()]
        lines = [f"## Turn {block.turn}", f"Prompt: {_cut(block.prompt)}"]
        if tools:
            lines.append("Tools you ran: " + _cut("; ".join(tools)))
        if answers:
            lines.append(f"Your final answer: {_cut(answers[-1])}")
        parts.append("\n".join(lines))
    if not parts:
        return None
    return "\n\n".join([HEADER, *parts])


def histories(trajectory: Path, roles: Iterable[tuple[str, str | None, int]]) -> dict[str, str]:
    """For each (role, scene, first turn after the fork): its history, by role name."""
    blocks = list(group_turns(iter_events(trajectory))) if trajectory.is_file() else []
    out = {}
    for role, scene, before in roles:
        text = role_history(blocks, role, scene, before)
        if text is not None:
            out[role] = text
    return out


def with_history(history: str, prompt: str) -> str:
    """The first prompt after the fork, with the role's history before it."""
    return f"{history}\n\n{FOOTER}\n\n{prompt}"


__all__ = ["FOOTER", "HEADER", "histories", "role_history", "with_history"]
