"""JobResult: the aggregates of a job's trials (`jobs/<job>/result.json`)."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from benchflow._models import StrictModel
from benchflow.rollout.result import RolloutResult
from benchflow.verify.rewards import passes


class RolloutRef(StrictModel):
    """One trial's identity and reward, as listed in the job result."""

    task_name: str
    dataset_name: str
    agent_name: str
    attempt: int
    reward: float | None = None
    error_type: str | None = None


class Aggregates(StrictModel):
    total_trials: int = 0
    completed_trials: int = 0
    failed_trials: int = 0
    skipped_trials: int = 0
    pass_rate: float | None = None
    mean_reward: float | None = None
    total_cost: float | None = None
    pass_at_k: dict[str, float] | None = None


class _JobHead(StrictModel):
    schema_version: Literal[1] = 1
    job_name: str
    cancelled: bool = False


class JobResult(Aggregates, _JobHead):
    """Job-level result.json: what ran, what passed, what was skipped.

    Field order (head, aggregates, then the rest) follows the job spec's example file.
    """

    total_duration_sec: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    agents: dict[str, Aggregates] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    skipped: list[RolloutRef] = Field(default_factory=list)
    results: list[RolloutRef] = Field(default_factory=list)


def _ref(r: RolloutResult) -> RolloutRef:
    return RolloutRef(task_name=r.task_name, dataset_name=r.dataset_name, agent_name=r.agent_name,
                    attempt=r.attempt, reward=r.reward,
                    error_type=r.error.type if r.error else None)


def _pass_at_k(results: list[RolloutResult]) -> dict[str, float] | None:
    """pass@k over (agent, dataset, task) groups, with the unbiased estimator.

    A cancelled trial never ran to its end: it is no attempt (neither pass nor fail), so
    a cancelled job with nothing scored has no pass@k (None), not 0.
    """
    groups: dict[tuple[str, str, str], list[int]] = {}  # [trials, passed] per group
    for r in results:
        if r.error is not None and r.error.type == "cancelled":
            continue
        counts = groups.setdefault((r.agent_name, r.dataset_name, r.task_name), [0, 0])
        counts[0] += 1
        counts[1] += r.passed
    n_max = max((n for n, _c in groups.values()), default=0)
    if n_max <= 1:
        return None
    sums = [0.0] * (n_max + 1)  # per k: the sum of the groups' pass@k
    n_groups = [0] * (n_max + 1)  # per k: how many groups have at least k trials
    for n, c in groups.values():
        for k, value in enumerate(pass_at_k_curve(n, c), start=1):
            sums[k] += value
            n_groups[k] += 1
    return {str(k): sums[k] / n_groups[k] for k in range(1, n_max + 1) if n_groups[k]}


def pass_at_k_curve(n: int, c: int) -> list[float]:
    """The unbiased pass@k of one task with `c` passes in `n` attempts, for k = 1..n:
    1 - C(n-c, k) / C(n, k) (Chen et al. 2021)."""
    # the ratio updated from k to k+1 (no big integers): a group of 1,000 attempts costs
    # 1,000 steps, not 1,000 binomials of 300 digits
    out, ratio = [], 1.0
    for k in range(1, n + 1):
        ratio *= max(n - c - k + 1, 0) / (n - k + 1)
        out.append(1.0 - ratio)
    return out


def aggregate(results: list[RolloutResult], skipped: int = 0) -> Aggregates:
    """Counts and rates over trials. A teardown error alone does not make a trial failed."""
    completed = [r for r in results if r.completed]
    failed = [r for r in results if not r.completed and r.error is not None
              and r.error.type != "environment_teardown_failed"]
    costs = [r.cost for r in results if r.cost is not None]
    rewards = [r.reward for r in completed if r.reward is not None]
    return Aggregates(
        total_trials=len(results) + skipped,
        completed_trials=len(completed),
        failed_trials=len(failed),
        skipped_trials=skipped,
        pass_rate=(sum(passes(r) for r in rewards) / len(rewards)) if rewards else None,
        mean_reward=(sum(rewards) / len(rewards)) if rewards else None,
        total_cost=sum(costs) if costs else None,
        pass_at_k=_pass_at_k(results),
    )


def build_job_result(job_name: str, results: list[RolloutResult], skipped: list[RolloutRef],
                     *, cancelled: bool, started_at: datetime, ended_at: datetime,
                     metrics: dict[str, float | None] | None = None) -> JobResult:
    agg = aggregate(results, len(skipped))
    by_agent: dict[str, list[RolloutResult]] = {}
    for r in results:
        by_agent.setdefault(r.agent_name, []).append(r)
    skipped_by_agent: dict[str, int] = {}
    for s in skipped:
        skipped_by_agent[s.agent_name] = skipped_by_agent.get(s.agent_name, 0) + 1
    agents = {name: aggregate(rs, skipped_by_agent.get(name, 0)) for name, rs in by_agent.items()}
    for name, n in skipped_by_agent.items():
        agents.setdefault(name, aggregate([], n))
    return JobResult(
        **agg.model_dump(), job_name=job_name, cancelled=cancelled,
        total_duration_sec=round((ended_at - started_at).total_seconds(), 3),
        started_at=started_at, ended_at=ended_at, agents=agents, metrics=metrics or {},
        skipped=skipped, results=[_ref(r) for r in results],
    )
