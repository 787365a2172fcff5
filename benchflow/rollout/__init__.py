"""Rollouts: one agent configuration on one task."""

from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.rollout import Rollout, run

__all__ = ["Rollout", "RolloutEvent", "RolloutEventKind", "RolloutResult", "run"]
