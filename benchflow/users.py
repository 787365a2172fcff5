"""Scripted users: Python that drives an agent over several rounds.

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
    """Subclass and implement `run`; override `setup` to see the instruction (and solution)."""

    async def setup(self, instruction: str, solution: str | None) -> None:
        """Called once before round 0. `solution` is set only with `oracle_access=True`."""

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        """The prompt of round `round` (None stops). `round_result` is None at round 0."""
        raise NotImplementedError


UserFn = Callable[[int, str, RoundResult | None], "str | None | Awaitable[str | None]"]


class FunctionUser(BaseUser):
    """A user from a plain or async function `fn(round, instruction, round_result)`."""

    def __init__(self, fn: UserFn) -> None:
        self.fn = fn

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        value: Any = self.fn(round, instruction, round_result)
        if inspect.isawaitable(value):
            value = await value
        return value
