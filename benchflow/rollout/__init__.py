"""Rollouts: one agent configuration on one task.

Names are imported on first use (PEP 562): importing one part of the package
(`benchflow.rollout.model_endpoint`, `.result`) does not load the whole rollout machinery,
so a job's configs validate, and its first sandbox starts, before that is imported.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING

_EXPORTS = {"Rollout": "benchflow.rollout.rollout", "run": "benchflow.rollout.rollout",
            "RolloutEvent": "benchflow.rollout.events",
            "RolloutEventKind": "benchflow.rollout.events",
            "RolloutResult": "benchflow.rollout.result", "RunResult": "benchflow.rollout.result"}

if TYPE_CHECKING:
    from benchflow.rollout.events import RolloutEvent, RolloutEventKind
    from benchflow.rollout.result import RolloutResult
    from benchflow.rollout.rollout import Rollout, run

    RunResult = RolloutResult


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # RunResult: what `benchflow.run()` returns, the concepts doc's name for RolloutResult
    value = getattr(_import_module(module), "RolloutResult" if name == "RunResult" else name)
    globals()[name] = value
    return value


__all__ = ["Rollout", "RolloutEvent", "RolloutEventKind", "RolloutResult", "RunResult", "run"]
