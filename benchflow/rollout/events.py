"""Lifecycle events a rollout emits, for progress displays and other subscribers."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchflow.rollout.result import RolloutResult


class RolloutEventKind(enum.Enum):
    START = "start"
    SANDBOX_START = "sandbox_start"
    AGENT_INSTALL = "agent_install"
    AGENT_START = "agent_start"
    VERIFY_START = "verify_start"
    END = "end"
    CANCEL = "cancel"


@dataclass(frozen=True)
class RolloutEvent:
    kind: RolloutEventKind
    rollout_name: str
    result: RolloutResult | None = None


RolloutListener = Callable[[RolloutEvent], None]


def combine(*listeners: RolloutListener | None) -> RolloutListener | None:
    """One listener calling each given one in order (None when none is given)."""
    given = [listener for listener in listeners if listener is not None]
    if len(given) <= 1:
        return given[0] if given else None

    def fan_out(event: RolloutEvent) -> None:
        for listener in given:
            listener(event)

    return fan_out
