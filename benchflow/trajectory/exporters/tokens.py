"""Token samples for RL trainers, from captured model calls (`model_calls.jsonl`).

A sample is one role's token sequence in one rollout, built only from the token ids the
model server returned (`token_data: exact` calls); benchflow never tokenises text:

```json
{"prompt_ids": [...], "completion_ids": [...], "loss_mask": [1, 1, 0, 0, 1],
 "logprobs": [-0.2, -0.9, null, null, -0.1], "reward": 1.0, "credit": 1.0,
 "metadata": {"rollout": "...", "role": "coder", "call_seqs": [0, 2], ...}}
```

The role's calls are concatenated in order: the first call's prompt is `prompt_ids`; each
call's generated tokens follow with mask 1 and their log-probabilities; what the next
call's prompt adds after them (tool output, the partner role's text, the chat template's
glue) follows with mask 0 and null log-probabilities. A call extends the sequence only when
its prompt starts with the whole sequence so far (token for token); when it does not (the
agent rewrote its history, or the template renders a past turn differently from how it
was generated), a new sequence starts: the rollout's role then gives one sample per such
segment (`metadata.segment`, `metadata.n_segments`), never a spliced one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

SkipReason = Literal["no_model_calls", "no_token_data"]
"""Why a rollout's role gives no sample: no captured generation call of the role, or none
with token data (`token_data: absent`, e.g. an endpoint asked without --capture-tokens)."""

_GENERATION_PATHS = ("/chat/completions", "/completions", "/messages", "/responses")


class TokenSample(BaseModel):
    """One training sample (see the module docstring); lengths are checked."""

    model_config = ConfigDict(extra="forbid")

    prompt_ids: list[int]
    completion_ids: list[int]
    loss_mask: list[Literal[0, 1]]
    logprobs: list[float | None]
    reward: float | None
    credit: float | None
    metadata: dict[str, Any]

    @model_validator(mode="after")
    def _aligned(self) -> TokenSample:
        n = len(self.completion_ids)
        if len(self.loss_mask) != n or len(self.logprobs) != n:
            raise ValueError(f"loss_mask ({len(self.loss_mask)}) and logprobs "
                             f"({len(self.logprobs)}) must match completion_ids ({n})")
        if not self.prompt_ids:
            raise ValueError("prompt_ids is empty")
        return self


@dataclass
class TokenSequence:
    """A role's concatenated calls (one segment)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    call_seqs: list[int] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)

    def extends_to(self, prompt: list[int]) -> bool:
        """Whether `prompt` starts with this whole sequence."""
        return prompt[:len(self.prompt_ids) + len(self.completion_ids)] == [
            *self.prompt_ids, *self.completion_ids]

    def add(self, call: dict[str, Any], inserted: list[int]) -> None:
        """Append `inserted` (mask 0) and the call's generated tokens (mask 1)."""
        completion = call["completion_token_ids"]
        logprobs = call.get("logprobs") or [None] * len(completion)
        self.completion_ids += [*inserted, *completion]
        self.loss_mask += [0] * len(inserted) + [1] * len(completion)
        self.logprobs += [None] * len(inserted) + list(logprobs)
        self.call_seqs.append(call.get("seq", -1))
        if isinstance(call.get("turn"), int) and call["turn"] not in self.turns:
            self.turns.append(call["turn"])


def is_generation_call(call: dict[str, Any]) -> bool:
    """A successful model call (chat, completions, messages, responses)."""
    path = str(call.get("path", "")).split("?")[0]
    return (str(call.get("method", "POST")).upper() == "POST"
            and 200 <= int(call.get("status") or 0) < 300
            and path.endswith(_GENERATION_PATHS))


def token_sequences(calls: Iterable[dict[str, Any]]) -> list[TokenSequence]:
    """The segments of `calls` (one role's exact-token calls, in order)."""
    segments: list[TokenSequence] = []
    for call in calls:
        prompt = list(call["prompt_token_ids"])
        current = segments[-1] if segments else None
        if current is not None and current.extends_to(prompt):
            done = len(current.prompt_ids) + len(current.completion_ids)
            current.add(call, prompt[done:])
            continue
        segment = TokenSequence(prompt_ids=prompt)
        segment.add(call, [])
        segments.append(segment)
    return segments


@dataclass
class RoleTokens:
    """What one role of one rollout gives: its segments, or why none."""

    role: str | None
    segments: list[TokenSequence]
    skipped: SkipReason | None = None
    calls: int = 0
    calls_without_token_data: int = 0


def role_tokens(calls: list[dict[str, Any]], role: str | None) -> RoleTokens:
    """The token segments of `role` among a rollout's captured `calls`. Calls without
    token data are left out and counted (their output reaches later prompts as prompt
    tokens, mask 0)."""
    mine = [c for c in calls if c.get("role") == role and is_generation_call(c)]
    exact = [c for c in mine if c.get("token_data") == "exact"]
    out = RoleTokens(role, token_sequences(exact), calls=len(mine),
                     calls_without_token_data=len(mine) - len(exact))
    if not mine:
        out.skipped = "no_model_calls"
    elif not exact:
        out.skipped = "no_token_data"
    return out


def read_calls(path: Path) -> list[dict[str, Any]]:
    """The calls of a `model_calls.jsonl` file in order (none if it is absent; a torn last
    line is dropped)."""
    if not path.is_file():
        return []
    calls = []
    with path.open("rb") as fh:
        for line in fh:
            try:
                call = json.loads(line)
            except ValueError:
                continue
            if isinstance(call, dict):
                calls.append(call)
    return calls


def credit_for(rewards: dict[str, float] | None, reward: float | None,
               role: str | None) -> tuple[float | None, str]:
    """A role's credit: the task's `credit:<role>` reward when the verifier wrote one, else
    the rollout's reward; and where it came from (`task` | `reward`)."""
    key = f"credit:{role}"
    if rewards and role is not None and key in rewards:
        return rewards[key], "task"
    return reward, "reward"


def samples_of(tokens: RoleTokens, *, reward: float | None, rewards: dict[str, float] | None,
               metadata: dict[str, Any]) -> Iterator[TokenSample]:
    """One `TokenSample` per segment of `tokens`."""
    credit, source = credit_for(rewards, reward, tokens.role)
    for i, segment in enumerate(tokens.segments):
        yield TokenSample(
            prompt_ids=segment.prompt_ids, completion_ids=segment.completion_ids,
            loss_mask=segment.loss_mask, logprobs=segment.logprobs,  # type: ignore[arg-type]
            reward=reward, credit=credit,
            metadata={**metadata, "credit_source": source, "segment": i,
                      "n_segments": len(tokens.segments), "call_seqs": segment.call_seqs,
                      "turns": segment.turns, "n_calls": tokens.calls,
                      "n_calls_without_token_data": tokens.calls_without_token_data})


__all__ = ["RoleTokens", "SkipReason", "TokenSample", "TokenSequence", "credit_for",
           "is_generation_call", "read_calls", "role_tokens", "samples_of", "token_sequences"]
