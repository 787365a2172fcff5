"""Chat formats: OpenAI messages (for SFT) and ShareGPT conversations.

OpenAI (what TRL's `SFTTrainer` reads from a `messages` column):

```json
{"messages": [{"role": "user", "content": "..."},
              {"role": "assistant", "content": "...", "tool_calls": [{"id": "t0_call-1",
                "type": "function", "function": {"name": "execute", "arguments": "{...}"}}]},
              {"role": "tool", "tool_call_id": "t0_call-1", "content": "..."}]}
```

ShareGPT (LLaMA-Factory's layout with tools): `{"conversations": [{"from": "human" | "gpt" |
"function_call" | "observation", "value": ...}]}`.
"""

from __future__ import annotations

import json
from typing import Any

from benchflow.trajectory.exporters.segments import AgentStep, Step, UserStep


def openai_messages(steps: list[Step], *, reasoning: bool = False) -> list[dict[str, Any]]:
    """Steps as OpenAI chat messages: each tool call is answered by a `tool` message with
    its id. `reasoning=True` keeps thoughts as `reasoning_content`."""
    messages: list[dict[str, Any]] = []
    for step in steps:
        if isinstance(step, UserStep):
            messages.append({"role": "user", "content": step.text})
            continue
        message: dict[str, Any] = {"role": "assistant", "content": step.text}
        if reasoning and step.reasoning:
            message["reasoning_content"] = step.reasoning
        if step.calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call in step.calls]
        messages.append(message)
        for call in step.calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": call.output})
    return messages


def sharegpt_conversations(steps: list[Step]) -> list[dict[str, str]]:
    """Steps as ShareGPT turns; a step's text comes before its function calls."""
    turns: list[dict[str, str]] = []
    for step in steps:
        if isinstance(step, UserStep):
            turns.append({"from": "human", "value": step.text})
            continue
        assert isinstance(step, AgentStep)
        if step.text or not step.calls:
            turns.append({"from": "gpt", "value": step.text})
        for call in step.calls:
            turns.append({"from": "function_call", "value": json.dumps(
                {"name": call.name, "arguments": json.loads(call.arguments)},
                ensure_ascii=False)})
            turns.append({"from": "observation", "value": call.output})
    return turns
