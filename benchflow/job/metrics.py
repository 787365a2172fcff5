"""The job file's `metrics`: sum, min, max or mean of trial rewards.

A metric covers every finished trial; a trial without a reward because of an error
counts as 0, so an agent that crashes scores lower rather than vanishing from the metric
(as in Harbor). A trial run with the verifier disabled (no reward, no error) is not
scored and is skipped, as are cancelled trials. `mean_reward` in the job result, by
contrast, averages completed trials only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from benchflow.job.config import MetricConfig
from benchflow.rollout.result import RolloutResult


@dataclass
class RunningMetrics:
    """The metrics of the results added so far, each `add` O(1) (a live display of a
    10,000-trial job must not recompute over every result at each end)."""

    count: int = 0
    total: float = 0.0
    low: float | None = None
    high: float | None = None

    def add(self, result: RolloutResult) -> None:
        """Count `result` as the metrics do (errors as 0; not scored and cancelled: skipped)."""
        if result.reward is None and result.error is None:
            return
        if result.error is not None and result.error.type == "cancelled":
            return
        self.add_reward(result.reward if result.reward is not None else 0.0)

    def add_reward(self, reward: float) -> None:
        self.count += 1
        self.total += reward
        self.low = reward if self.low is None else min(self.low, reward)
        self.high = reward if self.high is None else max(self.high, reward)

    def value(self, kind: str) -> float | None:
        if not self.count:
            return None
        if kind == "sum":
            return float(self.total)
        if kind == "min":
            return float(self.low)  # type: ignore[arg-type]
        if kind == "max":
            return float(self.high)  # type: ignore[arg-type]
        if kind == "mean":
            return self.total / self.count
        raise ValueError(f"unknown metric {kind!r}")

    def values(self, metrics: Sequence[MetricConfig]) -> dict[str, float | None]:
        return {m.type: self.value(m.type) for m in metrics}


def compute_metrics(results: Iterable[RolloutResult], metrics: Sequence[MetricConfig]
                    ) -> dict[str, float | None]:
    """`{type: value}` for each configured metric (duplicates collapse)."""
    running = RunningMetrics()
    for result in results:
        running.add(result)
    return running.values(metrics)


__all__ = ["RunningMetrics", "compute_metrics"]
