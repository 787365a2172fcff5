"""`benchflow.train.RolloutBatch` on fake sandboxes: items as rollouts finish, backpressure
(a consumer that does not read stops the job from starting more), and the per-step
deadline (stragglers cancelled, their sandboxes removed, and reported)."""

from __future__ import annotations

import math

import anyio.lowlevel
import pytest

from benchflow.config import RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.job.models import JobResult
from benchflow.train import RolloutBatch, run_batch

from .conftest import write_task

pytestmark = pytest.mark.anyio


def _configs(root, n: int) -> list[RolloutConfig]:
    for i in range(n):
        write_task(root, f"t{i}")
    return [RolloutConfig(task_path=root / f"t{i}", scenes=[Scene.single(agent="oracle")],
                          environment="fake") for i in range(n)]


async def test_backpressure_bounds_started_and_unconsumed_rollouts(tmp_path, behaviour):
    """The consumer yields to the job many times after each item: without the bound, every
    rollout would have started by the first look."""
    configs = _configs(tmp_path / "bench", 6)
    seen: list[int] = []
    async with RolloutBatch(configs, concurrency=6, max_pending=2, job_name="bp",
                            jobs_dir=tmp_path / "jobs") as batch:
        consumed = 0
        async for item in batch:
            consumed += 1
            for _ in range(200):  # a slow trainer step
                await anyio.lowlevel.checkpoint()
            seen.append(behaviour.starts)
            assert behaviour.starts - consumed <= 2, (behaviour.starts, consumed)
            assert item.result.reward == 1.0
            assert item.samples == [] and set(item.skipped.values()) == {"no_model_calls"}
    assert consumed == 6 and seen[-1] == 6
    assert seen[0] <= 3  # one consumed + two pending
    assert batch.report.skipped_samples == {"no_model_calls": 6}
    assert not batch.report.stragglers and not batch.report.deadline_hit


async def test_deadline_cancels_and_reports_stragglers(tmp_path, behaviour):
    behaviour.delay_sec = math.inf  # every agent outlives the step's 0.3 s deadline
    configs = _configs(tmp_path / "bench", 3)
    async with RolloutBatch(configs, concurrency=2, deadline_sec=0.3, job_name="late",
                            jobs_dir=tmp_path / "jobs") as batch:
        items = await batch.collect()
    assert items == []
    assert batch.report.deadline_hit
    assert sorted(batch.report.stragglers) == [f"oracle/bench/t{i}__1" for i in range(3)]
    assert behaviour.live == 0  # the cancelled rollouts removed their sandboxes
    saved = JobResult.model_validate_json((tmp_path / "jobs" / "late" / "result.json")
                                          .read_text())
    assert saved.cancelled


def test_run_batch_from_synchronous_code(tmp_path, behaviour):
    items, report = run_batch(_configs(tmp_path / "bench", 2), concurrency=2,
                              job_name="sync", jobs_dir=tmp_path / "jobs")
    assert sorted(i.result.task_name for i in items) == ["t0", "t1"]
    assert sorted(report.finished) == ["oracle/bench/t0__1", "oracle/bench/t1__1"]


def test_bad_backpressure_bound(tmp_path, behaviour):
    with pytest.raises(ConfigError, match="max_pending"):
        RolloutBatch(_configs(tmp_path / "bench", 1), max_pending=0, jobs_dir=tmp_path / "j")


def test_retries_of_transient_failures_can_be_turned_off(tmp_path, behaviour):
    from benchflow.job.retry import NO_RETRY

    behaviour.start_failures = 1  # the first sandbox start fails with a transient 500
    (item,), _ = run_batch(_configs(tmp_path / "a", 1), job_name="default",
                           jobs_dir=tmp_path / "jobs")
    assert item.result.error is None and len(item.result.retried_errors) == 1
    behaviour.start_failures = 1
    (item,), report = run_batch(_configs(tmp_path / "b", 1), job_name="off",
                                jobs_dir=tmp_path / "jobs", retry=NO_RETRY)
    assert item.result.error is not None and item.result.error.retryable
    assert item.result.retried_errors == [] and report.errors
