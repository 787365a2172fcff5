"""A job: many rollouts (agents x tasks x attempts) with bounded concurrency.

Each rollout's result.json is written as it ends; the job's result.json aggregates
them. One failing rollout never cancels its siblings; cancelling the job cancels every
running rollout (each still cleans up its sandbox) and records the rest as skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from benchflow.config import RolloutConfig
from benchflow.job.models import JobResult, TrialRef, build_job_result
from benchflow.rollout.events import RolloutListener
from benchflow.rollout.result import RolloutResult, utcnow, write_json_atomic
from benchflow.rollout.rollout import Rollout
from benchflow.task import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trial:
    """One planned rollout of the job."""

    config: RolloutConfig
    task: Task | None = None

    @property
    def ref(self) -> TrialRef:
        c = self.config
        return TrialRef(task_name=self.task.name if self.task else c.task_path.name,
                        dataset_name=c.dataset_name or c.task_path.parent.name,
                        agent_name=c.agent_name, attempt=c.attempt)


@dataclass
class Job:
    """Runs `trials` with at most `concurrency` at once and writes the job's result.json."""

    name: str
    jobs_dir: Path
    trials: Sequence[Trial]
    concurrency: int = 4
    listener: RolloutListener | None = None
    results: list[RolloutResult] = field(default_factory=list)

    @property
    def job_dir(self) -> Path:
        return self.jobs_dir / self.name

    async def run(self) -> JobResult:
        started = utcnow()
        self.job_dir.mkdir(parents=True, exist_ok=True)
        limiter = anyio.CapacityLimiter(max(1, self.concurrency))
        started_trials: set[int] = set()
        cancelled = False
        try:
            async with anyio.create_task_group() as tg:
                for index, trial in enumerate(self.trials):
                    tg.start_soon(self._run_trial, index, trial, limiter, started_trials,
                                  name=trial.ref.task_name)
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            skipped = [t.ref for i, t in enumerate(self.trials) if i not in started_trials]
            result = build_job_result(self.name, self.results, skipped, cancelled=cancelled,
                                      started_at=started, ended_at=utcnow())
            write_json_atomic(self.job_dir / "result.json", result.model_dump_json(indent=2))
        return result

    async def _run_trial(self, index: int, trial: Trial, limiter: anyio.CapacityLimiter,
                         started: set[int]) -> None:
        async with limiter:
            started.add(index)
            rollout = Rollout(trial.config.model_copy(update={"job_name": self.name,
                                                              "jobs_dir": self.jobs_dir}),
                              task=trial.task, listener=self.listener)
            try:
                await rollout.run()
            finally:  # a cancelled rollout still has a (cancelled) result
                self.results.append(rollout.result)
