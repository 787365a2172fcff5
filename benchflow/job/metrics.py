"""The job file's `metrics`: sum, min, max or mean of trial rewards.

A metric covers every finished trial; a trial without a reward because of an error
counts as 0, so an agent that crashes scores lower rather than vanishing from the metric
(as in Harbor). A trial run with the verifier disabled (no reward, no error) is not
scored and is skipped, as are cancelled trials. `mean_reward` in the job result, by
contrast, averages completed trials only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from benchflow.job.config import MetricConfig
from benchflow.rollout.result import RolloutResult


def metric_value(kind: str, rewards: Sequence[float]) -> float | None:
    """One metric over rewards; None when there are none."""
    if not rewards:
        return None
    if kind == "sum":
        return float(sum(rewards))
    if kind == "min":
        return float(min(rewards))
    if kind == "max":
        return float(max(rewards))
    if kind == "mean":
        return sum(rewards) / len(rewards)
    raise ValueError(f"unknown metric {kind!r}")


def compute_metrics(results: Iterable[RolloutResult], metrics: Sequence[MetricConfig]
                    ) -> dict[str, float | None]:
    """`{type: value}` for each configured metric (duplicates collapse)."""
    rewards = [r.reward if r.reward is not None else 0.0 for r in results
               if (r.reward is not None or r.error is not None)
               and not (r.error is not None and r.error.type == "cancelled")]
    return {m.type: metric_value(m.type, rewards) for m in metrics}


__all__ = ["compute_metrics", "metric_value"]
