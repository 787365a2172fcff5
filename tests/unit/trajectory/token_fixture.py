"""`model_calls.jsonl` fixtures with the contract's fields (scene, role, turn, round, agent,
model, the token fields and `token_data`), as the relay writes them for a coder/reviewer
scene on one vLLM endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SYSTEM = [1, 2, 3]
CODER_1 = [10, 11, 2]          # the coder's first reply (a tool call), then EOS
TOOL_OUTPUT = [50, 51]         # the tool result the agent sent back: prompt tokens
CODER_2 = [12, 2]
REVIEWER_PROMPT = [1, 7, 8]
REVIEWER = [30, 31, 2]         # the reviewer's own text: never in the coder's sample
REVIEW_IN_CODER_PROMPT = [60, 61]  # the review, as the coder's next prompt renders it
CODER_3 = [13, 2]


def call(seq: int, role: str, turn: int, prompt: list[int] | None,
         completion: list[int] | None, *, path: str = "/v1/chat/completions",
         status: int = 200) -> dict[str, Any]:
    """One captured call; token fields only when ids are given (else `absent`)."""
    entry: dict[str, Any] = {
        "seq": seq, "ts": "2026-01-02T03:04:05Z", "source": "relay", "scene": "review-loop",
        "role": role, "turn": turn, "round": None, "agent": "model", "model": "policy",
        "method": "POST", "path": path, "status": status, "duration_sec": 0.1, "stream": False,
        "request": {"model": "policy", "messages": [{"role": "user", "content": "..."}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "..."}}]},
        "token_data": "absent"}
    if prompt is not None and completion is not None:
        entry.update(prompt_token_ids=prompt, completion_token_ids=completion,
                     logprobs=[-0.1 * (i + 1) for i in range(len(completion))],
                     token_data="exact")
    return entry


def coder_reviewer_calls() -> list[dict[str, Any]]:
    """coder (2 calls, a tool result between) -> reviewer -> coder (the review in its prompt)."""
    first = SYSTEM
    second = [*first, *CODER_1, *TOOL_OUTPUT]
    third = [*second, *CODER_2, *REVIEW_IN_CODER_PROMPT]
    return [call(0, "coder", 0, first, CODER_1), call(1, "coder", 0, second, CODER_2),
            call(2, "reviewer", 1, REVIEWER_PROMPT, REVIEWER),
            call(3, "coder", 2, third, CODER_3)]


def write_calls(path: Path, calls: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(c) + "\n" for c in calls))
