"""`benchflow.stream`: each rollout's result as it finishes, for training loops.

```python
import benchflow as bf

async with bf.stream("job.yaml", concurrency=64) as results:
    async for result in results:          # in the order rollouts finish
        trainer.add(result.reward, result.trajectory_path)
```

Underneath is the job machinery of `benchflow jobs run`: the job folder with its
config.json, manifest.json, each trial's result.json and the job's result.json,
retries of transient infrastructure failures, and every sandbox removed. Only a
trial's final attempt is yielded (an attempt that will be retried is not).

Leaving the loop early (`break`, an exception, `aclose()`, the `async with` block
ending) cancels the rollouts still running; each removes its sandbox, the queued
ones are recorded as skipped and the job's result.json says `cancelled`. `aclose()`
and the `async with` block return only once that is done; a stream that is simply
dropped mid-way is cancelled too, and its cleanup finishes on the event loop.

With `max_pending=N` the stream applies backpressure: at most N rollouts are started
and not yet taken by the consumer, so a trainer that stops reading stops the job from
starting more (the rest wait, queued).

The stream runs on asyncio (the event loop RL trainers use).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio

from benchflow.config import RolloutConfig
from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig, RetryConfig, load_job_config, with_absolute_paths
from benchflow.job.job import Job, PlannedRollout
from benchflow.job.models import JobResult
from benchflow.job.retry import RetryPolicy
from benchflow.job.runner import make_job, prepare_job, start_new_job
from benchflow.job.store import job_lock
from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import RolloutResult
from benchflow.paths import default_job_name
from benchflow.sandbox.registry import get_provider
from benchflow.task import load_task

log = logging.getLogger(__name__)

_END = object()

Trials = JobConfig | str | Path | Sequence[RolloutConfig | PlannedRollout]
"""What `stream` runs: a job (a `JobConfig` or a job file's path), or rollout configs (or
planned `PlannedRollout`s: a config with its loaded task and agent drivers)."""


class RolloutStream:
    """An async iterator of `RolloutResult`s in finishing order (see the module docstring).

    `result` holds the job's `JobResult` once the stream is exhausted or closed.
    """

    def __init__(self, job: Job, prepare: Callable[[], Awaitable[None]],
                 max_pending: int | None = None) -> None:
        self.job = job
        self._prepare = prepare
        if max_pending is not None:
            job.admission = anyio.Semaphore(max_pending)
        self._done: list[JobResult] = []
        self._queue: asyncio.Queue[object] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def result(self) -> JobResult | None:
        return self._done[0] if self._done else None

    # -- iteration ---------------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RolloutResult:
        if self._task is None:
            self._queue = queue = asyncio.Queue()
            self.job.listener = functools.partial(_forward, queue)
            # the task holds the job, never this stream: a dropped stream is collected
            # at once, and its __del__ cancels the job
            self._task = asyncio.get_running_loop().create_task(
                _run(self.job, self._prepare, queue, self._done), name=f"stream {self.job.name}")
        assert self._queue is not None
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # later calls end too
            await self._task  # the job's own failure (bad input, a crash) surfaces here
            raise StopAsyncIteration
        assert isinstance(item, RolloutResult)
        if self.job.admission is not None:
            self.job.admission.release()  # taken: another rollout may start
        return item

    # -- closing -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Cancel what still runs and wait until every sandbox is removed and result.json
        is written."""
        task = self._task
        if task is None or task.done():
            if task is not None and not task.cancelled():
                task.exception()  # retrieved: the consumer already saw it or left early
            return
        self.job.cancel()
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():  # the caller itself was cancelled: let the job finish alone
                raise
        except Exception:  # noqa: BLE001 - the consumer left; the job's error is logged
            log.warning("job %s ended with an error after the stream was closed",
                        self.job.name, exc_info=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # dropped mid-way (`break` without `async with`): cancel; the job cleans up on its loop
        task = self._task
        if task is not None and not task.done():
            try:
                self.job.cancel()
            except RuntimeError:  # the event loop is already closed
                pass


async def _run(job: Job, prepare: Callable[[], Awaitable[None]], queue: asyncio.Queue[object],
               done: list[JobResult]) -> None:
    try:
        await prepare()
        done.append(await job.run())
    finally:
        queue.put_nowait(_END)


def _forward(queue: asyncio.Queue[object], event: RolloutEvent) -> None:
    """The job's listener: each trial's final result, into the stream's queue."""
    if event.kind is RolloutEventKind.END and event.result is not None:
        queue.put_nowait(event.result)


def stream(trials: Trials, *, concurrency: int | None = None, job_name: str | None = None,
           jobs_dir: Path | None = None, max_pending: int | None = None,
           retry: RetryPolicy | None = None) -> RolloutStream:
    """Run `trials` and yield each rollout's result as it finishes.

    `trials` is a `JobConfig`, a job file's path, or a sequence of `RolloutConfig`s or
    `PlannedRollout`s (one trial each; then `job_name` (default: a timestamp) and `jobs_dir`
    (default `jobs`) name the job folder). `concurrency` overrides the job's
    `n_concurrent_trials` (default 4 for rollout configs); `max_pending` bounds the
    rollouts started and not yet consumed (backpressure; default: none). `retry` replaces
    the default retries of transient failures of rollout configs (a job has its own).

    Raises:
        ConfigError: bad input (a job file, an agent, a dataset, a task), before anything
            starts; the provider's preflight (daemon, credentials) fails on first iteration.
    """
    if isinstance(trials, str | Path):
        trials = with_absolute_paths(load_job_config(trials), Path(trials).parent)
    if max_pending is not None and max_pending < 1:
        raise ConfigError(f"benchflow.stream: max_pending must be at least 1, not {max_pending}")
    if isinstance(trials, JobConfig):
        return _job_stream(trials, concurrency, max_pending)
    configs = list(trials)
    if not configs or not all(isinstance(c, RolloutConfig | PlannedRollout) for c in configs):
        raise ConfigError("benchflow.stream: give a JobConfig, a job file's path, or a "
                          "non-empty sequence of RolloutConfig")
    return _config_stream(configs, concurrency or 4, job_name or default_job_name(),
                          jobs_dir or Path("jobs"), max_pending,
                          RetryPolicy.from_config(RetryConfig()) if retry is None else retry)


def _job_stream(config: JobConfig, concurrency: int | None,
                max_pending: int | None) -> RolloutStream:
    if concurrency is not None:
        config = config.model_copy(update={"n_concurrent_trials": concurrency})
    prepared = prepare_job(config, source=config.name)
    environment = config.environment
    provider = get_provider(environment.type, environment.provider_config)

    async def prepare() -> None:
        if prepared.needs_sandboxes:
            await provider.preflight()
        with job_lock(prepared.job_dir):
            start_new_job(prepared)

    return RolloutStream(make_job(prepared), prepare, max_pending)


def _config_stream(configs: list[RolloutConfig | PlannedRollout], concurrency: int, name: str,
                   jobs_dir: Path, max_pending: int | None, retry: RetryPolicy) -> RolloutStream:
    if (jobs_dir / name).exists():
        raise ConfigError(f"{jobs_dir / name}: a job of this name already exists: pass "
                          "another job_name")
    trial_list = [c if isinstance(c, PlannedRollout) else PlannedRollout(c, load_task(c.task_path))
                  for c in configs]
    backends = {(t.config.environment, repr(sorted((t.config.provider_config or {}).items()))):
                t.config for t in trial_list if _needs_sandbox(t)}
    providers = [get_provider(c.environment, c.provider_config) for c in backends.values()]

    async def prepare() -> None:
        for provider in providers:
            await provider.preflight()

    job = Job(name, jobs_dir, trial_list, concurrency=concurrency, retry=retry)
    return RolloutStream(job, prepare, max_pending)


def _needs_sandbox(trial: PlannedRollout) -> bool:
    """False for a QA item whose agents all run on the host (no backend to check)."""
    if trial.task is None or trial.task.qa is None:
        return True
    from benchflow.agents.base import driver_needs_sandbox

    agents = {role.agent for scene in trial.config.scenes for role in scene.roles}
    return any(a not in trial.drivers or driver_needs_sandbox(trial.drivers[a]) for a in agents)


__all__ = ["RolloutStream", "Trials", "stream"]
