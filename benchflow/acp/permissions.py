"""How benchflow answers an agent's `session/request_permission`.

An unattended benchmark has nobody to click "allow": a `PermissionPolicy` decides.
The default approves (preferring "always" so the agent stops asking); `deny()`
rejects; `callback(fn)` lets a study decide per request (e.g. deny `rm -rf`).
Every request and answer is written to the trajectory by the session.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

ALLOW_PREFERENCE = ("allow_always", "allow_once")
REJECT_PREFERENCE = ("reject_once", "reject_always")


@dataclass(frozen=True)
class PermissionRequest:
    """What the agent asks: the tool call (raw ACP `ToolCallUpdate`) and the options."""

    session_id: str
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]

    @property
    def title(self) -> str:
        return str(self.tool_call.get("title") or "")

    @property
    def kind(self) -> str | None:
        return self.tool_call.get("kind")

    def option(self, option_id_or_kind: str) -> dict[str, Any] | None:
        """The option with this id, else the first option of this kind."""
        for opt in self.options:
            if opt.get("optionId") == option_id_or_kind:
                return opt
        return next((o for o in self.options if o.get("kind") == option_id_or_kind), None)

    def first_of(self, kinds: Sequence[str]) -> dict[str, Any] | None:
        """The first option whose kind comes earliest in `kinds`."""
        for kind in kinds:
            if opt := self.option_of_kind(kind):
                return opt
        return None

    def option_of_kind(self, kind: str) -> dict[str, Any] | None:
        return next((o for o in self.options if o.get("kind") == kind), None)


@dataclass(frozen=True)
class PermissionAnswer:
    """The chosen option (`option_id` None means the request was cancelled)."""

    option_id: str | None
    option_kind: str | None = None

    @property
    def outcome(self) -> str:
        return "cancelled" if self.option_id is None else "selected"


Decision = str | bool | None
"""What a callback returns: an option id or kind, True (approve), False (deny), None (cancel)."""

Decider = Callable[[PermissionRequest], Decision | Awaitable[Decision]]


class PermissionPolicy:
    """Answers permission requests; build one with `auto_approve()`, `deny()` or `callback()`."""

    def __init__(self, name: str, decider: Decider) -> None:
        self.name = name
        self._decider = decider

    @classmethod
    def auto_approve(cls) -> PermissionPolicy:
        """Select allow_always when offered, else allow_once (the default policy)."""
        return cls("auto_approve", lambda request: True)

    @classmethod
    def deny(cls) -> PermissionPolicy:
        """Select reject_once when offered, else reject_always, else cancel the request."""
        return cls("deny", lambda request: False)

    @classmethod
    def callback(cls, fn: Decider, name: str = "callback") -> PermissionPolicy:
        """Let `fn(request)` decide (sync or async); see `Decision` for what it may return."""
        return cls(name, fn)

    async def decide(self, request: PermissionRequest) -> PermissionAnswer:
        """Run the policy; an unusable answer is logged and becomes a cancel."""
        decision = self._decider(request)
        if inspect.isawaitable(decision):
            decision = await decision
        if decision is True:
            chosen = request.first_of(ALLOW_PREFERENCE)
        elif decision is False:
            chosen = request.first_of(REJECT_PREFERENCE)
        elif decision is None or decision == "cancelled":
            chosen = None
        else:
            chosen = request.option(str(decision))
            if chosen is None:
                logger.error(
                    "permission policy %s chose %r, which is not an offered option",
                    self.name,
                    decision,
                )
        if chosen is None:
            return PermissionAnswer(option_id=None)
        return PermissionAnswer(
            option_id=str(chosen.get("optionId")), option_kind=chosen.get("kind")
        )

    def __repr__(self) -> str:
        return f"PermissionPolicy({self.name!r})"


__all__ = ["Decider", "Decision", "PermissionAnswer", "PermissionPolicy", "PermissionRequest"]
