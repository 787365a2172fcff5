"""Scripted users: Python (or a model, `LLMUser`) that drives an agent over several rounds.

Each round is a fresh ACP session in the same sandbox. Between rounds a soft verify
(the verifier without the destructive hardening steps) scores the sandbox, and the user
sees a `RoundResult` and decides the next prompt, or stops with None.

```python
class Disclose(bf.BaseUser):
    async def run(self, round, instruction, result):
        if result and result.passed:
            return None                        # solved: stop
        return [terse, hints, instruction][round] if round < 3 else None
```
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchflow.bounds import MAX_TURNS
from benchflow.trajectory.events import Event
from benchflow.verify.rewards import passes


@dataclass(frozen=True)
class RoundResult:
    """What one round left: its events, the soft verify's rewards and output, tool calls."""

    round: int
    trajectory: Sequence[Event] = field(default_factory=tuple)
    rewards: dict[str, float] | None = None
    verifier_output: str = ""
    verifier_error: str | None = None
    n_tool_calls: int = 0

    @property
    def passed(self) -> bool:
        return passes((self.rewards or {}).get("reward"))


class BaseUser:
    """Subclass and implement `run`; override `setup` to see the instruction (and solution).

    Both methods may be written `def` or `async def` (the spec shows them synchronous);
    the user loop awaits whatever they return when it is awaitable.
    """

    async def setup(self, instruction: str, solution: str | None) -> None:
        """Called once before round 0. `solution` is set only with `oracle_access=True`."""

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        """The prompt of round `round` (None stops). `round_result` is None at round 0."""
        raise NotImplementedError


async def resolve(value: Any) -> Any:
    """`value`, awaited when it is awaitable (a user method may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


UserFn = Callable[[int, str, RoundResult | None], "str | None | Awaitable[str | None]"]


class FunctionUser(BaseUser):
    """A user from a plain or async function `fn(round, instruction, round_result)`."""

    def __init__(self, fn: UserFn) -> None:
        self.fn = fn

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        value: str | None = await resolve(self.fn(round, instruction, round_result))
        return value


LLM_USER_SYSTEM = """You play a user who asked an AI coding agent for help. Stay in character:
{persona}

Each turn you see the task and what the agent's last round produced (test rewards, the
verifier's output, the agent's last message). Write your next message to the agent: short,
in the persona's voice, giving only what the persona would say. When the task is done to the
persona's satisfaction (or nothing more can help), reply with exactly {done}."""


class LLMUser(BaseUser):
    """A user whose next message comes from a model playing `persona`.

    ```python
    user = LLMUser(persona="a terse senior engineer who wants tests", model="qwen3",
                   base_url="http://127.0.0.1:8000/v1")
    ```

    Each round the model sees the persona, the instruction and the last round's result
    (rewards, verifier output tail, the agent's last message) and answers with the next
    prompt, or `done_marker` to stop. It also stops after `max_rounds` messages. Without
    `base_url`/`endpoint`, a rollout gives it its own model endpoint. From a task's
    frontmatter: `user: {type: llm, persona: ..., model: ..., max_rounds: 3}`.
    """

    def __init__(self, persona: str, model: str | None = None, base_url: str | None = None, *,
                 api_key_env: str | None = None, endpoint: Any = None,
                 max_rounds: int | None = None, done_marker: str = "DONE",
                 temperature: float | None = None, max_retries: int = 3,
                 tail_chars: int = 2000) -> None:
        from benchflow.config import ModelEndpoint

        if not persona.strip():
            raise ValueError("LLMUser needs a persona")
        self.persona = persona
        self.model = model
        self.endpoint: ModelEndpoint | None = endpoint
        if base_url is not None:
            self.endpoint = ModelEndpoint(base_url=base_url, api_key_env=api_key_env, model=model)
        self.max_rounds = max_rounds
        self.done_marker = done_marker
        self.temperature = temperature
        self.max_retries = max_retries
        self.tail_chars = tail_chars
        self.transcript: list[dict[str, str]] = []

    def with_endpoint(self, endpoint: Any) -> LLMUser:
        """Use `endpoint` when none was given (the rollout's own model endpoint)."""
        if self.endpoint is None:
            self.endpoint = endpoint
        return self

    def _observation(self, round: int, instruction: str, result: RoundResult | None) -> str:
        if result is None:
            return (f"The task you want done:\n{instruction}\n\nWrite your first message to "
                    "the agent.")
        last = ""
        for event in reversed(result.trajectory):
            if getattr(event, "type", None) == "agent_message" and getattr(event, "text", ""):
                last = event.text  # type: ignore[attr-defined]
                break
        tail = result.verifier_output[-self.tail_chars:]
        return (f"Round {result.round} ended. Rewards: {result.rewards}. "
                f"Verifier error: {result.verifier_error or 'none'}.\n"
                f"Verifier output (tail):\n{tail or '(none)'}\n\n"
                f"The agent's last message:\n{last[-self.tail_chars:] or '(none)'}\n\n"
                f"Your next message to the agent (or {self.done_marker}):")

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        from benchflow.errors import ConfigError
        from benchflow.models import ModelClient

        if self.max_rounds is not None and round >= self.max_rounds:
            return None
        if self.endpoint is None:
            raise ConfigError("LLMUser needs a model endpoint (base_url=...), or a rollout "
                              "with --model-base-url / --model-server")
        system = LLM_USER_SYSTEM.format(persona=self.persona, done=self.done_marker)
        self.transcript.append({"role": "user",
                                "content": self._observation(round, instruction, round_result)})
        async with ModelClient(self.endpoint, max_retries=self.max_retries) as client:
            reply = await client.chat([{"role": "system", "content": system}, *self.transcript],
                                      model=self.model, temperature=self.temperature)
        text = reply.text.strip()
        self.transcript.append({"role": "assistant", "content": text})
        if not text or text.strip(" .!\"'`").upper() == self.done_marker.upper():
            return None
        return text


def user_from_frontmatter(block: Any, source: str = "task.md") -> BaseUser:
    """The user a task's frontmatter `user:` block describes (`type: llm` only).

    Raises:
        ConfigError: an unknown type or key, or no persona.
    """
    from benchflow.errors import ConfigError

    if not isinstance(block, dict):
        raise ConfigError(f"{source}: `user` must be a mapping with type: llm and a persona")
    data = dict(block)
    kind = data.pop("type", "llm")
    if kind != "llm":
        raise ConfigError(f"{source}: user.type {kind!r} is not supported (supported: llm)")
    known = {"persona", "model", "base_url", "api_key_env", "max_rounds", "done_marker",
             "temperature"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) user.{', user.'.join(unknown)} "
                          f"(valid: type, {', '.join(sorted(known))})")
    if not isinstance(data.get("persona"), str) or not data["persona"].strip():
        raise ConfigError(f"{source}: user.persona is required (who the simulated user is)")
    _check_number(source, data, "max_rounds", int, 1, MAX_TURNS)
    _check_number(source, data, "temperature", float, 0.0, 2.0)
    try:
        return LLMUser(**data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: user: {exc}") from exc


def _check_number(source: object, data: dict[str, Any], key: str, kind: type, low: float,
                  high: float) -> None:
    """`user.<key>`, when given, is a `kind` within [low, high] (docs/reference/bounds.md).

    Raises:
        ConfigError: it is not.
    """
    from benchflow.errors import ConfigError

    value = data.get(key)
    if value is None:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (kind is int and not isinstance(value, int)) or not low <= value <= high:
        what = "an integer" if kind is int else "a number"
        raise ConfigError(f"{source}: user.{key} {value!r}: give {what} from {low:g} to "
                          f"{high:g}")
