"""An async batch of rollouts for any trainer, on `benchflow.stream`: submit N rollouts
against the policy endpoint, get each one's token samples as it finishes, with
backpressure and a per-step deadline.

```python
trials = [task.trial(policy, attempt=g + 1) for task in step_tasks for g in range(8)]
async with RolloutBatch(trials, concurrency=16, max_pending=32, deadline_sec=600,
                        roles=("coder",)) as batch:
    async for item in batch:              # in the order rollouts finish
        trainer.add(item.samples)         # TokenSamples of the trainable role(s)
print(batch.report.stragglers)            # cancelled at the deadline, never awaited
```

Underneath is a job (`jobs/<job_name>/`, result.json per rollout, retries of transient
infrastructure failures, every sandbox removed). `max_pending` bounds the rollouts
started and not yet taken by the consumer; at `deadline_sec` after the first `__anext__`
the rollouts still running are cancelled (each removes its sandbox), the queued ones are
skipped, and both are listed in `report.stragglers`; the iteration then ends.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import anyio.to_thread

from benchflow.config import RolloutConfig
from benchflow.job.export import rollout_token_samples
from benchflow.job.job import PlannedRollout
from benchflow.job.retry import RetryPolicy
from benchflow.job.stream import RolloutStream, stream
from benchflow.paths import rollout_name
from benchflow.rollout.result import RolloutResult
from benchflow.paths import default_job_name
from benchflow.trajectory.exporters.tokens import SkipReason, TokenSample

T = TypeVar("T")


@dataclass
class BatchItem:
    """One finished rollout: its result, its token samples (for `roles`), and the roles
    that gave none with the reason."""

    result: RolloutResult
    samples: list[TokenSample]
    skipped: dict[str | None, SkipReason] = field(default_factory=dict)


@dataclass
class BatchReport:
    """What a batch did: finished rollouts, stragglers cancelled at the deadline, errors,
    roles without samples."""

    finished: list[str] = field(default_factory=list)
    stragglers: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    skipped_samples: Counter[str] = field(default_factory=Counter)
    deadline_hit: bool = False


class RolloutBatch:
    """Rollouts run as one job, yielded as `BatchItem`s as they finish (module docstring).

    Args:
        trials: rollout configs or planned trials (`TrainTask.trial`), each with its policy
            endpoint and capture set.
        concurrency: rollouts running at once.
        max_pending: rollouts started and not yet consumed (default: 2 x concurrency).
        deadline_sec: the step's deadline from the first `__anext__`; None: none.
        roles: the trainable roles whose samples are kept (empty: every role).
        job_name, jobs_dir: the job folder (default: a fresh name under `jobs/`).
        retry: retries of transient failures (default: the job default; `NO_RETRY`: none).
    """

    def __init__(self, trials: Sequence[RolloutConfig | PlannedRollout], *, concurrency: int = 8,
                 max_pending: int | None = None, deadline_sec: float | None = None,
                 roles: Sequence[str] = (), job_name: str | None = None,
                 jobs_dir: Path | None = None, retry: RetryPolicy | None = None) -> None:
        self.roles = tuple(roles)
        self.deadline_sec = deadline_sec
        self.report = BatchReport()
        self.job_dir_root = jobs_dir or Path("jobs")
        name = job_name or f"{default_job_name()}-{uuid.uuid4().hex[:6]}"
        self.stream: RolloutStream = stream(
            list(trials), concurrency=concurrency, job_name=name, jobs_dir=self.job_dir_root,
            max_pending=2 * concurrency if max_pending is None else max_pending, retry=retry)
        self._deadline: float | None = None
        self._done = False

    @property
    def job_dir(self) -> Path:
        return self.stream.job.job_dir

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> BatchItem:
        if self._done:
            raise StopAsyncIteration
        if self._deadline is None and self.deadline_sec is not None:
            self._deadline = anyio.current_time() + self.deadline_sec
        left = None if self._deadline is None else self._deadline - anyio.current_time()
        result: RolloutResult | None = None
        with anyio.move_on_after(left):
            try:
                result = await self.stream.__anext__()
            except StopAsyncIteration:
                self._done = True
                raise
        if result is None:
            await self._stop_at_deadline()
            raise StopAsyncIteration
        return await self._item(result)

    async def _item(self, result: RolloutResult) -> BatchItem:
        self.report.finished.append(result.rollout_name)
        if result.error is not None:
            self.report.errors[result.rollout_name] = result.error.type
        samples, skipped = await anyio.to_thread.run_sync(
            rollout_token_samples, result, self.job_dir / result.rollout_name, self.roles)
        for reason in skipped.values():
            self.report.skipped_samples[reason] += 1
        return BatchItem(result, samples, skipped)

    async def _stop_at_deadline(self) -> None:
        """Cancel what still runs; the rollouts without a result are the stragglers."""
        self._done = True
        self.report.deadline_hit = True
        self.report.stragglers = [
            rollout_name(r.agent_name, r.dataset_name, r.task_name, r.attempt)
            for r in self.stream.job.skipped(include_running=True)]
        await self.stream.aclose()

    async def collect(self) -> list[BatchItem]:
        """Every item, in finishing order (until the deadline)."""
        return [item async for item in self]

    async def aclose(self) -> None:
        """Cancel what still runs and wait until every sandbox is removed."""
        self._done = True
        await self.stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from synchronous code (a trainer's callback), on a fresh
    asyncio loop in its own thread, so it works whether or not the caller's thread already
    runs an event loop."""
    out: list[T] = []
    error: list[BaseException] = []

    def main() -> None:
        try:
            out.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=main, name="benchflow-batch", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return out[0]


def run_batch(trials: Sequence[RolloutConfig | PlannedRollout], **options: Any
              ) -> tuple[list[BatchItem], BatchReport]:
    """`RolloutBatch(trials, **options)` to the end, from synchronous code."""
    async def main() -> tuple[list[BatchItem], BatchReport]:
        async with RolloutBatch(trials, **options) as batch:
            items = await batch.collect()
        return items, batch.report

    return run_sync(main())


__all__ = ["BatchItem", "BatchReport", "RolloutBatch", "run_batch", "run_sync"]
