"""A job: many rollouts (agents x tasks x attempts) with bounded concurrency.

Each trial's result.json is written as it ends; the job's result.json aggregates
them. One failing trial never cancels its siblings. An infrastructure failure is
retried with backoff (the earlier errors kept in `retried_errors`, the earlier
attempt's files in `<trial>/retries/<n>/`). Cancelling the job (`Job.cancel()` or
cancelling the caller) stops every running trial (each still removes its sandbox),
records the queued ones as skipped and writes result.json with `cancelled: true`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from benchflow import bounds as B
from benchflow.agents.base import AgentDriver
from benchflow.config import RolloutConfig
from benchflow.errors import ResultsWriteError
from benchflow.job.config import MetricConfig
from benchflow.job.limits import ensure_fd_limit, job_gc
from benchflow.job.metrics import compute_metrics
from benchflow.job.models import JobResult, RolloutRef, build_job_result
from benchflow.job.retry import NO_RETRY, RetryPolicy
from benchflow.paths import rollout_name, task_and_dataset
from benchflow.rollout.events import RolloutEvent, RolloutEventKind, RolloutListener
from benchflow.rollout.result import ErrorInfo, RolloutResult, utcnow, write_json_atomic
from benchflow.sandbox.owner import CleanupScope, job_instance_id
from benchflow.task import Task
from benchflow.trace_ids import new_run_id

if TYPE_CHECKING:
    from benchflow.rollout.fork import ForkPlan  # `benchflow fork`'s: imported by it
    from benchflow.rollout.rollout import Rollout  # imported by the first trial that runs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedRollout:
    """One planned rollout of the job.

    `task` is None when the task did not load: the rollout then records task_invalid
    or task_not_found without starting a container. `drivers` are per-job agent
    drivers (command agents) the rollout uses before the registry.
    """

    config: RolloutConfig
    task: Task | None = None
    drivers: Mapping[str, AgentDriver] = field(default_factory=dict)
    task_folder: str | None = None

    @property
    def ref(self) -> RolloutRef:
        """The rollout's identity as the job result lists it (task = the task folder name)."""
        c = self.config
        task, dataset = task_and_dataset(
            self.task.path if self.task else c.task_path.expanduser().resolve(), c.dataset_name)
        return RolloutRef(task_name=self.task_folder or task, dataset_name=dataset,
                          agent_name=c.agent_name, attempt=c.attempt)

    @property
    def rollout_name(self) -> str:
        """`<agent>/<dataset>/<task>__<n>`, the rollout's folder under the job."""
        r = self.ref
        return rollout_name(r.agent_name, r.dataset_name, r.task_name, r.attempt)


def _archive_attempt(root: Path, attempt: int) -> None:
    """Move a failed attempt's files to `<trial>/retries/<attempt>/` before the next one."""
    if not root.is_dir():
        return
    dest = root / "retries" / str(attempt)
    dest.mkdir(parents=True, exist_ok=True)
    for child in list(root.iterdir()):
        if child.name != "retries":
            os.replace(child, dest / child.name)


@dataclass
class Job:
    """Runs `trials` with at most `concurrency` at once and writes the job's result.json.

    `finished` holds results of an earlier run of the same job (resume): they count in
    the aggregates and are not run again.
    """

    name: str
    jobs_dir: Path
    trials: Sequence[PlannedRollout]
    concurrency: int = B.DEFAULT_CONCURRENCY
    listener: RolloutListener | None = None
    retry: RetryPolicy = NO_RETRY
    metrics: Sequence[MetricConfig] = ()
    finished: Sequence[RolloutResult] = ()
    admission: anyio.Semaphore | None = None
    """Acquired before a trial starts, released by whoever consumes its result
    (`benchflow.stream`'s backpressure); None: no such bound."""
    run_id: str = field(default_factory=new_run_id)
    started_at: datetime | None = None
    results: list[RolloutResult] = field(default_factory=list)
    cancelled: bool = False
    fatal: ResultsWriteError | None = None
    """Why the job stopped early without being cancelled (its files could not be written)."""
    _by_index: dict[int, RolloutResult] = field(default_factory=dict, repr=False)
    _started: set[int] = field(default_factory=set, repr=False)
    _scope: anyio.CancelScope | None = field(default=None, repr=False)

    @property
    def job_dir(self) -> Path:
        return self.jobs_dir / self.name

    @property
    def job_id(self) -> str:
        """The job instance's id (kept in the job folder: a resumed job keeps it)."""
        return job_instance_id(self.job_dir)

    @property
    def cleanup_scope(self) -> CleanupScope:
        """This job instance's sandboxes (those of live other processes excepted)."""
        return CleanupScope(job_id=self.job_id)

    @property
    def running(self) -> int:
        """How many trials have started and not ended."""
        return len(self._started) - len(self._by_index)

    def cancel(self) -> None:
        """Stop starting trials and cancel the running ones; `run()` then returns normally."""
        self.cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> JobResult:
        """Run every trial; returns (and writes) the job result, `cancelled` if cancelled.

        Raises:
            ResultsWriteError: the job's files could not be written (a full disk): the job
                stopped starting trials, the running ones ended (their sandboxes removed),
                every result written before stays valid; `jobs resume` finishes it.
        """
        self.started_at = self.started_at or utcnow()
        try:
            self.job_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ResultsWriteError.for_path(self.job_dir, exc, self.job_dir) from exc
        ensure_fd_limit(min(self.concurrency, len(self.trials)))
        limiter = anyio.CapacityLimiter(max(1, self.concurrency))
        try:
            with job_gc(), anyio.CancelScope() as self._scope:
                if self.cancelled:
                    self._scope.cancel()
                async with anyio.create_task_group() as tg:
                    for index, trial in enumerate(self.trials):
                        tg.start_soon(self._run_trial, index, trial, limiter,
                                      name=trial.rollout_name)
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        finally:
            try:
                result = self.write_result()
            except OSError as exc:  # written by the next `jobs resume`
                result = self.build_result()
                self._stop(ResultsWriteError.for_path(self.job_dir / "result.json", exc,
                                                      self.job_dir))
        if self.fatal is not None:
            raise self.fatal
        return result

    def _stop(self, error: ResultsWriteError) -> None:
        """The job's files cannot be written: start nothing more, end the running trials."""
        log.info("the job stops: %s", error)  # the CLI prints it once, as it ends
        if self.fatal is None:
            self.fatal = error
        if self._scope is not None:
            self._scope.cancel()

    def all_results(self) -> list[RolloutResult]:
        """Finished results of earlier runs, then this run's in plan order."""
        return [*self.finished, *(self._by_index[i] for i in sorted(self._by_index))]

    def skipped(self, *, include_running: bool = False) -> list[RolloutRef]:
        """Trials that never started (and, for an abrupt exit, those without a result)."""
        return [t.ref for i, t in enumerate(self.trials)
                if i not in self._started or (include_running and i not in self._by_index)]

    def build_result(self, *, include_running: bool = False) -> JobResult:
        """The job result as of now (counts, aggregates, metrics)."""
        results = self.all_results()
        started = self.started_at or utcnow()
        return build_job_result(self.name, results, self.skipped(include_running=include_running),
                                cancelled=self.cancelled, started_at=started, ended_at=utcnow(),
                                metrics=compute_metrics(results, self.metrics))

    def write_result(self, *, include_running: bool = False) -> JobResult:
        """Write `jobs/<job>/result.json` (atomically) and return it."""
        result = self.build_result(include_running=include_running)
        write_json_atomic(self.job_dir / "result.json", result.model_dump_json(indent=2))
        return result

    # -- one trial ---------------------------------------------------------------------

    def _listener(self, attempt: int) -> RolloutListener | None:
        """Forward events, except the END of an attempt that will be retried."""
        if self.listener is None:
            return None
        listener, retry = self.listener, self.retry

        def forward(event: RolloutEvent) -> None:
            if (event.kind is RolloutEventKind.END and event.result is not None
                    and retry.should_retry(event.result, attempt)):
                return
            listener(event)

        return forward

    @staticmethod
    def _mark_cancelled(rollout: Rollout) -> None:
        result = rollout.result
        assert result.error is not None
        result.error = ErrorInfo(type="cancelled", phase=result.error.phase,
                                 message=f"cancelled with the job (then: {result.error.type}: "
                                         f"{result.error.message})")
        result.reward = result.rewards = None
        write_json_atomic(rollout.paths.result, result.model_dump_json(indent=2))

    def _record(self, index: int, result: RolloutResult) -> None:
        self._by_index[index] = result
        self.results.append(result)

    async def _run_trial(self, index: int, trial: PlannedRollout, limiter: anyio.CapacityLimiter) -> None:
        config = trial.config.model_copy(update={"job_name": self.name, "jobs_dir": self.jobs_dir,
                                                 "run_id": self.run_id,
                                                 "job_id": trial.config.job_id or self.job_id})
        retried: list[ErrorInfo] = []
        last: RolloutResult | None = None
        attempt = 0
        if self.admission is not None:
            await self.admission.acquire()
        try:
            while True:
                attempt += 1
                async with limiter:
                    self._started.add(index)
                    rollout = _rollout_class(trial.task)(
                        config, task=trial.task, listener=self._listener(attempt),
                        drivers=trial.drivers)
                    rollout.result.retried_errors = list(retried)
                    last = rollout.result  # a cancelled rollout still has a (cancelled) result
                    try:
                        await rollout.run()
                    except ResultsWriteError as exc:  # no room for its result: resume reruns it
                        last = None
                        self._stop(exc)
                        return
                if self.cancelled and last.error is not None and last.error.type != "cancelled":
                    try:
                        self._mark_cancelled(rollout)  # its sandbox was removed under it
                    except OSError as exc:
                        self._stop(ResultsWriteError.for_path(rollout.paths.result, exc,
                                                              self.job_dir))
                if not self.retry.should_retry(last, attempt):
                    return
                assert last.error is not None
                delay = self.retry.delay_sec(attempt)
                log.warning("%s: attempt %d failed with %s; retrying in %.1f s",
                            rollout.rollout_name, attempt, last.error.type, delay)
                retried.append(last.error)
                await anyio.sleep(delay)
                _archive_attempt(rollout.paths.root, attempt)
        finally:
            if last is not None:
                self._record(index, last)


def _rollout_class(task: Task | None) -> type[Rollout]:
    """`rollout.qa.rollout_class`, importing the QA rollout only for a QA item."""
    if task is not None and task.qa is not None:
        from benchflow.rollout.qa import rollout_class

        return rollout_class(task)
    # here, not at the top: planning a job (`benchflow run` validating its options, then
    # starting its first sandbox) does not wait for the whole rollout machinery to import
    from benchflow.rollout.rollout import Rollout

    return Rollout


async def run_fork(plan: ForkPlan, *, concurrency: int = B.DEFAULT_CONCURRENCY) -> list[RolloutResult]:
    """Run a fork's rollouts (`benchflow fork`) as one job; returns their results."""
    job = Job(name=plan.job_name, jobs_dir=plan.jobs_dir,
              trials=[PlannedRollout(config=c) for c in plan.configs], concurrency=concurrency)
    await job.run()
    return job.all_results()
