"""Rollouts: one agent configuration on one task."""

from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.rollout import Rollout, run

RunResult = RolloutResult
"""What `benchflow.run()` returns: an alias of `RolloutResult` (the concepts doc's name)."""

__all__ = ["Rollout", "RolloutEvent", "RolloutEventKind", "RolloutResult", "RunResult", "run"]
